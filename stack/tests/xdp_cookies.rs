//! SYN cookies answered by the XDP steering program: for the same SYN, at
//! the same time on the same clock, with the same key, the program's
//! SYN-ACK is byte for byte the engine's (checksums included), for SYNs as
//! Linux sends them, without options, with data, and with thousands of
//! random option bytes; what it cannot answer exactly as the engine would
//! it leaves untouched for the stack. The program runs through
//! BPF_PROG_RUN, unattached. Needs root.

use std::net::Ipv4Addr;
use std::time::Duration;

use stack::xsk::testing::{cookie_answer, frames};
use xsk_io::steer::{SteerFlags, SteerRun, Verdict};

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
    let (engine, mut params) = cookie_answer(syn, AT);
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
    assert_same(&mut run, &syn(peer, 40004, 7, &linux, b"data on a SYN is not kept"), "a SYN with data (the frame shrinks)");
    assert_same(&mut run, &syn(Ipv4Addr::new(198, 18, 0, 200), 65535, 8, &[2, 4, 0x05, 0x14, 3, 3, 0], &[]), "MSS 1300, window scale 0");
}

#[test]
fn random_option_bytes_get_the_engines_answer_or_are_left_alone() {
    let mut run = program();
    let mut x: u64 = 0x5eed;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let kinds = [0u8, 1, 2, 3, 4, 8, 30, 255];
    let (mut answered, mut left) = (0, 0);
    for i in 0..3000 {
        let n = (next() % 41) as usize;
        let mut opts = vec![0u8; n];
        for (k, b) in opts.iter_mut().enumerate() {
            let r = next();
            // Mostly option kinds and small lengths, so options parse part of the way.
            *b = if k % 2 == 0 { kinds[(r % 8) as usize] } else { (r % 12) as u8 };
        }
        let src = Ipv4Addr::from(0xc612_0000 | (next() as u32 & 0xffff));
        let f = syn(src, 1024 + (next() % 60000) as u16, next() as u32, &opts, &[]);
        let (engine, verdict, out) = both(&mut run, &f, true);
        match verdict {
            Verdict::Tx => {
                assert_eq!(Some(&out), engine.as_ref(), "SYN {i} with options {opts:?}");
                answered += 1;
            }
            v => {
                assert_eq!(v, Verdict::Pass, "SYN {i}");
                assert_eq!(out, f, "SYN {i}: a frame left to the stack must be untouched");
                left += 1;
            }
        }
    }
    // Options inside the frame are always read to the end: every one answered.
    assert_eq!((answered, left), (3000, 0));
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
