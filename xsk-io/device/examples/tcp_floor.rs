//! The floor under the stack's per-request cost: a copy-mode AF_XDP port and
//! the least TCP that answers a request/response client, and nothing else.
//!
//! It answers IPv4 TCP on one port the way `rr-server --service echo` does
//! for a client whose requests each arrive whole in one segment (rr-bench's
//! `--depth 1`): the handshake (a SYN-ACK with an MSS option), each in-order
//! segment with data by one segment carrying the same bytes back, a FIN by a
//! FIN, an RST by forgetting. Per request it does what any TCP must do and
//! no more: parse and check the frame (the TCP checksum as the engine checks
//! it: a partial one from a local sender's offload accepted, else summed),
//! find the connection, take the data into a receive buffer, write the
//! answer's headers and payload into a TX frame (checksum offloaded when the
//! port can, as the engine's), and the port's receive, send, flush and sleep
//! (`poll`) as the embedder example runs them, with the steering program's
//! deferred ACKs as the stack uses them (a pure ACK that arrives while it
//! sleeps does not wake it).
//!
//! What it leaves out, and a real stack cannot: retransmission (no timer is
//! armed or cancelled; a lost SYN-ACK or answer is not sent again), RTT and
//! congestion state, windows (it assumes the peer's window is open and
//! advertises a fixed one), out-of-order data, options after the SYN, IPv6,
//! the application's framing, and the XDP program's set-up beyond one address
//! and port. So the instructions it spends per request are a lower bound for
//! any stack on this port, not a design.
//!
//! It takes `rr-server`'s flags so that `scripts/user-instructions` (`SERVER=`)
//! and `vm-tests cost --servers floor` can run it in the server's place:
//! `--iface IF --addr A/LEN|shared --port P [--attach MODE] [--ready-file F]`;
//! the others are accepted and ignored. With `shared` the address is the
//! interface's own and the kernel answers ARP for it; otherwise the probe
//! does. It runs until SIGINT or SIGTERM (exit status 0). It counts nothing
//! for SIGUSR1, so vm-tests does not ask it. The XDP program is a bpf_link
//! and goes with the process.
//!
//! ```text
//! cargo build --release -p xsk-device --example tcp_floor
//! ip netns exec NS target/release/examples/tcp_floor --iface IF --addr 198.18.91.10/24 --port 7000
//! ```

use std::io::Write;
use std::net::Ipv4Addr;
use std::os::fd::AsFd;
use std::time::Duration;

use stack_engine::csum;
use xsk_device::ifaddr;
use xsk_device::steer::{Steer, SteerFlags};
use xsk_io::port::{Port, QueueConfig};
use xsk_io::umem::Frame;
use xsk_io::AttachMode;

const ETH: usize = 14;
const IP: usize = 20;
const TCP: usize = 20;
const HDR: usize = ETH + IP + TCP;
const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;
/// The window it advertises, and what its receive buffer holds.
const WINDOW: u16 = 65535;
const MAX_CONNS: usize = 1024;

/// One connection: its peer, the next sequence numbers each way, and a receive
/// buffer the data is copied into (as any stack copies it out of the frame).
struct Conn {
    peer: (Ipv4Addr, u16),
    rcv_nxt: u32,
    snd_nxt: u32,
    rx: Vec<u8>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = args()?;
    // The lab kit's handlers, as rr-server's: the first SIGINT or SIGTERM sets
    // a flag the loop reads at each turn (its sleep is at most 100 ms). They
    // also undo the SIGINT a shell ignores for a background job.
    xsk_lab::signals::install_signal_handlers();
    let served = serve(&a, &xsk_lab::signals::interrupted, |addr, mode, csum| {
        println!("tcp_floor: listening on {addr}:{} ({mode:?} mode, tx checksum offload {csum})", a.port);
        let _ = std::io::stdout().flush();
        if let Some(f) = &a.ready_file {
            if let Err(e) = std::fs::write(f, b"") {
                eprintln!("tcp_floor: --ready-file {f}: {e}");
            }
        }
    })?;
    println!(
        "tcp_floor: stopped after {} frames received, {} deferred ACKs, {} connections open",
        served.frames, served.deferred, served.open
    );
    Ok(())
}

/// What a run saw.
pub struct Served {
    /// Frames taken from the RX ring.
    pub frames: u64,
    /// Pure ACKs taken from the deferred-ACK ring.
    pub deferred: u64,
    /// Connections open at the end (a FIN or RST closes one).
    pub open: usize,
}

/// Binds queue 0 of `a.iface`, steers `a.port` on the address into it, calls
/// `ready` (the address, the attach mode, whether TX checksums are offloaded),
/// and answers until `stop` says so.
pub fn serve(a: &Args, stop: &dyn Fn() -> bool, ready: impl FnOnce(Ipv4Addr, AttachMode, bool)) -> Result<Served, Box<dyn std::error::Error>> {
    let (addr, flags) = match a.addr {
        Some(addr) => (addr, SteerFlags::ARP),
        None => match ifaddr::ipv4(&a.iface)? {
            Some((addr, _)) => (addr, SteerFlags::NONE),
            None => return Err(format!("--addr shared: {} has no IPv4 address", a.iface).into()),
        },
    };
    let mac = ifaddr::mac(&a.iface)?;
    let port = a.port;
    let mut xsk = Port::bind(&a.iface, 0, &QueueConfig::default())?;
    let steer = Steer::attach(&a.iface, a.attach)?;
    steer.set_addr(addr, flags)?;
    steer.add_tcp_port(port)?;
    steer.register_xsk(0, xsk.as_fd())?;
    xsk.set_device(String::from("any"), Some(steer.mode()));
    // Deferred ACKs, as the stack has them: while it sleeps, the program keeps
    // pure ACKs in a ring instead of waking it for each (a client's delayed
    // ACK after every answer at light load).
    let mut acks = steer.ack_ring(0)?;
    ready(addr, steer.mode(), xsk.features().tx_csum);

    // Reserved once; what allocates below does so per connection, not per frame.
    let mut conns: Vec<Conn> = Vec::with_capacity(MAX_CONNS);
    let mut rx = Vec::with_capacity(64);
    let mut iss: u32 = 0x1000_0000;
    let (mut frames, mut deferred) = (0u64, 0u64);
    while !stop() {
        frames += xsk.recv(&mut rx, 64) as u64;
        if let Some(a) = &mut acks {
            // The floor answers no pure ACK: it only takes them off the ring.
            deferred += a.take(|_| true) as u64;
        }
        for f in rx.drain(..) {
            if xsk.umem().data(&f).get(12..14) == Some(&[0x08, 0x06]) {
                arp(&mut xsk, f, addr, mac);
                continue;
            }
            answer(&mut xsk, f, addr, port, &mut conns, &mut iss);
        }
        xsk.flush_before_wait()?;
        if let Some(a) = &acks {
            a.set_waiting(true);
        }
        let woke = xsk.wait(None, Some(Duration::from_millis(100)));
        if let Some(a) = &acks {
            a.set_waiting(false);
        }
        match woke {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            r => {
                r?;
            }
        }
    }
    Ok(Served { frames, deferred, open: conns.len() })
}

/// A TCP segment to us, as read from its frame.
struct Segment {
    macs: [u8; 12],
    src: Ipv4Addr,
    sport: u16,
    seq: u32,
    flags: u8,
    data: std::ops::Range<usize>,
}

/// Reads one received frame and sends what TCP owes for it, if anything.
fn answer(xsk: &mut Port, f: Frame, addr: Ipv4Addr, port: u16, conns: &mut Vec<Conn>, iss: &mut u32) {
    let (umem, mut tx) = xsk.split();
    let d = umem.data(&f);
    let Some(seg) = parse(d, addr, port) else {
        tx.release(f);
        return;
    };
    let at = conns.iter().position(|c| c.peer == (seg.src, seg.sport));
    // (flags, seq, ack, the connection whose receive buffer is the answer's payload)
    let reply = match (seg.flags & (SYN | FIN | RST | ACK), at) {
        (SYN, None) if conns.len() < MAX_CONNS => {
            *iss = iss.wrapping_add(0x0101_0101);
            let rcv_nxt = seg.seq.wrapping_add(1);
            let rx = Vec::with_capacity(WINDOW as usize); // per connection, not per frame
            conns.push(Conn { peer: (seg.src, seg.sport), rcv_nxt, snd_nxt: iss.wrapping_add(1), rx });
            Some((SYN | ACK, *iss, rcv_nxt, None))
        }
        (fl, Some(i)) if fl & RST != 0 => {
            conns.swap_remove(i);
            None
        }
        (fl, Some(i)) if fl & ACK != 0 && seg.seq == conns[i].rcv_nxt => {
            let len = seg.data.len();
            if fl & FIN != 0 {
                let c = conns.swap_remove(i);
                Some((FIN | ACK, c.snd_nxt, seg.seq.wrapping_add(len as u32 + 1), None))
            } else if len == 0 {
                None // an ACK alone: nothing to answer
            } else {
                let c = &mut conns[i];
                c.rx.clear();
                c.rx.extend_from_slice(&d[seg.data.clone()]);
                c.rcv_nxt = c.rcv_nxt.wrapping_add(len as u32);
                let seq = c.snd_nxt;
                c.snd_nxt = seq.wrapping_add(len as u32);
                Some((PSH | ACK, seq, c.rcv_nxt, Some(i)))
            }
        }
        _ => None,
    };
    tx.release(f);
    let Some((flags, seq, ack, data)) = reply else { return };
    let Some(mut out) = tx.alloc() else { return };
    let payload: &[u8] = data.map_or(&[], |i| conns[i].rx.as_slice());
    let n = write(umem.buf_mut(&mut out), &seg, addr, port, (flags, seq, ack), payload, tx.csum_offload());
    out.set_len(n);
    let sent = if tx.csum_offload() { tx.send_csum(out, (ETH + IP) as u16, 16) } else { tx.send(out) };
    if let Err(out) = sent {
        tx.release(out);
    }
}

/// Answers an ARP request for `addr` (the steering program passes only those
/// aimed at it) with `mac`.
fn arp(xsk: &mut Port, f: Frame, addr: Ipv4Addr, mac: [u8; 6]) {
    let (umem, mut tx) = xsk.split();
    let d = umem.data(&f);
    let ok = d.len() >= 42 && d[14..22] == [0, 1, 8, 0, 6, 4, 0, 1] && d[38..42] == addr.octets();
    let mut req = [0u8; 42];
    if ok {
        req.copy_from_slice(&d[..42]);
    }
    tx.release(f);
    let Some(mut out) = tx.alloc().filter(|_| ok) else { return };
    let b = &mut umem.buf_mut(&mut out)[..42];
    b[0..6].copy_from_slice(&req[6..12]);
    b[6..12].copy_from_slice(&mac);
    b[12..22].copy_from_slice(&[0x08, 0x06, 0, 1, 8, 0, 6, 4, 0, 2]);
    b[22..28].copy_from_slice(&mac);
    b[28..32].copy_from_slice(&addr.octets());
    b[32..42].copy_from_slice(&req[22..32]);
    out.set_len(42);
    if let Err(out) = tx.send(out) {
        tx.release(out);
    }
}

/// The segment in `d` if it is an unfragmented IPv4 TCP segment to `addr:port`
/// whose lengths and TCP checksum are right.
fn parse(d: &[u8], addr: Ipv4Addr, port: u16) -> Option<Segment> {
    if d.len() < HDR || d[12..14] != [0x08, 0x00] || d[ETH] != 0x45 || d[ETH + 9] != 6 {
        return None;
    }
    let total = u16::from_be_bytes([d[ETH + 2], d[ETH + 3]]) as usize;
    let frag = u16::from_be_bytes([d[ETH + 6], d[ETH + 7]]) & 0x3fff;
    if frag != 0 || total < IP + TCP || ETH + total > d.len() || d[ETH + 16..ETH + 20] != addr.octets() {
        return None;
    }
    let t = &d[ETH + IP..ETH + total];
    if u16::from_be_bytes([t[2], t[3]]) != port {
        return None;
    }
    let off = ((t[12] >> 4) as usize) * 4;
    if off < TCP || off > t.len() {
        return None;
    }
    let src = Ipv4Addr::new(d[ETH + 12], d[ETH + 13], d[ETH + 14], d[ETH + 15]);
    // A local sender with checksum offload (a veth peer) leaves the field
    // holding the pseudo-header's sum: accepted first, as the engine does
    // where it expects them (both spellings of zero); otherwise the whole
    // segment is summed. The sums are the engine's own code.
    let ph = csum::tcp_v4_pseudo(src, addr, t.len());
    let field = u16::from_be_bytes([t[16], t[17]]);
    let partial = field == ph || (ph == 0xffff && field == 0) || (ph == 0 && field == 0xffff);
    if !partial && csum::tcp_v4(src, addr, t) != 0xffff {
        return None;
    }
    let mut macs = [0; 12];
    macs.copy_from_slice(&d[..12]);
    Some(Segment {
        macs,
        src,
        sport: u16::from_be_bytes([t[0], t[1]]),
        seq: u32::from_be_bytes([t[4], t[5], t[6], t[7]]),
        flags: t[13],
        data: ETH + IP + off..ETH + total,
    })
}

/// Writes the answer to `seg` into `buf`: Ethernet, IPv4 and TCP headers (an
/// MSS option on a SYN), then `payload`; the length written. With `offload`
/// the TCP checksum field holds the pseudo-header's sum for the kernel to
/// complete.
fn write(buf: &mut [u8], seg: &Segment, addr: Ipv4Addr, port: u16, (flags, seq, ack): (u8, u32, u32), payload: &[u8], offload: bool) -> usize {
    let opt = if flags & SYN != 0 { 4 } else { 0 };
    let tcp_len = TCP + opt + payload.len();
    let n = ETH + IP + tcp_len;
    let b = &mut buf[..n];
    b[0..6].copy_from_slice(&seg.macs[6..12]);
    b[6..12].copy_from_slice(&seg.macs[0..6]);
    b[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut b[ETH..ETH + IP];
    ip[0..2].copy_from_slice(&[0x45, 0]);
    ip[2..4].copy_from_slice(&((IP + tcp_len) as u16).to_be_bytes());
    ip[4..10].copy_from_slice(&[0, 0, 0x40, 0, 64, 6]);
    ip[10..12].copy_from_slice(&[0, 0]);
    ip[12..16].copy_from_slice(&addr.octets());
    ip[16..20].copy_from_slice(&seg.src.octets());
    let c = !csum::data(ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let t = &mut b[ETH + IP..];
    t[0..2].copy_from_slice(&port.to_be_bytes());
    t[2..4].copy_from_slice(&seg.sport.to_be_bytes());
    t[4..8].copy_from_slice(&seq.to_be_bytes());
    t[8..12].copy_from_slice(&ack.to_be_bytes());
    t[12] = (((TCP + opt) / 4) as u8) << 4;
    t[13] = flags;
    t[14..16].copy_from_slice(&WINDOW.to_be_bytes());
    t[16..20].copy_from_slice(&[0, 0, 0, 0]);
    if opt != 0 {
        t[20..24].copy_from_slice(&[2, 4, 0x05, 0xb4]); // MSS 1460
    }
    t[TCP + opt..].copy_from_slice(payload);
    // As the stack's device writes it: the pseudo-header's sum for the kernel
    // to complete, or the whole checksum.
    if offload {
        csum::fill_tcp_pseudo(b);
    } else {
        csum::fill_tcp(b);
    }
    n
}

/// What the probe runs on (`args` reads it from rr-server's flags).
pub struct Args {
    pub iface: String,
    /// None: `shared`, the interface's own.
    pub addr: Option<Ipv4Addr>,
    pub port: u16,
    pub attach: AttachMode,
    pub ready_file: Option<String>,
}

/// rr-server's flags that this probe reads; its others are skipped (with the
/// value each takes).
fn args() -> Result<Args, String> {
    let (mut iface, mut addr, mut port, mut attach, mut ready_file) = (None, None, 7000u16, AttachMode::Auto, None);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut val = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--iface" => iface = Some(val()?),
            "--addr" => {
                let v = val()?;
                let a = v.split(['/', ',']).next().unwrap_or("");
                addr = Some(if a == "shared" { None } else { Some(a.parse::<Ipv4Addr>().map_err(|e| format!("--addr {v}: {e}"))?) });
            }
            "--port" => port = val()?.parse().map_err(|e| format!("--port: {e}"))?,
            "--attach" => attach = val()?.parse().map_err(|e| format!("--attach: {e}"))?,
            "--ready-file" => ready_file = Some(val()?),
            s if s.starts_with("--") && !s.contains('=') => {
                val()?;
            }
            _ => {}
        }
    }
    Ok(Args {
        iface: iface.ok_or("--iface IF is needed")?,
        addr: addr.ok_or("--addr A/LEN|shared is needed")?,
        port,
        attach,
        ready_file,
    })
}
