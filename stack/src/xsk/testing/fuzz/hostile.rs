//! The hostile peers: who they are, and the frames they send.

use std::net::{IpAddr, Ipv4Addr};

use super::{PORT, SERVER, SERVER6};
use crate::xsk::testing::frames::{self, TcpSpec};
use crate::xsk::testing::{mac_of, Rng};

pub(super) struct Peer {
    /// IPv4 or IPv6 (its MAC from the address's last byte either way).
    pub(super) ip: IpAddr,
    pub(super) port: u16,
    /// Our next sequence number.
    pub(super) seq: u32,
    /// The server's next sequence number, once seen.
    pub(super) srv: Option<u32>,
    /// A segment of the server's this peer plays lost: its ACKs stay there (duplicate
    /// ACKs, some with SACK blocks for later data) until it gives up, one frame in ten.
    pub(super) una: Option<u32>,
    /// Sends a timestamp option when no random options.
    pub(super) ts: bool,
}

/// One hostile frame from `p` into `out`.
pub(super) fn generate(rng: &mut Rng, p: &mut Peer, last_valid: &[u8], out: &mut Vec<u8>) {
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
    let mut sack_opts = [0u8; 36];
    // A SYN's plain options; one in four with a small MSS, so that an echo is a flight
    // of several segments (room for holes).
    let mut plain_syn = [2, 4, 5, 0xb4, 1, 3, 3, 7, 4, 2, 1, 1];
    let olen = if rng.chance(200) {
        random_options(rng, &mut opts)
    } else if p.ts {
        timestamp_option(rng, &mut opts)
    } else {
        0
    };
    // A SYN's: MSS, window scale, SACK permitted and the timestamp option.
    let mut syn_opts = [2, 4, 5, 0xb4, 1, 3, 3, 7, 4, 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    syn_opts[12..].copy_from_slice(&opts[..12]);
    let srv = p.srv.unwrap_or_else(|| rng.next() as u32);
    let ack = match p.una {
        Some(una) if !rng.chance(100) => una,
        // Giving up: all of it, or now and then a partial ACK that leaves the rest lost.
        Some(una) if rng.chance(300) => {
            let partial = una.wrapping_add(rng.below(u64::from(srv.wrapping_sub(una)) + 1) as u32);
            p.una = Some(partial);
            partial
        }
        _ => {
            p.una = None;
            srv
        }
    };
    let (v4, v6) = match p.ip {
        IpAddr::V4(a) => (a, None),
        IpAddr::V6(a) => (Ipv4Addr::UNSPECIFIED, Some(a)),
    };
    let last = match p.ip {
        IpAddr::V4(a) => a.octets()[3],
        IpAddr::V6(a) => a.octets()[15],
    };
    let mut s = TcpSpec {
        src_mac: [2, 0, 0, 0, 0, last],
        dst_mac: mac_of(SERVER),
        src: v4,
        dst: SERVER,
        sport: p.port,
        dport: PORT,
        seq: p.seq,
        ack,
        flags: 0x10,
        window: 65535,
        options: &opts[..olen],
        payload: &[],
        partial_csum: rng.chance(100),
        ttl: 64,
        frag: 0x4000,
    };
    // A peer playing a segment lost mostly sends duplicate ACKs.
    let pick = if p.una.is_some() && rng.chance(500) { 2 } else { rng.below(20) };
    // What only IPv6 has, instead of IPv4's fragments, sources, junk, ARP and ICMP.
    if let (Some(a), 14..=16 | 18..) = (v6, pick) {
        s.payload = &payload[..plen];
        super::hostile6::generate(rng, a, &s, out);
        return;
    }
    match pick {
        // A new connection (often with options).
        0 | 1 => {
            p.seq = rng.next() as u32;
            p.srv = None;
            p.una = None;
            s.seq = p.seq;
            s.flags = 0x02;
            s.ack = 0;
            if olen == 0 {
                if rng.chance(250) {
                    plain_syn[2..4].copy_from_slice(&(64 + rng.below(200) as u16).to_be_bytes());
                }
                s.options = &plain_syn;
            } else if p.ts && olen == 12 {
                s.options = &syn_opts;
            }
        }
        // Completes the handshake / acknowledges; now and then short of what the server
        // sent, with SACK blocks in and around its flight (the scoreboard, and a fast
        // recovery's holes).
        2 | 3 => {
            if p.srv.is_some() && (p.una.is_some() || rng.chance(300)) {
                if p.una.is_none() {
                    s.ack = srv.wrapping_sub(rng.below(3000) as u32);
                }
                let k = 1 + rng.below(4) as usize;
                sack_opts[..4].copy_from_slice(&[1, 1, 5, 2 + 8 * k as u8]);
                // While a segment is played lost, mostly inside the flight after it.
                let flight = u64::from(srv.wrapping_sub(s.ack));
                let inside = p.una.is_some() && flight > 1 && rng.chance(800);
                for b in sack_opts[4..4 + 8 * k].chunks_exact_mut(8) {
                    let (left, right) = if inside {
                        let left = s.ack.wrapping_add(1 + rng.below(flight - 1) as u32);
                        (left, left.wrapping_add(1 + rng.below(u64::from(srv.wrapping_sub(left))) as u32))
                    } else {
                        let left = s.ack.wrapping_add(rng.below(4000) as u32).wrapping_sub(500);
                        (left, left.wrapping_add(rng.below(3000) as u32))
                    };
                    b[..4].copy_from_slice(&left.to_be_bytes());
                    b[4..].copy_from_slice(&right.to_be_bytes());
                }
                s.options = &sack_opts[..4 + 8 * k];
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
            emit(&s, v6, out);
            let at = out.len() - 1;
            out[at] ^= 0x55;
            return;
        }
        // A fragment.
        14 => {
            s.frag = if rng.chance(500) { 0x2000 } else { rng.below(0x1fff) as u16 };
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
            let sender = if rng.chance(500) { v4 } else { Ipv4Addr::from(rng.next() as u32) };
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
    emit(&s, v6, out);
}

/// The segment `s` over IPv4, or from IPv6 `v6` to the server's IPv6 address.
fn emit(s: &TcpSpec<'_>, v6: Option<std::net::Ipv6Addr>, out: &mut Vec<u8>) {
    match v6 {
        None => frames::tcp_into(s, out),
        Some(a) => *out = frames::tcp6(s, a, SERVER6),
    }
}

/// NOP, NOP, timestamp (RFC 7323): a TSval, and a TSecr that is mostly near the
/// server's clock (its microseconds, give or take) and now and then anything.
fn timestamp_option(rng: &mut Rng, opts: &mut [u8; 40]) -> usize {
    opts[..4].copy_from_slice(&[1, 1, 8, 10]);
    opts[4..8].copy_from_slice(&(rng.next() as u32).to_be_bytes());
    let tsecr = match rng.below(4) {
        0 => rng.next() as u32,
        1 => 0,
        _ => (rng.below(1 << 24) as u32).wrapping_sub(1 << 20),
    };
    opts[8..12].copy_from_slice(&tsecr.to_be_bytes());
    12
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
    out.extend_from_slice(&s.dst_mac);
    out.extend_from_slice(&s.src_mac);
    // The total length and the header checksum once the message is in.
    out.extend_from_slice(&[8, 0, 0x45, 0, 0, 0]);
    out.extend_from_slice(&[0, 1, 0x40, 0, 64, 1, 0, 0]);
    out.extend_from_slice(&s.src.octets());
    out.extend_from_slice(&s.dst.octets());
    let t = out.len();
    if rng.chance(150) {
        // A Fragmentation Needed about the server's segment to this peer (its ports, a
        // sequence number near what the peer acknowledges), an MTU mostly plausible.
        let mtu = if rng.chance(800) { 500 + rng.below(1000) as u16 } else { rng.next() as u16 };
        out.extend_from_slice(&[3, 4, 0, 0, 0, 0]);
        out.extend_from_slice(&mtu.to_be_bytes());
        let q = TcpSpec { src: s.dst, dst: s.src, sport: s.dport, dport: s.sport, seq: s.ack.wrapping_sub(rng.below(2000) as u32), ..s.clone() };
        out.extend_from_slice(&crate::xsk::testing::frames::tcp(&q)[14..14 + 28]);
    } else {
        out.extend_from_slice(&[if rng.chance(700) { 8 } else { rng.next() as u8 }, rng.next() as u8, 0, 0]);
        out.extend_from_slice(&(rng.next() as u32).to_be_bytes());
        out.extend_from_slice(payload);
    }
    let total = (out.len() - 14) as u16;
    out[16..18].copy_from_slice(&total.to_be_bytes());
    let c = !stack_engine::smoltcp::wire::checksum::data(&out[14..34]);
    out[24..26].copy_from_slice(&c.to_be_bytes());
    let c = !stack_engine::smoltcp::wire::checksum::data(&out[t..]);
    out[t + 2..t + 4].copy_from_slice(&c.to_be_bytes());
}

