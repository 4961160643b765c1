//! The SYN flood: SYNs from random sources of the test range, built by hand and sent through
//! one raw socket.

use std::io::ErrorKind;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use xsk_lab::pktgen::checksum;
use xsk_lab::rawsock::RawSocket;

use crate::PORT;

/// xorshift64*: enough randomness for source addresses and ports.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

const SYN_LEN: usize = 60; // 14 + 20 + 24 (MSS option), plus 2 bytes Ethernet padding

/// A SYN with an MSS option; checksums complete (no offload).
fn build_syn(buf: &mut [u8; SYN_LEN], macs: ([u8; 6], [u8; 6]), src: Ipv4Addr, dst: Ipv4Addr, sport: u16, dport: u16, seq: u32) {
    let (src_mac, dst_mac) = macs;
    buf.fill(0);
    buf[0..6].copy_from_slice(&dst_mac);
    buf[6..12].copy_from_slice(&src_mac);
    buf[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut buf[14..];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&44u16.to_be_bytes());
    ip[4..6].copy_from_slice(&(seq as u16).to_be_bytes());
    ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let c = checksum(&ip[..20], 0);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let tcp = &mut ip[20..44];
    tcp[0..2].copy_from_slice(&sport.to_be_bytes());
    tcp[2..4].copy_from_slice(&dport.to_be_bytes());
    tcp[4..8].copy_from_slice(&seq.to_be_bytes());
    tcp[12] = 6 << 4;
    tcp[13] = 0x02;
    tcp[14..16].copy_from_slice(&64240u16.to_be_bytes());
    tcp[20..24].copy_from_slice(&[2, 4, 0x05, 0xb4]);
    let mut pseudo = 6u32 + 24;
    for w in src.octets().chunks(2).chain(dst.octets().chunks(2)) {
        pseudo += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    let c = checksum(tcp, pseudo);
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
}

pub(crate) struct FloodPlan {
    pub(crate) ifname: String,
    pub(crate) macs: ([u8; 6], [u8; 6]),
    pub(crate) subnet: [u8; 3],
    /// Host parts of the lab /24 the SYNs must not come from (real hosts of the lab).
    pub(crate) exclude: Vec<u8>,
    pub(crate) dst: Ipv4Addr,
    pub(crate) pps: u64,
    pub(crate) offlink_percent: u8,
    pub(crate) seed: u64,
}

impl FloodPlan {
    pub(crate) fn source(&self, rng: &mut Rng) -> Ipv4Addr {
        if self.offlink_percent > 0 && rng.next() % 100 < u64::from(self.offlink_percent) {
            loop {
                let r = rng.next();
                let (b, c, d) = (18 + (r & 1) as u8, (r >> 8) as u8, (r >> 16) as u8);
                if [198, b, c] != self.subnet && (1..=254).contains(&d) {
                    return Ipv4Addr::new(198, b, c, d);
                }
            }
        }
        loop {
            let h = (rng.next() % 252) as u8 + 3; // 3..=254
            if !self.exclude.contains(&h) {
                return Ipv4Addr::new(self.subnet[0], self.subnet[1], self.subnet[2], h);
            }
        }
    }
}

/// Sends SYNs until `stop`; returns (sent, send errors).
pub(crate) fn flood(plan: FloodPlan, start: Arc<Barrier>, stop: Arc<AtomicBool>, sent: Arc<AtomicU64>) -> Result<(u64, u64)> {
    let sock = RawSocket::open(&plan.ifname).with_context(|| format!("raw socket on {}", plan.ifname))?;
    let mut rng = Rng(plan.seed | 1);
    let mut frame = [0u8; SYN_LEN];
    let (mut n, mut errors) = (0u64, 0u64);
    start.wait();
    let t0 = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if plan.pps > 0 {
            // Paced in bursts of 64: never ahead of the schedule.
            let due = (t0.elapsed().as_secs_f64() * plan.pps as f64) as u64;
            if n >= due {
                std::thread::sleep(Duration::from_micros(200));
                continue;
            }
        }
        for _ in 0..64 {
            let r = rng.next();
            let src = plan.source(&mut rng);
            build_syn(&mut frame, plan.macs, src, plan.dst, (r as u16).max(1024), PORT, (r >> 16) as u32);
            match sock.send(&frame) {
                Ok(()) => n += 1,
                Err(e) if e.kind() == ErrorKind::WouldBlock || e.raw_os_error() == Some(libc::ENOBUFS) => errors += 1,
                Err(e) => return Err(e).context("sending a SYN"),
            }
        }
        sent.store(n, Ordering::Relaxed);
    }
    Ok((n, errors))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syn_checksums_verify() {
        let mut f = [0u8; SYN_LEN];
        let (src, dst) = (Ipv4Addr::new(198, 18, 3, 7), Ipv4Addr::new(198, 18, 3, 100));
        build_syn(&mut f, ([2; 6], [4; 6]), src, dst, 4242, 7000, 0xdead_beef);
        assert_eq!(checksum(&f[14..34], 0), 0);
        let mut pseudo = 6u32 + 24;
        for w in f[26..34].chunks(2) {
            pseudo += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
        assert_eq!(checksum(&f[34..58], pseudo), 0);
        assert_eq!(f[47], 0x02, "SYN flag only");
    }

    #[test]
    fn sources_stay_in_the_test_range_and_avoid_lab_hosts() {
        let plan = FloodPlan {
            ifname: String::new(),
            macs: ([0; 6], [0; 6]),
            subnet: [198, 18, 9],
            exclude: vec![1, 2, 100],
            dst: Ipv4Addr::new(198, 18, 9, 100),
            pps: 0,
            offlink_percent: 30,
            seed: 1,
        };
        let mut rng = Rng(12345);
        let (mut on, mut off) = (0, 0);
        for _ in 0..100_000 {
            let a = plan.source(&mut rng).octets();
            assert_eq!(a[0], 198);
            assert!(a[1] == 18 || a[1] == 19, "{a:?}");
            assert!((1..=254).contains(&a[3]));
            if a[..3] == [198, 18, 9] {
                assert!(!plan.exclude.contains(&a[3]) && a[3] >= 3, "{a:?}");
                on += 1;
            } else {
                off += 1;
            }
        }
        assert!((25_000..35_000).contains(&off), "{on} {off}");
    }
}
