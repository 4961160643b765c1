//! A seeded, structure-aware fuzzer for everything a network can send.
//!
//! It plays hundreds of hostile peers against the request/response server
//! (`rr::Server` with the echo handler over `MemTransport`): handshakes
//! completed and abandoned, data in, out of and overlapping the window, RST
//! and ACK storms, windows that stay zero forever, FINs, option soup, wrong
//! and partial checksums, fragments, truncated and random frames, ARP and
//! ICMP junk, impossible source addresses, and byte flips of valid frames.
//! With `ipv6`, every other peer speaks IPv6 to the same listener, and
//! sends what only IPv6 has: extension header chains, fragments, neighbour
//! discovery and ICMPv6 with options of every shape, lengths that lie.
//! Peers learn the server's sequence numbers from its answers, so most
//! segments land inside the window where the state machine is deepest.
//!
//! Alongside, an honest client (a second engine) keeps opening connections
//! and checking echoes, so a wedged server is caught as it happens. At the
//! end time runs past every timeout and the server must be back to its
//! listeners: no connection, half-open socket or closing socket left.
//!
//! With `twin`, a second server that gives every segment to smoltcp's general
//! path gets the same frames at the same times: its answers must equal the
//! first's (which takes the fast path) frame for frame, and every socket's whole
//! state must match after each batch. That is the fast path's equivalence test
//! under everything hostile peers send.

mod honest;
mod hostile;
mod hostile6;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use super::frames::{parse_tcp, parse_tcp6};
use super::{config, mac_of, MemTransport, Rng};
use stack_engine::testing::arp_target;
use crate::codec::LengthPrefixed;
use crate::rr::{Echo, Server, ServerConfig};
use crate::xsk::DropStats;
use honest::Honest;
use hostile::{generate, Peer};

const SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const HONEST: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// The server's IPv6 address (`testing::config` gives it).
const SERVER6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1);
const PORT: u16 = 7;

/// What to run.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct FuzzConfig {
    /// Hostile frames to send.
    pub frames: u64,
    /// Seed of everything random.
    pub seed: u64,
    /// Hostile peers (distinct address/port pairs) in play at once.
    pub peers: usize,
    /// Connections the server accepts at most (small, so the limit is hit).
    pub max_conns: usize,
    /// The server's socket buckets (`EngineConfig::buckets`; 0: its default). Many leave
    /// most connections alone in theirs, where `Engine::send_now` sends answers at once.
    pub buckets: usize,
    /// When the server answers SYNs with cookies (`Always` takes every
    /// handshake through the cookie path).
    pub syn_cookies: crate::xsk::SynCookies,
    /// Run a twin server without the fast path and compare (see the module docs).
    pub twin: bool,
    /// The server and the honest client offer microsecond TCP timestamps
    /// (`Recovery::timestamps`), and the hostile peers send timestamp options
    /// with echoes both plausible and wild.
    pub timestamps: bool,
    /// Every other hostile peer speaks IPv6 (see the module docs).
    pub ipv6: bool,
    /// The server delays its ACKs this long (`EngineConfig::ack_delay`, as under tokio).
    pub ack_delay: Option<Duration>,
}

impl Default for FuzzConfig {
    fn default() -> Self {
        FuzzConfig {
            frames: 100_000,
            seed: 1,
            peers: 256,
            max_conns: 160,
            buckets: 0,
            syn_cookies: crate::xsk::SynCookies::Auto,
            twin: false,
            timestamps: false,
            ipv6: false,
            ack_delay: None,
        }
    }
}

/// What happened.
#[derive(Clone, Debug, Default, serde::Serialize)]
#[non_exhaustive]
pub struct FuzzReport {
    /// Hostile frames sent.
    pub frames: u64,
    /// Seed of everything random.
    pub seed: u64,
    /// Frames the server sent back.
    pub answers: u64,
    /// Of those, TCP segments to IPv6 peers.
    pub answers6: u64,
    /// The server engine's drops by reason.
    pub drops: DropStats,
    /// Connections the server accepted.
    pub accepted: u64,
    /// SYNs the server answered with a cookie.
    pub syn_cookies_sent: u64,
    /// Half-open connections rebuilt from a valid cookie.
    pub syn_cookies_accepted: u64,
    /// Connections whose MSS a Packet Too Big or Fragmentation Needed lowered.
    pub path_mtu_lowered: u64,
    /// Requests that reached the echo handler.
    pub requests: u64,
    /// Echoes the honest client got back, checked.
    pub honest_echoes: u64,
    /// Most sockets alive at once.
    pub max_live_sockets: usize,
    /// Most connections at once.
    pub max_connections: usize,
    /// Most half-open connections at once.
    pub max_half_open: usize,
    /// At the end, after every timeout ran out.
    pub end_live_sockets: usize,
    /// Listeners at the end.
    pub end_listening: usize,
    /// Connections at the end.
    pub end_connections: usize,
    /// Half-open connections at the end.
    pub end_half_open: usize,
    /// Connections the server still tracked at the end.
    pub end_server_conns: usize,
    /// Connections closed by the idle timeout.
    pub idle_closed: u64,
    /// Connections aborted by the retransmission timeout.
    pub timed_out: u64,
    /// Closes aborted by the FIN timeout.
    pub fin_timeouts: u64,
    /// Segments the server's fast path took.
    pub fast_path: u64,
    /// Segments the server's fast path sent (fast-send).
    pub fast_send: u64,
    /// The server's bucket egresses that were fast sends and sockets with nothing due
    /// (fast-egress: no scan after).
    pub fast_egress: u64,
    /// Answers the server sent when the application wrote them, its bucket then needing no
    /// egress (`Engine::send_now`).
    pub sent_now: u64,
    /// Pure ACKs the server's fast path took that left nothing to send or report, their
    /// bucket then needing no egress.
    pub acks_quiet: u64,
    /// Buckets whose sockets' states were compared with the twin's (0: no twin); the
    /// answers are compared after every batch.
    pub twin_checks: u64,
    /// What the server's loss recovery did (the peers' ACKs short of what it sent, with
    /// SACK blocks, draw fast retransmits and the recovery's holes).
    pub recovery: stack_engine::RecoveryStats,
}


type EchoServer = Server<MemTransport, LengthPrefixed, Echo>;

/// Runs the fuzzer; `progress` is called about every 1% of the frames.
/// Returns an error naming what broke (a wedge, a leak), with the report so far.
// The report rides with the error because it is what the caller prints; one
// call per run, so its size costs nothing.
#[allow(clippy::result_large_err)]
pub fn run(cfg: &FuzzConfig, mut progress: impl FnMut(&FuzzReport)) -> Result<FuzzReport, (String, FuzzReport)> {
    let mut server = new_server(cfg, true).map_err(|e| (e, FuzzReport::default()))?;
    let mut twin = if cfg.twin { Some(new_server(cfg, false).map_err(|e| (e, FuzzReport::default()))?) } else { None };
    let mut hcfg = config(HONEST);
    hcfg.tcp.recovery.timestamps = cfg.timestamps;
    let mut honest = MemTransport::new(hcfg);
    let now = server.transport().now;
    honest.engine.add_neighbour(now, SERVER, mac_of(SERVER));

    let mut rng = Rng(cfg.seed ^ 0x5eed);
    let mut peers: Vec<Peer> = (0..cfg.peers)
        .map(|i| {
            let host = 10 + (i % 240) as u8;
            let ip = if cfg.ipv6 && i % 2 == 1 {
                IpAddr::V6(Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, host as u16))
            } else {
                IpAddr::V4(Ipv4Addr::new(198, 18, 0, host))
            };
            Peer { ip, port: 1024 + i as u16, seq: rng.next() as u32, srv: None, una: None, ts: cfg.timestamps }
        })
        .collect();
    let mut rep = FuzzReport { seed: cfg.seed, ..FuzzReport::default() };
    let mut frame = Vec::with_capacity(2048);
    let mut last_valid: Vec<u8> = Vec::new();
    let mut honest_state = Honest::default();
    let step = (cfg.frames / 100).max(1);
    let mut events = Vec::new();
    let mut states = (String::new(), String::new(), Vec::new());
    let mut batches = 0u64;
    // One batch of time for both servers, their answers routed and compared.
    macro_rules! batch {
        ($d:expr) => {{
            let d = $d;
            server.transport_mut().advance(d);
            honest.advance(d);
            server.step(Some(Duration::ZERO)).map_err(|e| (format!("server step failed: {e}"), rep.clone()))?;
            if let Some(t) = twin.as_mut() {
                t.transport_mut().advance(d);
                t.step(Some(Duration::ZERO)).map_err(|e| (format!("twin step failed: {e}"), rep.clone()))?;
            }
            route(&mut server, twin.as_mut(), &mut honest, &mut peers, &mut rep).map_err(|e| (e, rep.clone()))?;
            batches += 1;
            if let Some(t) = twin.as_ref() {
                // Every bucket now and then, as well.
                rep.twin_checks += compare(&server, t, &mut states, batches % 64 == 0).map_err(|e| (e, rep.clone()))?;
            }
        }};
    }

    for i in 0..cfg.frames {
        let p = rng.below(peers.len() as u64) as usize;
        generate(&mut rng, &mut peers[p], &last_valid, &mut frame);
        if frame.len() >= 54 && rng.chance(300) {
            last_valid.clone_from(&frame);
        }
        if let Some(t) = twin.as_mut() {
            t.transport_mut().inbox.push_back(frame.clone());
        }
        server.transport_mut().inbox.push_back(std::mem::take(&mut frame));
        frame = Vec::with_capacity(2048);
        // Batches as the driver sees them; time moves a little per batch
        // and now and then a lot (retransmission and idle timers fire).
        if i % 32 == 31 {
            batch!(if rng.chance(5) { Duration::from_millis(rng.below(5000)) } else { Duration::from_micros(200) });
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
        batch!(Duration::from_millis(10));
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
        batch!(Duration::from_millis(500));
        let _ = honest.poll(&mut events, None);
        events.clear();
    }
    snapshot(&server, &mut rep, cfg.frames);
    if let Some(t) = twin.as_ref() {
        rep.twin_checks += compare(&server, t, &mut states, true).map_err(|e| (e, rep.clone()))?;
    }
    let s = server.transport().engine.stats();
    if s.connections != 0 || s.half_open != 0 || s.live_sockets != s.listening || server.connections() != 0 {
        return Err((format!("sockets left after every timeout: {s:?}, server connections {}", server.connections()), rep));
    }
    Ok(rep)
}

/// The echo server under test, knowing the honest client as the shared-mode driver would.
fn new_server(cfg: &FuzzConfig, fast_path: bool) -> Result<EchoServer, String> {
    let mut scfg = config(SERVER);
    scfg.tcp.max_conns = cfg.max_conns;
    scfg.tcp.buckets = cfg.buckets;
    scfg.tcp.backlog = 32;
    scfg.tcp.rx_buffer = 4096;
    scfg.tcp.tx_buffer = 4096;
    // Bounds that make every hostile connection go away in the end.
    scfg.tcp.idle_timeout = Some(Duration::from_secs(30));
    scfg.tcp.fin_timeout = Duration::from_secs(10);
    scfg.tcp.timeout = Some(Duration::from_secs(20));
    scfg.tcp.half_open_bytes = 128 * 8192;
    scfg.accept_partial_csum = true;
    scfg.seed = cfg.seed;
    scfg.tcp.syn_cookies = cfg.syn_cookies;
    scfg.tcp.recovery.timestamps = cfg.timestamps;
    scfg.tcp.fast_path = fast_path;
    scfg.tcp.ack_delay = cfg.ack_delay;
    let srv_t = MemTransport::new(scfg);
    let scfg = ServerConfig { port: PORT, write_high_water: 64 << 10, poll_timeout: Some(Duration::ZERO) };
    let mut server: EchoServer = Server::new(srv_t, LengthPrefixed::new(1024), Echo, scfg).map_err(|e| e.to_string())?;
    // Odd seeds send through a link with TX checksum offload (as the AF_XDP
    // port with TX metadata): every frame the server answers hostile peers
    // with then takes the offload path (pseudo-header sum, completed by the
    // link), even seeds the user-space fill.
    server.transport_mut().link.csum_offload = cfg.seed % 2 == 1;
    let t = server.transport_mut();
    let now = t.now;
    t.engine.add_neighbour(now, HONEST, mac_of(HONEST));
    Ok(server)
}

/// The twin's state against the server's, in the buckets where the fast path took a
/// segment since the last look (or all): the first difference, with both lines. Where
/// it took none, both engines ran the same code on the same input. Returns the number of
/// buckets compared.
fn compare(server: &EchoServer, twin: &EchoServer, bufs: &mut (String, String, Vec<u64>), all: bool) -> Result<u64, String> {
    let buckets = server.transport().engine.fast_buckets(&mut bufs.2, all);
    bufs.0.clear();
    bufs.1.clear();
    server.transport().engine.dump_state(&buckets, all, &mut bufs.0);
    twin.transport().engine.dump_state(&buckets, all, &mut bufs.1);
    if bufs.0 == bufs.1 {
        return Ok(buckets.len() as u64);
    }
    let (l, (a, b)) = bufs.0.lines().zip(bufs.1.lines()).enumerate().find(|(_, (a, b))| a != b).unwrap_or((0, ("(shorter)", "(shorter)")));
    Err(format!("the fast path's state differs from the general path's (line {l}):\n fast:    {a}\n general: {b}"))
}

fn snapshot(server: &EchoServer, rep: &mut FuzzReport, frames: u64) {
    let s = server.transport().engine.stats();
    rep.frames = frames;
    rep.drops = s.drops;
    rep.accepted = s.accepted;
    rep.syn_cookies_sent = s.syn_cookies_sent;
    rep.syn_cookies_accepted = s.syn_cookies_accepted;
    rep.path_mtu_lowered = s.path_mtu_lowered;
    rep.requests = server.stats().requests;
    rep.idle_closed = s.idle_closed;
    rep.timed_out = s.timed_out;
    rep.fin_timeouts = s.fin_timeouts;
    rep.fast_path = s.fast_path;
    rep.fast_send = s.fast_send;
    rep.fast_egress = s.fast_egress;
    rep.sent_now = s.sent_now;
    rep.acks_quiet = s.acks_quiet;
    rep.recovery = s.recovery;
    rep.end_live_sockets = s.live_sockets;
    rep.end_listening = s.listening;
    rep.end_connections = s.connections;
    rep.end_half_open = s.half_open;
    rep.end_server_conns = server.connections();
}

/// The server's answers: to the honest client, or learned from by the peers. The
/// twin's must be the same.
fn route(server: &mut EchoServer, mut twin: Option<&mut EchoServer>, honest: &mut MemTransport, peers: &mut [Peer], rep: &mut FuzzReport) -> Result<(), String> {
    let sent = server.transport_mut().take_sent();
    if let Some(t) = twin.as_deref_mut() {
        let other = t.transport_mut().take_sent();
        if other != sent {
            let i = sent.iter().zip(&other).position(|(a, b)| a != b).unwrap_or(sent.len().min(other.len()));
            return Err(format!(
                "the fast path's answers differ from the general path's: {} frames against {}, first difference at frame {i}:\n fast:    {:?}\n general: {:?}",
                sent.len(), other.len(), sent.get(i).and_then(|f| parse_tcp(f)), other.get(i).and_then(|f| parse_tcp(f))
            ));
        }
    }
    for f in sent {
        rep.answers += 1;
        // ARP for the honest client is answered the way the shared-mode
        // driver does (from the "kernel's table").
        if arp_target(&f) == Some(HONEST) {
            for s in std::iter::once(&mut *server).chain(twin.as_deref_mut()) {
                let t = s.transport_mut();
                let now = t.now;
                t.engine.add_neighbour(now, HONEST, mac_of(HONEST));
            }
            continue;
        }
        let (dst, seg) = match (parse_tcp(&f), parse_tcp6(&f)) {
            (Some(seg), _) => (IpAddr::V4(seg.dst), seg),
            (None, Some((_, dst, seg))) => {
                rep.answers6 += 1;
                (IpAddr::V6(dst), seg)
            }
            (None, None) => continue,
        };
        if dst == IpAddr::V4(HONEST) {
            honest.inbox.push_back(f);
            continue;
        }
        // Peer ports are 1024 + index.
        let idx = seg.dport.wrapping_sub(1024) as usize;
        if let Some(p) = peers.get_mut(idx) {
            if p.ip == dst {
                let len = seg.payload.len() as u32 + seg.syn() as u32 + seg.fin() as u32;
                // The segment played lost comes again: half the time the peer now plays
                // the one after it lost too (a partial ACK), if it was sent.
                if p.una == Some(seg.seq) && len > 0 {
                    let next = seg.seq.wrapping_add(len);
                    let sent = p.srv.map_or(0, |srv| srv.wrapping_sub(seg.seq));
                    p.una = (seg.seq % 2 == 0 && sent > len).then_some(next);
                }
                // The highest the server sent: a retransmission does not move it back (a
                // SYN-ACK, a new connection, always sets it).
                let ahead = |srv: &u32| !seg.syn() && (len..1 << 20).contains(&srv.wrapping_sub(seg.seq));
                p.srv = Some(p.srv.filter(ahead).unwrap_or(seg.seq.wrapping_add(len)));
                // One data segment in eight is played lost (by its sequence number: the
                // generator's sequence stays the same).
                if !seg.payload.is_empty() && p.una.is_none() && seg.seq % 8 == 0 {
                    p.una = Some(seg.seq);
                }
                if seg.syn() && seg.ack_set() {
                    p.seq = seg.ack;
                }
            }
        }
    }
    for f in honest.take_sent() {
        if arp_target(&f) == Some(SERVER) {
            let now = honest.now;
            honest.engine.add_neighbour(now, SERVER, mac_of(SERVER));
            continue;
        }
        if let Some(t) = twin.as_deref_mut() {
            t.transport_mut().inbox.push_back(f.clone());
        }
        server.transport_mut().inbox.push_back(f);
    }
    Ok(())
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

    /// The fast path against the general one under hostile input: the twin must answer
    /// the same and hold the same state throughout (the run fails otherwise).
    #[test]
    fn the_fast_path_matches_the_general_path_under_fuzzing() {
        // Seed 2 with a bucket per connection or more: answers then leave when written.
        for (seed, buckets) in [(1, 0), (2, 1024)] {
            let cfg = super::FuzzConfig { frames: 20_000, seed, twin: true, buckets, ..Default::default() };
            let r = super::run(&cfg, |_| {}).unwrap_or_else(|(e, r)| panic!("{e}: {r:?}"));
            assert!(r.fast_path > 100 && r.twin_checks > 100, "the fast path was hardly taken: {r:?}");
            assert!(r.fast_send > 100, "fast-send was hardly taken: {r:?}");
            // Fewer than egresses: one that had something else to do (a handshake, a
            // retransmission, a FIN) is scanned.
            assert!(r.fast_egress > 10, "fast-egress was hardly taken: {r:?}");
            assert!(buckets == 0 || r.sent_now > 100, "answers were hardly sent when written: {r:?}");
            assert!(buckets == 0 || r.acks_quiet > 20, "pure ACKs hardly went without an egress: {r:?}");
        }
    }

    /// Half the peers over IPv6, with IPv6's own hostile frames: no panic, every drop
    /// counted, connections served over both families, nothing left at the end; and the
    /// fast path still equal to the general one.
    #[test]
    fn short_ipv6_run_is_clean() {
        for (seed, twin) in [(3, false), (4, true)] {
            let cfg = super::FuzzConfig { frames: 20_000, seed, twin, ipv6: true, ..Default::default() };
            let r = super::run(&cfg, |_| {}).unwrap_or_else(|(e, r)| panic!("{e}: {r:?}"));
            assert!(r.accepted > 0 && r.requests > 0 && r.answers6 > 1000, "{r:?}");
            assert!(r.drops.ext_header > 0 && r.drops.fragment > 0 && r.drops.bad_source > 0, "{r:?}");
        }
    }

    #[test]
    fn short_run_through_syn_cookies_is_clean() {
        let cfg = super::FuzzConfig { frames: 20_000, syn_cookies: crate::xsk::SynCookies::Always, ..Default::default() };
        let r = super::run(&cfg, |_| {}).unwrap_or_else(|(e, r)| panic!("{e}: {r:?}"));
        assert!(r.syn_cookies_accepted > 0 && r.requests > 0, "no connection came in through a cookie: {r:?}");
        // Every accepted connection came through a cookie; a few rebuilt ones meet the peer's
        // RST (or a timeout) before the application sees them.
        assert!(r.accepted > 0 && r.accepted <= r.syn_cookies_accepted, "{r:?}");
        assert!(r.drops.bad_cookie > 0, "hostile ACKs should have met the cookie check: {r:?}");
    }
}
