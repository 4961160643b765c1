//! A seeded, structure-aware fuzzer for everything a network can send.
//!
//! It plays hundreds of hostile peers against the request/response server
//! (`rr::Server` with the echo handler over [`MemTransport`]): handshakes
//! completed and abandoned, data in, out of and overlapping the window, RST
//! and ACK storms, windows that stay zero forever, FINs, option soup, wrong
//! and partial checksums, fragments, truncated and random frames, ARP and
//! ICMP junk, impossible source addresses, and byte flips of valid frames.
//! Peers learn the server's sequence numbers from its answers, so most
//! segments land inside the window where the state machine is deepest.
//!
//! Alongside, an honest client (a second engine) keeps opening connections
//! and checking echoes, so a wedged server is caught as it happens. At the
//! end time runs past every timeout and the server must be back to its
//! listeners: no connection, half-open socket or closing socket left.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use bytes::BytesMut;

use super::frames::{self, parse_tcp, TcpSpec};
use super::{arp_target, config, mac_of, MemTransport};
use crate::codec::LengthPrefixed;
use crate::rr::{Echo, Server, ServerConfig};
use crate::transport::{ConnId, Event, Transport};
use crate::xsk::drops::DropStats;

const SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const HONEST: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const PORT: u16 = 7;

/// What to run.
#[derive(Clone, Debug)]
pub struct FuzzConfig {
    pub frames: u64,
    pub seed: u64,
    /// Hostile peers (distinct address/port pairs) in play at once.
    pub peers: usize,
    /// Connections the server accepts at most (small, so the limit is hit).
    pub max_conns: usize,
}

impl Default for FuzzConfig {
    fn default() -> Self {
        FuzzConfig { frames: 100_000, seed: 1, peers: 256, max_conns: 160 }
    }
}

/// What happened.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct FuzzReport {
    pub frames: u64,
    pub seed: u64,
    /// Frames the server sent back.
    pub answers: u64,
    pub drops: DropStats,
    pub accepted: u64,
    pub requests: u64,
    pub honest_echoes: u64,
    pub max_live_sockets: usize,
    pub max_connections: usize,
    pub max_half_open: usize,
    /// At the end, after every timeout ran out.
    pub end_live_sockets: usize,
    pub end_listening: usize,
    pub end_connections: usize,
    pub end_half_open: usize,
    pub end_server_conns: usize,
    pub idle_closed: u64,
    pub timed_out: u64,
    pub fin_timeouts: u64,
}

struct Peer {
    ip: Ipv4Addr,
    port: u16,
    /// Our next sequence number.
    seq: u32,
    /// The server's next sequence number, once seen.
    srv: Option<u32>,
}

/// splitmix64: fast, seedable, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
}

type EchoServer = Server<MemTransport, LengthPrefixed, Echo>;

/// Runs the fuzzer; `progress` is called about every 1% of the frames.
/// Returns an error naming what broke (a wedge, a leak), with the report so far.
pub fn run(cfg: &FuzzConfig, mut progress: impl FnMut(&FuzzReport)) -> Result<FuzzReport, (String, FuzzReport)> {
    let mut scfg = config(SERVER);
    scfg.max_conns = cfg.max_conns;
    scfg.backlog = 32;
    scfg.rx_buffer = 4096;
    scfg.tx_buffer = 4096;
    // Bounds that make every hostile connection go away in the end.
    scfg.idle_timeout = Some(Duration::from_secs(30));
    scfg.fin_timeout = Duration::from_secs(10);
    scfg.timeout = Some(Duration::from_secs(20));
    scfg.half_open_bytes = 128 * 8192;
    scfg.accept_partial_csum = true;
    scfg.seed = cfg.seed;
    let srv_t = MemTransport::new(scfg);
    let scfg = ServerConfig { port: PORT, write_high_water: 64 << 10, poll_timeout: Some(Duration::ZERO) };
    let mut server: EchoServer = Server::new(srv_t, LengthPrefixed::new(1024), Echo, scfg).map_err(|e| (e.to_string(), FuzzReport::default()))?;
    let mut honest = MemTransport::new(config(HONEST));
    let now = server.transport().now;
    let t = server.transport_mut();
    t.engine.teach_neighbour(now, HONEST, mac_of(HONEST), &mut t.link);
    honest.engine.teach_neighbour(now, SERVER, mac_of(SERVER), &mut honest.link);

    let mut rng = Rng(cfg.seed ^ 0x5eed);
    let mut peers: Vec<Peer> = (0..cfg.peers)
        .map(|i| Peer { ip: Ipv4Addr::new(198, 18, 0, 10 + (i % 240) as u8), port: 1024 + i as u16, seq: rng.next() as u32, srv: None })
        .collect();
    let mut rep = FuzzReport { seed: cfg.seed, ..FuzzReport::default() };
    let mut frame = Vec::with_capacity(2048);
    let mut last_valid: Vec<u8> = Vec::new();
    let mut honest_state = Honest::default();
    let step = (cfg.frames / 100).max(1);
    let mut events = Vec::new();

    for i in 0..cfg.frames {
        let p = rng.below(peers.len() as u64) as usize;
        generate(&mut rng, &mut peers[p], &last_valid, &mut frame);
        if frame.len() >= 54 && rng.chance(300) {
            last_valid.clone_from(&frame);
        }
        server.transport_mut().inbox.push_back(std::mem::take(&mut frame));
        frame = Vec::with_capacity(2048);
        // Batches as the driver sees them; time moves a little per batch
        // and now and then a lot (retransmission and idle timers fire).
        if i % 32 == 31 {
            let d = if rng.chance(5) { Duration::from_millis(rng.below(5000)) } else { Duration::from_micros(200) };
            server.transport_mut().advance(d);
            honest.advance(d);
            server.step(Some(Duration::ZERO)).map_err(|e| (format!("server step failed: {e}"), rep.clone()))?;
            route(&mut server, &mut honest, &mut peers, &mut rep);
            honest_state.drive(&mut honest, &mut events);
            rep.honest_echoes = honest_state.echoes;
            let s = server.transport().engine.stats();
            rep.max_live_sockets = rep.max_live_sockets.max(s.live_sockets);
            rep.max_connections = rep.max_connections.max(s.connections);
            rep.max_half_open = rep.max_half_open.max(s.half_open);
        }
        if i % step == step - 1 {
            snapshot(&server, &mut rep, i + 1);
            progress(&rep);
        }
    }
    // The honest client must still be served after all of that: at once,
    // or, where hostile peers hold every connection the limit allows, once
    // the idle timeout (30 s here) has freed them.
    let echoes_before = honest_state.echoes;
    for _ in 0..4000 {
        server.transport_mut().advance(Duration::from_millis(10));
        honest.advance(Duration::from_millis(10));
        server.step(Some(Duration::ZERO)).map_err(|e| (format!("server step failed: {e}"), rep.clone()))?;
        route(&mut server, &mut honest, &mut peers, &mut rep);
        honest_state.drive(&mut honest, &mut events);
        if honest_state.echoes >= echoes_before + 3 {
            break;
        }
    }
    rep.honest_echoes = honest_state.echoes;
    if honest_state.echoes < echoes_before + 3 {
        snapshot(&server, &mut rep, cfg.frames);
        let hs = honest.engine.stats();
        return Err((
            format!(
                "the honest client got no echo after the fuzzing stopped: the server is wedged (client: conn {:?} up {} sent {} echoes {} buffered {}; client engine {hs:?}; server engine {:?})",
                honest_state.conn, honest_state.up, honest_state.sent, honest_state.echoes, honest_state.buf.len(), server.transport().engine.stats()
            ),
            rep,
        ));
    }
    // Let every timer run out: idle, FIN, retransmission, keepalive.
    honest_state.close(&mut honest);
    for _ in 0..200 {
        server.transport_mut().advance(Duration::from_millis(500));
        honest.advance(Duration::from_millis(500));
        server.step(Some(Duration::ZERO)).map_err(|e| (format!("server step failed: {e}"), rep.clone()))?;
        route(&mut server, &mut honest, &mut peers, &mut rep);
        let _ = honest.poll(&mut events, None);
        events.clear();
    }
    snapshot(&server, &mut rep, cfg.frames);
    let s = server.transport().engine.stats();
    if s.connections != 0 || s.half_open != 0 || s.live_sockets != s.listening || server.connections() != 0 {
        return Err((format!("sockets left after every timeout: {s:?}, server connections {}", server.connections()), rep));
    }
    Ok(rep)
}

fn snapshot(server: &EchoServer, rep: &mut FuzzReport, frames: u64) {
    let s = server.transport().engine.stats();
    rep.frames = frames;
    rep.drops = s.drops;
    rep.accepted = s.accepted;
    rep.requests = server.stats().requests;
    rep.idle_closed = s.idle_closed;
    rep.timed_out = s.timed_out;
    rep.fin_timeouts = s.fin_timeouts;
    rep.end_live_sockets = s.live_sockets;
    rep.end_listening = s.listening;
    rep.end_connections = s.connections;
    rep.end_half_open = s.half_open;
    rep.end_server_conns = server.connections();
}

/// The server's answers: to the honest client, or learned from by the peers.
fn route(server: &mut EchoServer, honest: &mut MemTransport, peers: &mut [Peer], rep: &mut FuzzReport) {
    for f in server.transport_mut().take_sent() {
        rep.answers += 1;
        // ARP for the honest client is answered the way the shared-mode
        // driver does (from the "kernel's table").
        if arp_target(&f) == Some(HONEST) {
            let t = server.transport_mut();
            let now = t.now;
            t.engine.teach_neighbour(now, HONEST, mac_of(HONEST), &mut t.link);
            continue;
        }
        let Some(seg) = parse_tcp(&f) else { continue };
        if seg.dst == HONEST {
            honest.inbox.push_back(f);
            continue;
        }
        // Peer ports are 1024 + index.
        let idx = seg.dport.wrapping_sub(1024) as usize;
        if let Some(p) = peers.get_mut(idx) {
            if p.ip == seg.dst {
                let len = seg.payload.len() as u32 + seg.syn() as u32 + seg.fin() as u32;
                p.srv = Some(seg.seq.wrapping_add(len));
                if seg.syn() && seg.ack_set() {
                    p.seq = seg.ack;
                }
            }
        }
    }
    for f in honest.take_sent() {
        if arp_target(&f) == Some(SERVER) {
            let now = honest.now;
            honest.engine.teach_neighbour(now, SERVER, mac_of(SERVER), &mut honest.link);
            continue;
        }
        server.transport_mut().inbox.push_back(f);
    }
}


/// One connection at a time, one echo at a time, checked byte for byte.
#[derive(Default)]
struct Honest {
    conn: Option<ConnId>,
    up: bool,
    sent: u32,
    buf: BytesMut,
    echoes: u64,
}

impl Honest {
    fn drive(&mut self, t: &mut MemTransport, events: &mut Vec<Event>) {
        if self.conn.is_none() {
            self.conn = t.connect(SocketAddrV4::new(SERVER, PORT)).ok();
            self.up = false;
        }
        let _ = t.poll(events, None);
        for e in events.drain(..) {
            match e {
                Event::Connected(_) => self.up = true,
                Event::Closed(c) => {
                    // A request in flight died with the connection.
                    t.close(c);
                    self.conn = None;
                    self.buf.clear();
                    self.sent = self.echoes as u32;
                }
                _ => {}
            }
        }
        let Some(c) = self.conn else { return };
        if !self.up {
            return;
        }
        let _ = t.recv(c, &mut self.buf);
        let want = 4 + 8;
        if self.buf.len() >= want {
            let n = u32::from_be_bytes([self.buf[4], self.buf[5], self.buf[6], self.buf[7]]);
            assert_eq!(&self.buf[..4], &8u32.to_be_bytes(), "echo framing");
            assert_eq!(n, self.sent, "echo payload");
            let _ = self.buf.split_to(want);
            self.echoes += 1;
            // New connections now and then: accept must keep working too.
            if self.echoes % 8 == 0 {
                t.close(c);
                self.conn = None;
                self.buf.clear();
                return;
            }
        }
        if self.buf.is_empty() && self.echoes as u32 == self.sent {
            self.sent += 1;
            let mut m = [0u8; 12];
            m[..4].copy_from_slice(&8u32.to_be_bytes());
            m[4..8].copy_from_slice(&self.sent.to_be_bytes());
            if t.send(c, &m).ok() != Some(12) {
                self.sent -= 1;
            }
        }
        let _ = t.flush();
    }

    fn close(&mut self, t: &mut MemTransport) {
        if let Some(c) = self.conn.take() {
            t.close(c);
        }
    }
}

/// One hostile frame from `p` into `out`.
fn generate(rng: &mut Rng, p: &mut Peer, last_valid: &[u8], out: &mut Vec<u8>) {
    let mut payload = [0u8; 600];
    let plen = match rng.below(4) {
        0 => 0,
        1 => rng.below(16) as usize,
        2 => rng.below(200) as usize,
        _ => rng.below(600) as usize,
    };
    for b in &mut payload[..plen] {
        *b = rng.next() as u8;
    }
    // Often a well-formed echo request, so the server's handler runs.
    if plen >= 4 && rng.chance(500) {
        let n = (plen - 4) as u32;
        payload[..4].copy_from_slice(&n.to_be_bytes());
    }
    let mut opts = [0u8; 40];
    let olen = if rng.chance(200) { random_options(rng, &mut opts) } else { 0 };
    let srv = p.srv.unwrap_or_else(|| rng.next() as u32);
    let mut s = TcpSpec {
        src_mac: [2, 0, 0, 0, 0, p.ip.octets()[3]],
        dst_mac: mac_of(SERVER),
        src: p.ip,
        dst: SERVER,
        sport: p.port,
        dport: PORT,
        seq: p.seq,
        ack: srv,
        flags: 0x10,
        window: 65535,
        options: &opts[..olen],
        payload: &[],
        partial_csum: rng.chance(100),
        ttl: 64,
        frag: 0x4000,
    };
    match rng.below(20) {
        // A new connection (often with options).
        0 | 1 => {
            p.seq = rng.next() as u32;
            p.srv = None;
            s.seq = p.seq;
            s.flags = 0x02;
            s.ack = 0;
            if olen == 0 {
                s.options = &[2, 4, 5, 0xb4, 1, 3, 3, 7, 4, 2, 1, 1];
            }
        }
        // Completes the handshake / acknowledges.
        2 | 3 => {
            if p.srv.is_some() {
                p.seq = p.seq.wrapping_add(0);
            }
        }
        // Data in the window.
        4..=7 => {
            s.flags = 0x18;
            s.payload = &payload[..plen];
            p.seq = p.seq.wrapping_add(plen as u32);
        }
        // Data out of or overlapping the window.
        8 => {
            s.flags = 0x18;
            s.payload = &payload[..plen];
            s.seq = match rng.below(4) {
                0 => p.seq.wrapping_sub(rng.below(1000) as u32),
                1 => p.seq.wrapping_add(rng.below(100_000) as u32),
                2 => p.seq.wrapping_add(0x8000_0000),
                _ => rng.next() as u32,
            };
        }
        // RST, in window or not.
        9 => {
            s.flags = if rng.chance(500) { 0x04 } else { 0x14 };
            if rng.chance(500) {
                s.seq = rng.next() as u32;
            }
        }
        // FIN.
        10 => {
            s.flags = 0x11;
            p.seq = p.seq.wrapping_add(1);
        }
        // A window that stays zero, with a stale or future ACK.
        11 => {
            s.window = 0;
            s.ack = srv.wrapping_add(rng.below(3) as u32).wrapping_sub(1);
        }
        // Any flag combination, urgent pointer included.
        12 => {
            s.flags = rng.next() as u8;
            s.payload = &payload[..plen];
        }
        // Wrong checksum: build, then flip a payload byte.
        13 => {
            s.payload = &payload[..plen.max(1)];
            frames::tcp_into(&s, out);
            let at = out.len() - 1;
            out[at] ^= 0x55;
            return;
        }
        // A fragment.
        14 => {
            s.frag = if rng.chance(500) { 0x2000 } else { 0x0000 | (rng.below(0x1fff) as u16) };
            s.payload = &payload[..plen];
        }
        // An impossible source.
        15 => {
            s.src = match rng.below(5) {
                0 => Ipv4Addr::UNSPECIFIED,
                1 => Ipv4Addr::BROADCAST,
                2 => Ipv4Addr::new(224, 0, 0, 1),
                3 => Ipv4Addr::LOCALHOST,
                _ => SERVER,
            };
            s.flags = 0x02;
        }
        // Random bytes, or a valid frame truncated or bit-flipped.
        16 => {
            out.clear();
            let n = rng.below(120) as usize;
            out.extend((0..n).map(|_| rng.next() as u8));
            if n >= 14 && rng.chance(700) {
                out[..6].copy_from_slice(&mac_of(SERVER));
                out[12..14].copy_from_slice(if rng.chance(500) { &[8, 0] } else { &[8, 6] });
                if n > 14 && rng.chance(500) {
                    out[14] = 0x45;
                }
            }
            return;
        }
        17 => {
            out.clear();
            out.extend_from_slice(last_valid);
            if !out.is_empty() {
                if rng.chance(500) {
                    let cut = rng.below(out.len() as u64) as usize;
                    out.truncate(cut);
                } else {
                    for _ in 0..=rng.below(4) {
                        let at = rng.below(out.len() as u64) as usize;
                        out[at] ^= 1 << rng.below(8);
                    }
                }
            }
            return;
        }
        // ARP, for us or not, from anywhere.
        18 => {
            let sender = if rng.chance(500) { p.ip } else { Ipv4Addr::from(rng.next() as u32) };
            let target = if rng.chance(700) { SERVER } else { Ipv4Addr::from(rng.next() as u32) };
            *out = frames::arp(1 + rng.below(2) as u16, s.src_mac, if rng.chance(500) { [0xff; 6] } else { mac_of(SERVER) }, sender, target);
            return;
        }
        // ICMP, valid echo or junk.
        _ => {
            icmp(rng, &s, &payload[..plen], out);
            return;
        }
    }
    frames::tcp_into(&s, out);
}

fn random_options(rng: &mut Rng, opts: &mut [u8; 40]) -> usize {
    let n = 4 * (1 + rng.below(10) as usize);
    for b in &mut opts[..n] {
        *b = rng.next() as u8;
    }
    // Well-formed SACK blocks with wild edges, now and then.
    if rng.chance(300) && n >= 20 {
        opts[0] = 1;
        opts[1] = 1;
        opts[2] = 5;
        opts[3] = 18;
        for b in &mut opts[4..20] {
            *b = rng.next() as u8;
        }
    }
    n
}

fn icmp(rng: &mut Rng, s: &TcpSpec<'_>, payload: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let total = 20 + 8 + payload.len();
    out.extend_from_slice(&s.dst_mac);
    out.extend_from_slice(&s.src_mac);
    out.extend_from_slice(&[8, 0, 0x45, 0]);
    out.extend_from_slice(&(total as u16).to_be_bytes());
    out.extend_from_slice(&[0, 1, 0x40, 0, 64, 1, 0, 0]);
    out.extend_from_slice(&s.src.octets());
    out.extend_from_slice(&s.dst.octets());
    let c = !smoltcp::wire::checksum::data(&out[14..34]);
    out[24..26].copy_from_slice(&c.to_be_bytes());
    let t = out.len();
    out.extend_from_slice(&[if rng.chance(700) { 8 } else { rng.next() as u8 }, rng.next() as u8, 0, 0]);
    out.extend_from_slice(&(rng.next() as u32).to_be_bytes());
    out.extend_from_slice(payload);
    let c = !smoltcp::wire::checksum::data(&out[t..]);
    out[t + 2..t + 4].copy_from_slice(&c.to_be_bytes());
}

#[cfg(test)]
mod tests {
    #[test]
    fn short_run_is_clean() {
        let cfg = super::FuzzConfig { frames: 20_000, ..Default::default() };
        let r = super::run(&cfg, |_| {}).unwrap_or_else(|(e, r)| panic!("{e}: {r:?}"));
        assert!(r.accepted > 0, "the fuzzer never got a connection in: {r:?}");
        assert!(r.requests > 0, "no request reached the handler: {r:?}");
        assert!(r.drops.total() > 0);
    }
}
