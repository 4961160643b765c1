//! SYN cookies: answering a SYN without keeping anything (RFC 4987, 3.6).
//!
//! When the half-open table is full, a SYN gets a SYN-ACK whose initial
//! sequence number (the cookie) encodes what the connection needs later:
//! the peer's MSS as an index into [`MSS_TABLE`] (Linux's table), whether it
//! allowed SACK, and its window scale. A keyed hash of the 4-tuple, the
//! peer's ISN, a 64-second time counter and those bits authenticates them.
//! The ACK that completes the handshake returns the cookie plus one; if it
//! checks out, the engine rebuilds the half-open connection in a fresh
//! socket (smoltcp patch `syn-cookie`) and hands it the ACK.
//!
//! Linux must hide the window scale and SACK bits in the TCP timestamp,
//! since its 32-bit cookie carries a 24-bit hash and an 8-bit counter; this
//! one carries them itself and authenticates 23 bits: a forged ACK is
//! accepted with probability 2^-23 per try (Linux: about 2^-24).
//!
//! Layout, low bits first: MSS index (2), SACK (1), window scale + 1 (4;
//! 0 = none), counter mod 4 (2), hash (23). A cookie is valid in the counter
//! period that made it and the next: 64 to 128 s, Linux's "about two
//! minutes". The counter enters the hash, so the effective secret changes
//! every period without any rotation state.

use std::hash::Hasher;
use std::net::{IpAddr, Ipv4Addr};

use siphasher::sip::SipHasher24;
use smoltcp::time::Instant;

/// When the engine answers SYNs with cookies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SynCookies {
    /// Never: past the half-open limit the oldest half-open connection of the
    /// SYN's bucket is evicted (its peer later meets a reset).
    Off,
    /// When the half-open table is full, as Linux's `tcp_syncookies=1`: half-open
    /// connections are never evicted, and a SYN flood costs no memory.
    #[default]
    Auto,
    /// For every SYN (tests, or a server that expects floods). Every segment
    /// to a listening port that is not a SYN then costs a look through its
    /// bucket's sockets (about eight) and, if none is its connection, a keyed
    /// hash; with `Auto` that is so for two minutes after the last cookie.
    Always,
}

/// MSS values a cookie can carry (Linux's `msstab`): the largest not above
/// the peer's is used, so the connection never sends more than the peer
/// takes.
pub const MSS_TABLE: [u16; 4] = [536, 1300, 1440, 1460];

/// One cookie period, seconds.
const PERIOD_S: u64 = 64;

/// What a cookie carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CookieData {
    pub mss: u16,
    pub sack: bool,
    pub window_scale: Option<u8>,
}

/// The connection a SYN or ACK belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tuple {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub sport: u16,
    pub dport: u16,
}

/// The keyed hash behind the cookies: makes a SYN's cookie and checks the one an ACK
/// returns.
#[derive(Clone)]
pub struct CookieCodec {
    k0: u64,
    k1: u64,
}

impl CookieCodec {
    /// A codec keyed from `seed` (the engine's random seed).
    pub fn new(seed: u64) -> CookieCodec {
        let k0 = splitmix(seed ^ 0x636f_6f6b_6965_7321);
        CookieCodec { k0, k1: splitmix(k0) }
    }

    /// The SipHash key (for the steering program, which makes the same cookies).
    pub fn key(&self) -> (u64, u64) {
        (self.k0, self.k1)
    }

    fn counter(now: Instant) -> u64 {
        (now.total_millis().max(0) as u64) / (PERIOD_S * 1000)
    }

    fn hash(&self, t: &Tuple, peer_isn: u32, counter: u64, low: u32) -> u32 {
        let mut h = SipHasher24::new_with_keys(self.k0, self.k1);
        // IPv4 as the steering program hashes it (`xsk_io::syncookies`).
        for a in [t.src, t.dst] {
            match a {
                IpAddr::V4(a) => h.write_u32(u32::from(a)),
                IpAddr::V6(a) => h.write(&a.octets()),
            }
        }
        h.write_u16(t.sport);
        h.write_u16(t.dport);
        h.write_u32(peer_isn);
        h.write_u64(counter);
        h.write_u32(low);
        (h.finish() >> 41) as u32 // 23 bits
    }

    /// The cookie (our ISN) for a SYN with sequence number `peer_isn`.
    pub fn make(&self, now: Instant, t: &Tuple, peer_isn: u32, d: CookieData) -> u32 {
        let idx = MSS_TABLE.iter().rposition(|&m| m <= d.mss).unwrap_or(0) as u32;
        let ws = d.window_scale.map_or(0, |w| w.min(14) as u32 + 1);
        let counter = Self::counter(now);
        let low = idx | (d.sack as u32) << 2 | ws << 3 | ((counter & 3) as u32) << 7;
        self.hash(t, peer_isn, counter, low) << 9 | low
    }

    /// What `cookie` carries if it is one this codec made for `t` and
    /// `peer_isn` in this period or the one before.
    pub fn check(&self, now: Instant, t: &Tuple, peer_isn: u32, cookie: u32) -> Option<CookieData> {
        let low = cookie & 0x1ff;
        let now_c = Self::counter(now);
        // Periods since the cookie was made, from the two counter bits it keeps.
        let age = ((now_c & 3) as u32).wrapping_sub(low >> 7) & 3;
        if age > 1 {
            return None;
        }
        let c = now_c.checked_sub(age as u64)?;
        if self.hash(t, peer_isn, c, low) != cookie >> 9 {
            return None;
        }
        let ws = (low >> 3) & 0xf;
        Some(CookieData {
            mss: MSS_TABLE[(low & 3) as usize],
            sack: low & 4 != 0,
            window_scale: (ws != 0).then(|| (ws - 1) as u8),
        })
    }
}

fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The TCP header fields of a frame `demux::inspect` accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub tuple: Tuple,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    /// Options of a SYN (MSS 0 when absent).
    pub opts: CookieData,
    /// TCP data bytes, from the IP length (0 when it says less than the headers).
    pub payload_len: usize,
}

pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const ACK: u8 = 0x10;

/// Reads the TCP header of an Ethernet/IPv4/TCP or Ethernet/IPv6/TCP frame (no
/// extension header); `None` for anything shorter than its headers say. Never panics.
pub fn segment(frame: &[u8]) -> Option<Segment> {
    let ip = frame.get(14..)?;
    let v6 = frame.get(12..14)? == [0x86, 0xdd];
    let (ihl, ip_len, src, dst) = if v6 {
        if ip.len() < 40 || ip[6] != 6 {
            return None;
        }
        let a = |at: usize| IpAddr::from(<[u8; 16]>::try_from(&ip[at..at + 16]).unwrap());
        (40, 40 + u16::from_be_bytes([ip[4], ip[5]]) as usize, a(8), a(24))
    } else {
        let ihl = (*ip.first()? & 0x0f) as usize * 4;
        if ip.len() < 20 || ip[9] != 6 || ihl < 20 {
            return None;
        }
        let a = |at: usize| IpAddr::from(Ipv4Addr::new(ip[at], ip[at + 1], ip[at + 2], ip[at + 3]));
        (ihl, u16::from_be_bytes([ip[2], ip[3]]) as usize, a(12), a(16))
    };
    let tcp = ip.get(ihl..)?;
    if tcp.len() < 20 {
        return None;
    }
    let doff = (tcp[12] >> 4) as usize * 4;
    let opts = tcp.get(20..doff.max(20))?;
    let be32 = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    let mut s = Segment {
        tuple: Tuple {
            src,
            dst,
            sport: u16::from_be_bytes([tcp[0], tcp[1]]),
            dport: u16::from_be_bytes([tcp[2], tcp[3]]),
        },
        seq: be32(&tcp[4..8]),
        ack: be32(&tcp[8..12]),
        flags: tcp[13],
        opts: CookieData { mss: 0, sack: false, window_scale: None },
        payload_len: ip_len.saturating_sub(ihl + doff.max(20)),
    };
    if s.flags & SYN != 0 {
        let mut i = 0;
        while i < opts.len() {
            match opts[i] {
                0 => break,
                1 => i += 1,
                kind => {
                    let Some(&len) = opts.get(i + 1) else { break };
                    let len = len as usize;
                    if len < 2 || i + len > opts.len() {
                        break;
                    }
                    let v = &opts[i + 2..i + len];
                    match (kind, len) {
                        (2, 4) => s.opts.mss = u16::from_be_bytes([v[0], v[1]]),
                        (3, 3) => s.opts.window_scale = Some(v[0].min(14)),
                        (4, 2) => s.opts.sack = true,
                        _ => {}
                    }
                    i += len;
                }
            }
        }
    }
    Some(s)
}

/// What every cookie SYN-ACK of an engine says besides the cookie and the
/// addresses, and the key: what the steering program needs to answer SYNs
/// exactly as the engine would (see `xsk_io::syncookies`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CookieTemplate {
    /// The cookie hash's key, first half.
    pub k0: u64,
    /// The cookie hash's key, second half.
    pub k1: u64,
    /// The MSS the SYN-ACK offers.
    pub mss: u16,
    /// The window the SYN-ACK advertises.
    pub window: u16,
    /// The window scale it offers.
    pub window_shift: u8,
    /// What a SYN must pass before the engine answers it (`demux::inspect`).
    pub mac: [u8; 6],
    /// Our address.
    pub addr: Ipv4Addr,
    /// Our subnet's prefix length.
    pub prefix_len: u8,
    /// Whether partial TCP checksums are taken.
    pub accept_partial: bool,
    /// Our IPv6 address, if any (its SYN-ACKs offer `mss` less 20).
    pub addr6: Option<std::net::Ipv6Addr>,
}

/// Whether the steering program answers SYNs with cookies before they reach the
/// engine, and what that decision last looked at.
#[derive(Clone, Copy, Debug, Default)]
pub struct SteeringCookies {
    pub on: bool,
    /// When the program's count was last looked at, and the count then.
    pub checked: Option<(Instant, u64)>,
}

/// What a cookie SYN-ACK says besides the cookie.
pub struct SynAck {
    pub our_mac: [u8; 6],
    pub peer_mac: [u8; 6],
    pub cookie: u32,
    /// Our MSS (the link's MTU less 40).
    pub mss: u16,
    /// The receive window (unscaled, as in every SYN).
    pub window: u16,
    /// Our window scale, sent when the peer offered one.
    pub window_shift: u8,
}

impl SynAck {
    /// The frame's length for a SYN `syn`.
    pub fn len(syn: &Segment) -> usize {
        let ip = if syn.tuple.src.is_ipv6() { 40 } else { 20 };
        14 + ip + 20 + 4 + if syn.opts.sack { 4 } else { 0 } + if syn.opts.window_scale.is_some() { 4 } else { 0 }
    }

    /// Writes the SYN-ACK answering `syn` into `buf` (`len(syn)` bytes), the
    /// TCP checksum too unless the link completes it (`tcp_csum` false).
    pub fn write(&self, syn: &Segment, buf: &mut [u8], tcp_csum: bool) {
        let len = buf.len();
        buf[0..6].copy_from_slice(&self.peer_mac);
        buf[6..12].copy_from_slice(&self.our_mac);
        let t = match (syn.tuple.src, syn.tuple.dst) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                buf[12..14].copy_from_slice(&[0x08, 0x00]);
                let ip = &mut buf[14..34];
                ip.copy_from_slice(&[0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
                ip[2..4].copy_from_slice(&((len - 14) as u16).to_be_bytes());
                ip[12..16].copy_from_slice(&dst.octets());
                ip[16..20].copy_from_slice(&src.octets());
                let sum = !crate::csum::data(ip);
                ip[10..12].copy_from_slice(&sum.to_be_bytes());
                34
            }
            (src, dst) => {
                // IPv6 (a segment never mixes families): hop limit 64, as smoltcp's.
                let ip6 = |a: IpAddr| match a {
                    IpAddr::V6(a) => a.octets(),
                    IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
                };
                buf[12..14].copy_from_slice(&[0x86, 0xdd]);
                let ip = &mut buf[14..54];
                ip[0..4].copy_from_slice(&[0x60, 0, 0, 0]);
                ip[4..6].copy_from_slice(&((len - 54) as u16).to_be_bytes());
                ip[6..8].copy_from_slice(&[6, 64]);
                ip[8..24].copy_from_slice(&ip6(dst));
                ip[24..40].copy_from_slice(&ip6(src));
                54
            }
        };
        let tcp = &mut buf[t..];
        tcp[0..2].copy_from_slice(&syn.tuple.dport.to_be_bytes());
        tcp[2..4].copy_from_slice(&syn.tuple.sport.to_be_bytes());
        tcp[4..8].copy_from_slice(&self.cookie.to_be_bytes());
        tcp[8..12].copy_from_slice(&syn.seq.wrapping_add(1).to_be_bytes());
        tcp[12] = ((tcp.len() / 4) as u8) << 4;
        tcp[13] = SYN | ACK;
        tcp[14..16].copy_from_slice(&self.window.to_be_bytes());
        tcp[16..20].copy_from_slice(&[0, 0, 0, 0]);
        let mut o = 20;
        tcp[o..o + 4].copy_from_slice(&[2, 4, (self.mss >> 8) as u8, self.mss as u8]);
        o += 4;
        if syn.opts.sack {
            tcp[o..o + 4].copy_from_slice(&[1, 1, 4, 2]);
            o += 4;
        }
        if syn.opts.window_scale.is_some() {
            tcp[o..o + 4].copy_from_slice(&[1, 3, 3, self.window_shift]);
        }
        if tcp_csum {
            crate::csum::fill_tcp(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tuple() -> Tuple {
        Tuple { src: Ipv4Addr::new(198, 18, 0, 1).into(), dst: Ipv4Addr::new(198, 18, 0, 2).into(), sport: 40000, dport: 7000 }
    }

    fn at(s: u64) -> Instant {
        Instant::from_millis((s * 1000) as i64)
    }

    #[test]
    fn a_cookie_round_trip_decodes_mss_sack_and_window_scale() {
        let codec = CookieCodec::new(7);
        for (mss, want) in [(1460, 1460), (1500, 1460), (1448, 1440), (1300, 1300), (1000, 536), (0, 536), (100, 536)] {
            for sack in [false, true] {
                for ws in [None, Some(0), Some(7), Some(14)] {
                    let d = CookieData { mss, sack, window_scale: ws };
                    let c = codec.make(at(1000), &tuple(), 12345, d);
                    let got = codec.check(at(1000), &tuple(), 12345, c).expect("valid");
                    assert_eq!(got, CookieData { mss: want, sack, window_scale: ws });
                }
            }
        }
    }

    #[test]
    fn a_cookie_lives_one_to_two_periods() {
        let codec = CookieCodec::new(7);
        let d = CookieData { mss: 1460, sack: true, window_scale: Some(7) };
        // Made at the start of a period: valid to the end of the next (128 s).
        let c = codec.make(at(64 * 10), &tuple(), 1, d);
        assert!(codec.check(at(64 * 10 + 127), &tuple(), 1, c).is_some());
        assert!(codec.check(at(64 * 12), &tuple(), 1, c).is_none(), "expired");
        // Made at a period's end: still 64 s.
        let c = codec.make(at(64 * 11 - 1), &tuple(), 1, d);
        assert!(codec.check(at(64 * 12 - 1), &tuple(), 1, c).is_some());
        assert!(codec.check(at(64 * 12), &tuple(), 1, c).is_none(), "expired");
        // Four periods later the counter's two bits match again: the hash must refuse it.
        let c = codec.make(at(64 * 10), &tuple(), 1, d);
        assert!(codec.check(at(64 * 14), &tuple(), 1, c).is_none());
        // A cookie from the future (a clock that went back) is refused.
        let c = codec.make(at(64 * 11), &tuple(), 1, d);
        assert!(codec.check(at(64 * 10), &tuple(), 1, c).is_none());
    }

    #[test]
    fn a_wrong_cookie_is_refused() {
        let codec = CookieCodec::new(7);
        let d = CookieData { mss: 1460, sack: true, window_scale: Some(7) };
        let c = codec.make(at(100), &tuple(), 99, d);
        // Another peer ISN, port, address, key, or any flipped bit.
        assert!(codec.check(at(100), &tuple(), 100, c).is_none());
        assert!(codec.check(at(100), &Tuple { sport: 40001, ..tuple() }, 99, c).is_none());
        assert!(codec.check(at(100), &Tuple { src: Ipv4Addr::new(198, 18, 0, 9).into(), ..tuple() }, 99, c).is_none());
        assert!(CookieCodec::new(8).check(at(100), &tuple(), 99, c).is_none());
        for bit in 0..32 {
            assert!(codec.check(at(100), &tuple(), 99, c ^ (1 << bit)).is_none(), "bit {bit}");
        }
        // Random guesses: about one in 2^23 may pass.
        let mut x = 1u64;
        let passed = (0..200_000)
            .filter(|_| {
                x = splitmix(x);
                codec.check(at(100), &tuple(), 99, x as u32).is_some()
            })
            .count();
        assert!(passed <= 2, "{passed} of 200,000 random cookies passed");
    }

    #[test]
    fn syn_options_are_read_and_hostile_ones_do_not_panic() {
        let mut f = vec![0u8; 14 + 20 + 60];
        f[14] = 0x45;
        f[14 + 9] = 6;
        let tcp = 34;
        f[tcp + 12] = 15 << 4;
        f[tcp + 13] = SYN;
        let opts = [2, 4, 0x05, 0xb4, 1, 3, 3, 9, 4, 2, 8, 10, 0, 0, 0, 1, 0, 0, 0, 0, 0];
        f[tcp + 20..tcp + 20 + opts.len()].copy_from_slice(&opts);
        let s = segment(&f).unwrap();
        assert_eq!(s.opts, CookieData { mss: 1460, sack: true, window_scale: Some(9) });
        // Every truncation and every option byte value: no panic.
        for n in 0..f.len() {
            let _ = segment(&f[..n]);
        }
        for i in tcp + 12..f.len() {
            for v in [0u8, 1, 2, 3, 4, 40, 255] {
                let mut g = f.clone();
                g[i] = v;
                let _ = segment(&g);
            }
        }
    }
}
