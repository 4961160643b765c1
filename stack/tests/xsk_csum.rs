//! TX checksum offload through AF_XDP TX metadata, against kernel TCP on the
//! other side of a veth pair: with the offload the stack leaves every TCP
//! checksum unfinished (the pseudo-header sum, as a CHECKSUM_PARTIAL sender
//! does) and the kernel peer still takes every segment, because copy mode
//! hands veth a CHECKSUM_PARTIAL skb and the peer skips verifying it;
//! without it (or with a device that has no TX checksum offload) the frames
//! on the wire carry full checksums. Needs root.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rr_load::{Client, ClientReport, EchoWorkload};
use stack::codec::LengthPrefixed;
use stack::kernel::{KernelConfig, KernelTransport};
use xsk_lab::lab::{Lab, Netns};
use xsk_lab::rawsock::RawSocket;

mod common;
use common::{dedicated, lab, xsk_cfg, xsk_server, MAX_FRAME};

/// What the kernel side saw: TCP frames from the stack whose checksum field
/// held the full checksum, held only the pseudo-header sum, or neither.
#[derive(Debug, Default)]
struct Seen {
    full: u64,
    partial: u64,
    wrong: u64,
    /// Passed both tests (by chance): counted as neither.
    either: u64,
}

fn sum16(data: &[u8], mut acc: u32) -> u32 {
    for c in data.chunks(2) {
        acc += u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32;
    }
    acc
}

fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// Classifies one frame if it is TCP from `from`.
fn classify(f: &[u8], from: Ipv4Addr, seen: &mut Seen) {
    if f.len() < 54 || f[12..14] != [0x08, 0x00] || f[23] != 6 || f[26..30] != from.octets() {
        return;
    }
    let ihl = (f[14] & 0x0f) as usize * 4;
    let total = u16::from_be_bytes([f[16], f[17]]) as usize;
    let seg = &f[14 + ihl..14 + total];
    let mut pseudo = sum16(&f[26..34], 0);
    pseudo += 6 + seg.len() as u32;
    let field = u16::from_be_bytes([seg[16], seg[17]]);
    // A frame can pass both tests by chance (its full sum happens to equal the pseudo-header
    // sum: about one frame in 65,536, so now and then one of a run's ~600): it says nothing.
    match (fold(sum16(seg, pseudo)) == 0xffff, field == fold(pseudo)) {
        (true, true) => seen.either += 1,
        (true, false) => seen.full += 1,
        (false, true) => seen.partial += 1,
        (false, false) => seen.wrong += 1,
    }
}

/// Captures the frames arriving on the kernel side until `stop`.
fn capture(ns: &Netns, ifname: String, from: Ipv4Addr, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Seen> {
    let ns = ns.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        let _in = ns.enter().unwrap();
        let sock = RawSocket::open(&ifname).unwrap();
        ready_tx.send(()).unwrap();
        let mut seen = Seen::default();
        let mut buf = vec![0u8; 65536];
        while !stop.load(Ordering::Relaxed) {
            if let Some(n) = sock.recv(&mut buf, Duration::from_millis(20)).unwrap() {
                classify(&buf[..n], from, &mut seen);
            }
        }
        seen
    });
    ready_rx.recv_timeout(Duration::from_secs(5)).unwrap();
    h
}

/// TCP checksum errors counted by the kernel in `ns` (/proc/net/snmp InCsumErrors).
fn csum_errors(ns: &Netns) -> u64 {
    ns.run_in(|| {
        let s = std::fs::read_to_string("/proc/thread-self/net/snmp").unwrap();
        let tcp: Vec<&str> = s.lines().filter(|l| l.starts_with("Tcp:")).collect();
        let names: Vec<&str> = tcp[0].split_whitespace().collect();
        let vals: Vec<&str> = tcp[1].split_whitespace().collect();
        let i = names.iter().position(|n| *n == "InCsumErrors").unwrap();
        vals[i].parse().unwrap()
    })
    .unwrap()
}

/// An echo exchange (sizes up to several segments) from a kernel client to
/// the stack with `offload` asked for; what the kernel side saw, and how
/// many frames the port sent with the offload.
fn run(lab: &Lab, offload: bool, port: u16) -> (Seen, u64) {
    let (mode, a) = dedicated(lab);
    let mut c = xsk_cfg(lab, mode);
    c.port.tx_csum = offload;
    let errors_before = csum_errors(&lab.ns_b);
    let stop = Arc::new(AtomicBool::new(false));
    let cap = capture(&lab.ns_b, lab.if_b.clone(), a, stop.clone());
    let srv = xsk_server(&lab.ns_a, c, port);
    let n = 300;
    let bind = lab.addr_b;
    let ccfg = common::closed_loop(SocketAddrV4::new(a, port), 4, 1, n);
    let r: ClientReport = lab
        .ns_b
        .run_in(move || {
            let t = KernelTransport::new(KernelConfig::default().with_bind(bind)).unwrap();
            Client::new(t, LengthPrefixed::new(MAX_FRAME), EchoWorkload::random(1, 5000, 3), ccfg).run().expect("client")
        })
        .unwrap();
    let (_, st) = srv.finish();
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let seen = cap.join().unwrap();
    assert_eq!((r.errors, r.lost, r.requests), (0, 0, n), "{r}");
    assert_eq!(csum_errors(&lab.ns_b), errors_before, "the kernel peer counted checksum errors");
    (seen, st.port.port.tx_csum_offloaded)
}

#[test]
fn a_kernel_peer_takes_offloaded_checksums_and_full_ones_without() {
    let lab = lab("fpcs");
    let (on, offloaded) = run(&lab, true, 7300);
    // Linux 6.8 and later (this test's machines) take the TX metadata.
    assert!(offloaded > 0, "the port offloaded no checksum: {on:?}");
    assert!(on.partial > 100 && on.full == 0 && on.wrong == 0, "with the offload: {on:?}");
    assert!(offloaded >= on.partial, "{offloaded} offloaded, {on:?}");
    let (off, offloaded) = run(&lab, false, 7301);
    assert_eq!(offloaded, 0);
    assert!(off.full > 100 && off.partial == 0 && off.wrong == 0, "without the offload: {off:?}");
}

/// A device without TX checksum offload: the kernel completes the checksum
/// in software before the frame leaves (validate_xmit_skb), so the peer sees
/// full checksums although the stack left them to the kernel.
#[test]
fn without_device_checksum_offload_the_kernel_completes_them() {
    let lab = lab("fpcd");
    lab.ns_a.run(&["ethtool", "-K", &lab.if_a, "tx", "off"]).expect("ethtool -K tx off");
    let (seen, offloaded) = run(&lab, true, 7302);
    assert!(offloaded > 0);
    assert!(seen.full > 100 && seen.partial == 0 && seen.wrong == 0, "{seen:?}");
}
