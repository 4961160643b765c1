use std::net::Ipv4Addr;
use std::time::Duration;

use clap::{CommandFactory, Parser};

use xsk_lab::pktgen::{self, FrameSpec, Proto};

use super::*;
use crate::pingpong::{partial_tcp_csum, pseudo_sum, stamp, swap_ip_and_ports, PING_PORT, SEQ_AT};
use crate::report::Rtt;

/// A ping's frame from 198.18.0.1 to `dst_ip`, `size` bytes, and the spec it was built from.
fn ping_frame(dst_ip: Ipv4Addr, size: usize) -> (FrameSpec, Vec<u8>) {
    let spec = FrameSpec {
        src_mac: [2, 0, 0, 0, 0, 1],
        dst_mac: [2, 0, 0, 0, 0, 2],
        src_ip: Ipv4Addr::new(198, 18, 0, 1),
        dst_ip,
        src_port: PING_PORT,
        dst_port: 9000,
        proto: Proto::Tcp,
        size,
    };
    let mut a = vec![0u8; size];
    pktgen::build(&spec, &mut a);
    (spec, a)
}

#[test]
fn pong_swaps_addresses_and_ports_and_keeps_the_checksums() {
    let (spec, mut a) = ping_frame(Ipv4Addr::new(198, 18, 0, 2), 118);
    let mut b = a.clone();
    swap_ip_and_ports(&mut b);
    let back = FrameSpec { src_ip: spec.dst_ip, dst_ip: spec.src_ip, src_port: 9000, dst_port: PING_PORT, ..spec };
    let mut c = vec![0u8; 118];
    pktgen::build(&back, &mut c);
    // What the reflector sends back is the frame built the other way round (MACs aside).
    assert_eq!(b[12..], c[12..]);
    // Not IPv4, or too short: left alone.
    let mut arp = a.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    let before = arp.clone();
    swap_ip_and_ports(&mut arp);
    assert_eq!(arp, before);
    swap_ip_and_ports(&mut a[..20]);
}

#[test]
fn the_partial_checksum_completes_to_the_full_one() {
    let (_, a) = ping_frame(Ipv4Addr::new(198, 18, 7, 9), 121);
    let full = u16::from_be_bytes([a[50], a[51]]);
    // A stamped frame carries a valid checksum: the TCP segment sums to zero with its
    // pseudo header.
    let mut st = a.clone();
    stamp(&mut st, 0x0102_0304_0506_0708);
    assert_eq!(st[SEQ_AT..SEQ_AT + 8], [1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(pktgen::checksum(&st[34..], u32::from(pseudo_sum(&st))), 0);
    let mut b = a.clone();
    partial_tcp_csum(&mut b);
    assert_ne!(b[50..52], a[50..52]);
    // What the device (or the kernel) does with CHECKSUM_PARTIAL: sum from csum_start
    // with the pseudo-header sum in the field, and write the complement there.
    assert_eq!(pktgen::checksum(&b[34..], 0), full);
}

#[test]
fn round_trip_percentiles() {
    assert!(Rtt::from_samples(vec![], 3).is_none());
    let r = Rtt::from_samples((1..=1000).rev().collect(), 2).unwrap();
    assert_eq!((r.count, r.lost, r.p50_ns, r.p99_ns, r.p999_ns), (1000, 2, 501, 990, 999));
    assert_eq!(r.mean_ns, 500.5);
}

#[test]
fn cli_conventions() {
    Args::command().debug_assert();
    // Long options only (no short flag that means something else in another binary).
    assert!(Args::command().get_arguments().all(|a| a.get_short().is_none()));
    let a = Args::try_parse_from(["xsk-bench", "txonly", "--duration", "1m30s"]).unwrap();
    assert_eq!(a.duration, Duration::from_secs(90));
    for bad in ["5", "0s", "soon"] {
        assert!(Args::try_parse_from(["xsk-bench", "txonly", "--duration", bad]).is_err(), "{bad}");
    }
}
