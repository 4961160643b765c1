//! Two engines in memory, request/response over a lossy wire, on a virtual
//! clock: what loss recovery costs, with no machine noise in it.
//!
//! A client engine opens `conns` connections to a server engine and keeps one
//! request in flight on each (closed loop, as rr-demo's loss cases do); the
//! client's fault injector drops `loss` of the frames each way (rr-demo's
//! loss1-same-16). Every step of the clock both engines run one pass
//! (receive, answer, egress) and the frames sent cross the wire, arriving one
//! step later (or, with JITTER, 1 to 1 + JITTER steps later, in order each way).
//! Prints requests per virtual second, latency percentiles and
//! what recovery did, once per recovery setting asked for.
//!
//! `LOSS_SIM_RECOVERY=default,no-sack,...` picks the recovery settings to run
//! (default, timestamps, no-sack, ts-no-sack; default: default,timestamps).
//! `LOSS_SIM_RESPONSE=BYTES` answers each request with that many bytes instead of
//! an echo (rr-demo's loss1-64k-16 is `LOSS_SIM_RESPONSE=65536`): multi-segment
//! flights, where a window can hold more than one loss.
//!
//! ```text
//! cargo run --release -p stack-engine --features testing --example loss_sim -- [CONNS] [LOSS] [SECONDS] [SEED] [JITTER]
//! ```

use std::net::SocketAddrV4;
use std::time::Duration;

use bytes::BytesMut;
use stack_engine::{ConnId, Event, Faults, Recovery, RecoveryStats};
use stack_engine::testing::{config, Pair};

const PORT: u16 = 7;
const REQ: usize = 64;
const STEP: Duration = Duration::from_micros(5);

struct Outcome {
    requests: u64,
    latencies_us: Vec<u64>,
    server: RecoveryStats,
    client: RecoveryStats,
}

fn run(recovery: Recovery, conns: usize, loss: f64, seconds: u64, seed: u64, jitter: u64) -> Outcome {
    let (mut a, mut b) = (config(Pair::A), config(Pair::B));
    a.tcp.recovery = recovery;
    b.tcp.recovery = recovery;
    let mut p = Pair::with(a, b);
    let mut faults = Faults::default();
    (faults.rx_drop, faults.tx_drop, faults.seed) = (loss, loss, seed);
    p.b.set_faults(faults);
    p.a.listen(PORT).unwrap();
    let mut sent_at = std::collections::HashMap::new();
    for _ in 0..conns {
        p.b.connect(SocketAddrV4::new(Pair::A, PORT)).unwrap();
    }
    let steps = seconds * 1_000_000 / STEP.as_micros() as u64;
    let (mut ea, mut eb) = (Vec::new(), Vec::new());
    let mut buf = BytesMut::with_capacity(4096);
    let mut pending: std::collections::HashMap<ConnId, usize> = Default::default();
    let mut latencies_us = Vec::new();
    let mut requests = 0u64;
    let step_us = STEP.as_micros() as u64;
    let mut req = [b'q'; REQ];
    let mut port_of: std::collections::HashMap<u64, u16> = Default::default();
    let mut rng = stack_engine::testing::Rng(seed ^ 0x5eed);
    let trace: Option<(u16, u64, u64)> = std::env::var("LOSS_SIM_TRACE").ok().map(|v| {
        let x: Vec<u64> = v.split(':').map(|n| n.parse().expect("PORT:FROM_US:TO_US")).collect();
        (x[0] as u16, x[1], x[2])
    });
    let show_slow = std::env::var_os("LOSS_SIM_SLOW").is_some() && (recovery.timestamps || std::env::var_os("LOSS_SIM_SLOW_ALL").is_some());
    let response: Option<usize> = std::env::var("LOSS_SIM_RESPONSE").ok().map(|v| v.parse().expect("LOSS_SIM_RESPONSE: bytes"));
    let answer = vec![b'a'; 16 * 1024];
    // Bytes the server still owes each connection (LOSS_SIM_RESPONSE), and requests' bytes
    // it has read towards the next one.
    let mut owed: std::collections::HashMap<ConnId, (usize, usize)> = Default::default();
    let resp_len = response.unwrap_or(REQ);
    let (mut to_a, mut to_b) = (std::collections::VecDeque::new(), std::collections::VecDeque::new());
    let (mut last_a, mut last_b) = (0u64, 0u64);
    for step in 0..steps {
        let now_us = step * step_us;
        ea.clear();
        eb.clear();
        let _ = p.a.poll(&mut ea, None);
        let _ = p.b.poll(&mut eb, None);
        for e in &ea {
            let c = match *e {
                Event::Readable(c) | Event::Accepted { conn: c, .. } => c,
                // A long answer's rest, once the send buffer has room.
                Event::Writable(c) if response.is_some() => c,
                _ => continue,
            };
            buf.clear();
            while p.a.recv(c, &mut buf).unwrap_or(0) > 0 {}
            if buf.len() >= 8 {
                let idx = u64::from_le_bytes(buf[..8].try_into().unwrap());
                port_of.insert(idx, p.a.peer_addr(c).map_or(0, |a| a.port()));
            }
            let Some(len) = response else {
                if !buf.is_empty() {
                    // Echo what came: a response per request.
                    let n = p.a.send(c, &buf).unwrap();
                    assert_eq!(n, buf.len(), "the server's send buffer holds a response");
                }
                continue;
            };
            let (debt, partial) = owed.entry(c).or_default();
            *partial += buf.len();
            *debt += *partial / REQ * len;
            *partial %= REQ;
            while *debt > 0 {
                let n = p.a.send(c, &answer[..(*debt).min(answer.len())]).unwrap_or(0);
                if n == 0 {
                    break;
                }
                *debt -= n;
            }
        }
        for e in &eb {
            match *e {
                Event::Connected(c) => {
                    req[..8].copy_from_slice(&u64::from(c.0).to_le_bytes());
                    p.b.send(c, &req).unwrap();
                    sent_at.insert(c, now_us);
                }
                Event::Readable(c) => {
                    buf.clear();
                    while p.b.recv(c, &mut buf).unwrap_or(0) > 0 {}
                    let got = pending.entry(c).or_default();
                    *got += buf.len();
                    if *got >= resp_len {
                        *got -= resp_len;
                        requests += 1;
                        latencies_us.push(now_us - sent_at[&c]);
                        if show_slow && now_us - sent_at[&c] > 20_000 {
                            println!("slow: port {} sent {} us, took {} us", port_of.get(&u64::from(c.0)).copied().unwrap_or(0), sent_at[&c], now_us - sent_at[&c]);
                        }
                        req[..8].copy_from_slice(&u64::from(c.0).to_le_bytes());
                        p.b.send(c, &req).unwrap();
                        sent_at.insert(c, now_us);
                    }
                }
                _ => {}
            }
        }
        let _ = p.a.flush();
        let _ = p.b.flush();
        if let Some((port, from, to)) = trace {
            if now_us >= from && now_us <= to {
                for (who, frames) in [("S->", &p.a.link.out), ("C->", &p.b.link.out)] {
                    for f in frames.iter() {
                        if let Some(g) = stack_engine::testing::frames::parse_tcp(f) {
                            if g.sport == port || g.dport == port {
                                println!("{now_us:>9} {who} seq {:>10} ack {:>10} fl {:02x} len {:>3} opts {:02x?}", g.seq, g.ack, g.flags, g.payload.len(), &f[54..(54 + ((f[46] >> 4) as usize * 4 - 20)).min(f.len())]);
                            }
                        }
                    }
                }
            }
        }
        if let Some((port, from, to)) = trace {
            if recovery.timestamps && now_us >= from && now_us <= to && (now_us % 1000 == 0 || !p.a.link.out.is_empty()) {
                let mut out = String::new();
                let all: Vec<usize> = (0..p.a.engine.buckets()).collect();
                p.a.engine.dump_state(&all, false, &mut out);
                for line in out.lines().filter(|l| l.contains(&format!("port: {port}"))) {
                    let pick = |k: &str| line.find(k).map(|i| &line[i..(i + 60).min(line.len())]).unwrap_or("-");
                    println!("{now_us:>9} server: {} | {} | {} | {}", pick("timer:"), pick("tlp_at:"), pick("tlp_high:"), pick("resent:"));
                }
            }
        }
        // The wire: one step, or with jitter 1 to 1 + jitter steps, in order each way.
        for (frames, wire, last) in [(p.a.take_sent(), &mut to_b, &mut last_b), (p.b.take_sent(), &mut to_a, &mut last_a)] {
            for f in frames {
                if f.len() > 13 && f[12..14] == [0x08, 0x06] {
                    continue; // ARP: the neighbours are known
                }
                let due = (step + 1 + if jitter > 0 { rng.below(jitter + 1) } else { 0 }).max(*last);
                *last = due;
                wire.push_back((due, f));
            }
        }
        while to_b.front().is_some_and(|(due, _)| *due <= step + 1) {
            p.b.inbox.push_back(to_b.pop_front().unwrap().1);
        }
        while to_a.front().is_some_and(|(due, _)| *due <= step + 1) {
            p.a.inbox.push_back(to_a.pop_front().unwrap().1);
        }
        p.advance(STEP);
    }
    if std::env::var_os("LOSS_SIM_RAISED").is_some() {
        for (who, t) in [("server", &p.a), ("client", &p.b)] {
            let mut out = String::new();
            let all: Vec<usize> = (0..t.engine.buckets()).collect();
            t.engine.dump_state(&all, false, &mut out);
            let delays: Vec<&str> = out
                .lines()
                .filter_map(|l| l.find("tlp_ack_delay: ").map(|i| &l[i + 15..(i + 40).min(l.len())]))
                .map(|d| d.split(',').next().unwrap_or(d))
                .collect();
            println!("    {who} allowances: {delays:?}");
        }
    }
    latencies_us.sort_unstable();
    Outcome { requests, latencies_us, server: p.a.engine.stats().recovery, client: p.b.engine.stats().recovery }
}

fn pct(v: &[u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v[((v.len() as f64 * q) as usize).min(v.len() - 1)]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let conns: usize = args.first().map_or(16, |s| s.parse().expect("CONNS"));
    let loss: f64 = args.get(1).map_or(0.01, |s| s.parse().expect("LOSS"));
    let seconds: u64 = args.get(2).map_or(2, |s| s.parse().expect("SECONDS"));
    let seed: u64 = args.get(3).map_or(1, |s| s.parse().expect("SEED"));
    let jitter: u64 = args.get(4).map_or(0, |s| s.parse().expect("JITTER"));
    let base = Recovery::default().with_ack_delay(Duration::from_millis(5));
    println!("{conns} connections, {:.1}% loss each way at the client, {seconds} s of virtual time, seed {seed}, answers of {} bytes", loss * 100.0, std::env::var("LOSS_SIM_RESPONSE").unwrap_or_else(|_| REQ.to_string()));
    println!("{:<14} {:>9} {:>8} {:>8} {:>8} {:>9} {:>9}  server: probes spurious rto | client: probes spurious rto", "recovery", "req/s", "p50 us", "p99 us", "p99.9", "max us", "mean us");
    // LOSS_SIM_RECOVERY=NAME,...: which of these to run (default: default,timestamps).
    let known = [
        ("default", base),
        ("timestamps", base.with_timestamps(true)),
        ("no-sack", base.with_sack(false)),
        ("ts-no-sack", base.with_timestamps(true).with_sack(false)),
    ];
    let wanted = std::env::var("LOSS_SIM_RECOVERY").unwrap_or_else(|_| "default,timestamps".into());
    let runs: Vec<(&str, Recovery)> = wanted
        .split(',')
        .map(|w| *known.iter().find(|(n, _)| *n == w).unwrap_or_else(|| panic!("LOSS_SIM_RECOVERY: {w}? one of default, timestamps, no-sack, ts-no-sack")))
        .collect();
    for (name, r) in runs {
        let o = run(r, conns, loss, seconds, seed, jitter);
        let mean = o.latencies_us.iter().sum::<u64>() as f64 / o.latencies_us.len().max(1) as f64;
        println!(
            "{:<14} {:>9} {:>8} {:>8} {:>8} {:>9} {:>9.0}  {:>6} {:>8} {:>3} | {:>6} {:>8} {:>3}",
            name,
            o.requests / seconds,
            pct(&o.latencies_us, 0.5),
            pct(&o.latencies_us, 0.99),
            pct(&o.latencies_us, 0.999),
            o.latencies_us.last().copied().unwrap_or(0),
            mean,
            o.server.tail_probes,
            o.server.spurious_probes,
            o.server.rto_retransmits,
            o.client.tail_probes,
            o.client.spurious_probes,
            o.client.rto_retransmits,
        );
        if std::env::var_os("LOSS_SIM_BUCKETS").is_some() {
            let edges = [1_000u64, 6_000, 20_000, 60_000, 120_000, 250_000, u64::MAX];
            let mut lo = 0;
            for hi in edges {
                let in_b: Vec<u64> = o.latencies_us.iter().copied().filter(|&l| l >= lo && l < hi).collect();
                println!("    [{lo}, {hi}) us: {} requests, {} us in all", in_b.len(), in_b.iter().sum::<u64>());
                lo = hi;
            }
        }
    }
}
