//! SYN cookies answered by the XDP steering program: for the same SYN, at
//! the same time on the same clock, with the same key, the program's
//! SYN-ACK is byte for byte the engine's (checksums included), for SYNs as
//! Linux sends them, without options, and with thousands of random option
//! bytes; a SYN the engine would drop (wrong checksum, a source no peer can
//! have, a fragment, another MAC...) the program leaves untouched for the
//! stack, which counts it; so are SYNs it does not answer by design (data
//! on the SYN, IP options). The program runs through BPF_PROG_RUN,
//! unattached. Needs root.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use stack::xsk::testing::{cookie_answer, frames};
use xsk_device::steer::{SteerFlags, SteerRun, Verdict};

/// The engine's clock when the SYNs arrive: the middle of a 64-second
/// cookie period, so the program, a moment later, is in the same one.
const AT: Duration = Duration::from_secs(64 * 7 + 32);
const PORT: u16 = 7000;

fn program() -> SteerRun {
    let run = SteerRun::load().expect("load the steering program (root?)");
    run.set_addr(Ipv4Addr::new(198, 18, 0, 1), SteerFlags::ARP | SteerFlags::ICMP).unwrap();
    run.add_tcp_listener(PORT).unwrap();
    run
}

/// The engine's answer, and the program's for the same SYN.
fn both(run: &mut SteerRun, syn: &[u8], on: bool) -> (Option<Vec<u8>>, Verdict, Vec<u8>) {
    both_partial(run, syn, on, false)
}

fn both_partial(run: &mut SteerRun, syn: &[u8], on: bool, accept_partial: bool) -> (Option<Vec<u8>>, Verdict, Vec<u8>) {
    let (engine, mut params) = cookie_answer(syn, AT, accept_partial);
    params.epoch_ns = xsk_io::sys::monotonic_ns() - AT.as_nanos() as u64;
    run.set_cookies(0, &params, on).unwrap();
    let (verdict, out) = run.run(syn).unwrap();
    (engine, verdict, out)
}

fn syn(src: Ipv4Addr, sport: u16, seq: u32, options: &[u8], payload: &[u8]) -> Vec<u8> {
    frames::tcp(&frames::TcpSpec { src, sport, dport: PORT, seq, flags: 0x02, options, payload, ..Default::default() })
}

fn assert_same(run: &mut SteerRun, f: &[u8], what: &str) {
    let (engine, verdict, out) = both(run, f, true);
    let engine = engine.unwrap_or_else(|| panic!("{what}: the engine sent nothing"));
    assert_eq!(verdict, Verdict::Tx, "{what}: the program did not answer");
    assert_eq!(out, engine, "{what}: the program's SYN-ACK differs from the engine's");
}

#[test]
fn the_programs_syn_ack_is_the_engines_byte_for_byte() {
    let mut run = program();
    let peer = Ipv4Addr::new(198, 18, 0, 2);
    // Linux's SYN: MSS, SACK permitted, timestamps, NOP, window scale 7.
    let linux = [2, 4, 0x05, 0xb4, 4, 2, 8, 10, 0, 1, 2, 3, 0, 0, 0, 0, 1, 3, 3, 7];
    assert_same(&mut run, &syn(peer, 40000, 1, &linux, &[]), "a Linux SYN");
    assert_same(&mut run, &syn(peer, 40001, 0xffff_ffff, &[], &[]), "no options (the frame grows)");
    assert_same(&mut run, &syn(peer, 40002, 5, &[2, 4, 0x03, 0xe8], &[]), "MSS 1000 only");
    assert_same(&mut run, &syn(peer, 40003, 6, &[1, 1, 3, 3, 20, 1, 4, 2, 2, 4, 0x05, 0xa0], &[]), "NOPs, a window scale above 14, SACK, MSS 1440");
    assert_same(&mut run, &syn(Ipv4Addr::new(198, 18, 0, 200), 65535, 8, &[2, 4, 0x05, 0x14, 3, 3, 0], &[]), "MSS 1300, window scale 0");
}

fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

fn random_options(x: &mut u64) -> Vec<u8> {
    let kinds = [0u8, 1, 2, 3, 4, 8, 30, 255];
    let n = (xorshift(x) % 41) as usize;
    // Mostly option kinds and small lengths, so options parse part of the way.
    (0..n).map(|k| if k % 2 == 0 { kinds[(xorshift(x) % 8) as usize] } else { (xorshift(x) % 12) as u8 }).collect()
}

#[test]
fn random_option_bytes_get_the_engines_answer() {
    let mut run = program();
    let mut x: u64 = 0x5eed;
    for i in 0..3000 {
        let opts = random_options(&mut x);
        let src = Ipv4Addr::from(0xc612_0000 | (xorshift(&mut x) as u32 & 0xff00) | 2);
        let f = syn(src, 1024 + (xorshift(&mut x) % 60000) as u16, xorshift(&mut x) as u32, &opts, &[]);
        let (engine, verdict, out) = both(&mut run, &f, true);
        // Options inside the frame are always read to the end: every one answered.
        assert_eq!(verdict, Verdict::Tx, "SYN {i} with options {opts:?}");
        assert_eq!(Some(&out), engine.as_ref(), "SYN {i} with options {opts:?}");
    }
}

/// SYNs as a hostile or broken network sends them: the program answers exactly those the
/// engine answers (and the same way), except SYNs with data or IP options, which it leaves
/// to the engine; everything else it leaves untouched.
#[test]
fn the_program_answers_what_the_engine_answers_and_nothing_else() {
    let mut run = program();
    let mut x: u64 = 0xbad5eed;
    let sources = [
        Ipv4Addr::new(198, 18, 0, 2),
        Ipv4Addr::new(198, 18, 0, 77),
        Ipv4Addr::new(198, 19, 4, 5), // off-link: fine for a SYN
        Ipv4Addr::new(0, 0, 0, 0),
        Ipv4Addr::new(255, 255, 255, 255),
        Ipv4Addr::new(224, 0, 0, 1),
        Ipv4Addr::new(127, 0, 0, 1),
        Ipv4Addr::new(240, 0, 0, 1),
        Ipv4Addr::new(198, 18, 0, 1),   // ours
        Ipv4Addr::new(198, 18, 0, 255), // the subnet's broadcast
    ];
    let macs: [[u8; 6]; 4] = [[2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 9], [1, 0, 0x5e, 0, 0, 1], [0; 6]];
    let (mut answered, mut both_refused, mut left_by_design) = (0, 0, 0);
    for i in 0..4000 {
        let r = xorshift(&mut x);
        let opts = random_options(&mut x);
        let payload: &[u8] = if r.is_multiple_of(10) { b"data on a SYN" } else { b"" };
        let accept_partial = r & 0x10 != 0;
        let mut spec = frames::TcpSpec {
            src: sources[(xorshift(&mut x) % 10) as usize % if r & 0x20 != 0 { 10 } else { 3 }],
            src_mac: macs[(xorshift(&mut x) % 4) as usize % if r & 0x40 != 0 { 4 } else { 1 }],
            dst_mac: if r.is_multiple_of(23) { [2, 0, 0, 0, 0, 7] } else { [2, 0, 0, 0, 0, 1] },
            sport: if r.is_multiple_of(97) { 0 } else { 1024 + (r >> 20) as u16 % 60000 },
            dport: PORT,
            seq: (r >> 32) as u32,
            flags: 0x02,
            options: &opts,
            payload,
            partial_csum: r.is_multiple_of(7),
            frag: [0x4000, 0x4000, 0x4000, 0x2000, 0x0001][(xorshift(&mut x) % 5) as usize % if r.is_multiple_of(3) { 5 } else { 1 }],
            ..Default::default()
        };
        if r.is_multiple_of(31) {
            spec.dst = Ipv4Addr::new(198, 18, 0, 3);
        }
        let mut f = frames::tcp(&spec);
        let corrupt = r.is_multiple_of(11);
        if corrupt {
            let at = 14 + (xorshift(&mut x) as usize % (f.len() - 14));
            f[at] ^= 1 << (xorshift(&mut x) % 8);
        }
        let ip_options = r.is_multiple_of(13);
        if ip_options {
            f.splice(34..34, [1, 1, 1, 0]);
            f[14] = 0x46;
            let total = (f.len() - 14) as u16;
            f[16..18].copy_from_slice(&total.to_be_bytes());
        }
        let (engine, verdict, out) = both_partial(&mut run, &f, true, accept_partial);
        let what = format!("SYN {i}: {spec:?} corrupt {corrupt} ip options {ip_options} accept_partial {accept_partial}");
        match (&engine, verdict) {
            (Some(e), Verdict::Tx) => {
                assert_eq!(&out, e, "{what}");
                answered += 1;
            }
            (Some(_), v) => {
                assert!(!payload.is_empty() || ip_options, "{what}: the engine answers it, the program did not ({v:?})");
                assert_eq!((v, &out), (Verdict::Pass, &f), "{what}");
                left_by_design += 1;
            }
            (None, v) => {
                assert_eq!((v, &out), (Verdict::Pass, &f), "{what}: the engine drops it, the program must leave it");
                both_refused += 1;
            }
        }
    }
    eprintln!("answered {answered}, refused by both {both_refused}, left to the engine by design {left_by_design}");
    assert!(answered > 1000 && both_refused > 500 && left_by_design > 100, "{answered} {both_refused} {left_by_design}");
}

#[test]
fn what_the_program_must_not_answer_it_leaves_to_the_stack() {
    let mut run = program();
    let peer = Ipv4Addr::new(198, 18, 0, 2);
    let f = syn(peer, 40000, 1, &[2, 4, 0x05, 0xb4], &[]);
    // Cookies off for the queue.
    let (_, verdict, out) = both(&mut run, &f, false);
    assert_eq!((verdict, &out), (Verdict::Pass, &f));
    // A steered port nobody listens on (an outgoing connection's).
    run.add_tcp_port(PORT).unwrap();
    let (_, verdict, out) = both(&mut run, &f, true);
    assert_eq!((verdict, &out), (Verdict::Pass, &f));
    run.add_tcp_listener(PORT).unwrap();
    // Not a pure SYN: SYN-ACK, RST.
    for flags in [0x12u8, 0x06] {
        let g = frames::tcp(&frames::TcpSpec { src: peer, dport: PORT, flags, ..Default::default() });
        let (_, verdict, out) = both(&mut run, &g, true);
        assert_eq!((verdict, &out), (Verdict::Pass, &g), "flags {flags:#x}");
    }
    // IP options (the engine's SYN-ACK has none; the program does not move headers).
    let mut g = f.clone();
    g.splice(34..34, [1, 1, 1, 0]);
    g[14] = 0x46;
    let total = (g.len() - 14) as u16;
    g[16..18].copy_from_slice(&total.to_be_bytes());
    let (_, verdict, out) = both(&mut run, &g, true);
    assert_eq!((verdict, &out), (Verdict::Pass, &g));
    // Options said to run past the frame.
    let mut g = f.clone();
    g[46] = 0xf0;
    let (_, verdict, out) = both(&mut run, &g, true);
    assert_eq!((verdict, &out), (Verdict::Pass, &g));
}

/// A server may listen on a port inside the steered ephemeral range (a dedicated address
/// steers the whole range): its SYNs get the program's cookie SYN-ACK too, and a SYN for
/// a port of the range that nobody listens on (an outgoing connection's) is left alone.
#[test]
fn a_listener_inside_the_steered_range_gets_cookies_too() {
    let mut run = program();
    run.set_addr_and_range(Ipv4Addr::new(198, 18, 0, 1), SteerFlags::ARP | SteerFlags::ICMP, (6000, 8000)).unwrap();
    let peer = Ipv4Addr::new(198, 18, 0, 2);
    // PORT (7000) is inside the range and listening.
    assert_same(&mut run, &syn(peer, 40000, 1, &[2, 4, 0x05, 0xb4], &[]), "a listener inside the range");
    let g = frames::tcp(&frames::TcpSpec { src: peer, sport: 40001, dport: 7001, seq: 2, flags: 0x02, ..Default::default() });
    let (verdict, out) = run.run(&g).unwrap();
    assert_eq!((verdict, &out), (Verdict::Pass, &g), "a range port nobody listens on");
}

const US6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1);

/// The program with the engine's IPv6 address too (dedicated: `cookie_answer`'s engine).
fn program6() -> SteerRun {
    let run = SteerRun::load().expect("load the steering program (root?)");
    run.set_addrs(Ipv4Addr::new(198, 18, 0, 1), Some(US6), SteerFlags::ARP | SteerFlags::ICMP, None).unwrap();
    run.add_tcp_listener(PORT).unwrap();
    run
}

fn syn6(src: Ipv6Addr, sport: u16, seq: u32, options: &[u8], payload: &[u8], partial_csum: bool) -> Vec<u8> {
    let spec = frames::TcpSpec { sport, dport: PORT, seq, flags: 0x02, options, payload, partial_csum, ..Default::default() };
    frames::tcp6(&spec, src, US6)
}

/// Over IPv6: the program's SYN-ACK is the engine's, byte for byte (its MSS 20 bytes less
/// than IPv4's), for Linux's SYN, none, and thousands of random option bytes and sources.
#[test]
fn over_ipv6_the_programs_syn_ack_is_the_engines_byte_for_byte() {
    let mut run = program6();
    let peer = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2);
    let linux = [2, 4, 0x05, 0xa0, 4, 2, 8, 10, 0, 1, 2, 3, 0, 0, 0, 0, 1, 3, 3, 7];
    assert_same(&mut run, &syn6(peer, 40000, 1, &linux, &[], false), "a Linux SYN over IPv6");
    assert_same(&mut run, &syn6(peer, 40001, 0xffff_ffff, &[], &[], false), "no options");
    let (_, _, out) = both(&mut run, &syn6(peer, 40002, 7, &[2, 4, 0x05, 0xa0], &[], false), true);
    assert_eq!(out[74..78], [2, 4, 0x05, 0xa0], "MSS 1440: the MTU less the IPv6 and TCP headers");
    let mut x: u64 = 0x5eed6;
    for i in 0..2000 {
        let opts = random_options(&mut x);
        let src = Ipv6Addr::from(0x2001_0002_0000_0000_0000_0000_0000_0000u128 | (xorshift(&mut x) as u128) << 16 | 2);
        let f = syn6(src, 1024 + (xorshift(&mut x) % 60000) as u16, xorshift(&mut x) as u32, &opts, &[], i % 3 == 0);
        let (engine, verdict, out) = both_partial(&mut run, &f, true, true);
        assert_eq!(verdict, Verdict::Tx, "SYN {i} with options {opts:?}");
        assert_eq!(Some(&out), engine.as_ref(), "SYN {i} with options {opts:?}");
    }
}

/// Over IPv6, a SYN the engine refuses the program leaves untouched (and one with data,
/// by design, though the engine answers it).
#[test]
fn over_ipv6_what_the_engine_refuses_the_program_leaves() {
    let mut run = program6();
    let peer = Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2);
    let opts = [2, 4, 0x05, 0xa0];
    let mut cases: Vec<(Vec<u8>, bool, &str)> = Vec::new();
    for (src, what) in [
        (Ipv6Addr::UNSPECIFIED, "unspecified"),
        (Ipv6Addr::LOCALHOST, "loopback"),
        ("ff02::1".parse().unwrap(), "multicast"),
        ("::ffff:198.18.0.2".parse().unwrap(), "IPv4-mapped"),
        (US6, "ours"),
    ] {
        cases.push((syn6(src, 40000, 1, &opts, &[], false), false, what));
    }
    let mut bad_sum = syn6(peer, 40000, 1, &opts, &[], false);
    bad_sum[70] ^= 1;
    cases.push((bad_sum, false, "a wrong checksum"));
    cases.push((syn6(peer, 40000, 1, &opts, &[], true), false, "a partial checksum, not accepted"));
    let mut other_mac = syn6(peer, 40000, 1, &opts, &[], false);
    other_mac[5] = 9;
    cases.push((other_mac, false, "another MAC"));
    let mut other_dst = syn6(peer, 40000, 1, &opts, &[], false);
    other_dst[14 + 39] = 9;
    cases.push((other_dst, false, "another address (steered to the kernel)"));
    cases.push((syn6(peer, 40000, 1, &opts, b"data", false), true, "data on the SYN"));
    for (f, engine_answers, what) in cases {
        let (engine, verdict, out) = both(&mut run, &f, true);
        assert_eq!(engine.is_some(), engine_answers, "{what}: the engine");
        assert_eq!(verdict, Verdict::Pass, "{what}");
        assert!(out[..f.len()] == f[..], "{what}: the frame was changed");
    }
}
