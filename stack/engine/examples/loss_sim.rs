//! Two engines in memory, request/response over a lossy wire, on a virtual
//! clock: what loss recovery costs, with no machine noise in it.
//!
//! A client engine opens `conns` connections to a server engine and keeps one
//! request in flight on each (closed loop, as rr-demo's loss cases do); the
//! client's fault injector drops `loss` of the frames each way (rr-demo's
//! loss1-same-16). Every step of the clock both engines run one pass
//! (receive, answer, egress) and the frames sent cross the wire, arriving one
//! step later. Prints requests per virtual second, latency percentiles and
//! what recovery did, once per recovery setting asked for.
//!
//! ```text
//! cargo run --release -p stack-engine --features testing --example loss_sim -- [CONNS] [LOSS] [SECONDS] [SEED]
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

fn run(recovery: Recovery, conns: usize, loss: f64, seconds: u64, seed: u64) -> Outcome {
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
    let req = [b'q'; REQ];
    for step in 0..steps {
        let now_us = step * step_us;
        ea.clear();
        eb.clear();
        let _ = p.a.poll(&mut ea, None);
        let _ = p.b.poll(&mut eb, None);
        for e in &ea {
            if let Event::Readable(c) | Event::Accepted { conn: c, .. } = *e {
                buf.clear();
                while p.a.recv(c, &mut buf).unwrap_or(0) > 0 {}
                if !buf.is_empty() {
                    // Echo what came: a response per request.
                    let n = p.a.send(c, &buf).unwrap();
                    assert_eq!(n, buf.len(), "the server's send buffer holds a response");
                }
            }
        }
        for e in &eb {
            match *e {
                Event::Connected(c) => {
                    p.b.send(c, &req).unwrap();
                    sent_at.insert(c, now_us);
                }
                Event::Readable(c) => {
                    buf.clear();
                    while p.b.recv(c, &mut buf).unwrap_or(0) > 0 {}
                    let got = pending.entry(c).or_default();
                    *got += buf.len();
                    if *got >= REQ {
                        *got -= REQ;
                        requests += 1;
                        latencies_us.push(now_us - sent_at[&c]);
                        p.b.send(c, &req).unwrap();
                        sent_at.insert(c, now_us);
                    }
                }
                _ => {}
            }
        }
        let _ = p.a.flush();
        let _ = p.b.flush();
        p.exchange();
        p.advance(STEP);
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
    let base = Recovery::default().with_ack_delay(Duration::from_millis(5));
    println!("{conns} connections, {:.1}% loss each way at the client, {seconds} s of virtual time, seed {seed}", loss * 100.0);
    println!("{:<14} {:>9} {:>8} {:>8} {:>8} {:>9} {:>9}  server: probes spurious rto | client: probes spurious rto", "recovery", "req/s", "p50 us", "p99 us", "p99.9", "max us", "mean us");
    for (name, r) in [("default", base), ("timestamps", base.with_timestamps(true))] {
        let o = run(r, conns, loss, seconds, seed);
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
