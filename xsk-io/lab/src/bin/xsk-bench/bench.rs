//! The benchmark on one interface: open the port, run the mode's loop for
//! the duration, print and write the summary.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use xsk_device::{BusyPoll, Iface, PortConfig, SteerSpec};
use xsk_io::port::Port;
use xsk_io::socket::RingSizes;
use xsk_io::umem::{Frame, UmemConfig};
use xsk_lab::signals;
use xsk_lab::pktgen::{self, FrameSpec, Proto};

use crate::args::{Args, Mode};
use crate::pingpong::{partial_tcp_csum, ping, send, swap_ip_and_ports, Ping, MAX_SAMPLES, PING_PORT};
use crate::report::{cpu_time, fmt_rate, Rtt, Summary};

pub(crate) fn bench(args: &Args, ifname: &str) -> Result<()> {
    // The reflected frame must be steered back, and only TCP is.
    let tcp = args.proto == "tcp" || matches!(args.mode, Mode::Pingpong | Mode::Pong);
    let proto = if tcp { Proto::Tcp } else { Proto::Udp };
    if args.size < pktgen::min_size(proto) || args.size > args.frame_size as usize - 256 {
        bail!("--size {} out of range ({}..={})", args.size, pktgen::min_size(proto), args.frame_size - 256);
    }
    let mut cfg = PortConfig::new(ifname);
    cfg.queue = args.queue;
    cfg.attach = args.attach;
    cfg.tx_budget = args.tx_budget;
    cfg.xmit_batch = args.xmit_batch;
    cfg.rings = RingSizes { fill: args.ring_size, comp: args.ring_size, rx: args.ring_size, tx: args.ring_size };
    cfg.umem = UmemConfig::default()
        .with_frame_count(args.frames.unwrap_or(args.ring_size * 2))
        .with_frame_size(args.frame_size);
    cfg.busy_poll = args.busy_poll.map(|usecs| BusyPoll { usecs, budget: args.busy_budget });
    cfg.tune = !args.no_tune;
    match args.mode {
        Mode::Txonly => {}
        // The reflected frame comes back to our source port.
        Mode::Pingpong => {
            cfg.steer = Some(SteerSpec::new(args.src_ip).with_tcp_ports(vec![PING_PORT]))
        }
        _ => cfg.steer = Some(SteerSpec::new(args.src_ip).with_tcp_ports(vec![args.port])),
    }
    let (_iface, mut port) = Iface::open(&cfg).with_context(|| format!("opening {ifname} queue {}", args.queue))?;
    port.log_features();

    let my_mac = iface_mac(ifname).unwrap_or([2, 0, 0, 0, 0, 1]);
    let dst_mac = match &args.dst_mac {
        Some(m) => pktgen::parse_mac(m).map_err(anyhow::Error::msg)?,
        None => [0x02, 0xde, 0xad, 0xbe, 0xef, 0x01],
    };
    let spec = FrameSpec {
        src_mac: my_mac,
        dst_mac,
        src_ip: args.src_ip,
        dst_ip: args.dst_ip,
        src_port: PING_PORT,
        dst_port: args.port,
        proto,
        size: args.size,
    };
    if args.mode == Mode::Txonly {
        prewrite(&mut port, &spec);
    }

    let batch = args.batch.max(1) as usize;
    let mut rx: Vec<Frame> = Vec::with_capacity(batch);
    let start = Instant::now();
    let cpu0 = cpu_time();
    let end = start + args.duration;
    let mut next_tick = start + Duration::from_secs(1);
    let mut last = 0u64;
    let mut samples = Vec::new();
    let mut poll_fds = [libc::pollfd { fd: std::os::fd::AsRawFd::as_raw_fd(&std::os::fd::AsFd::as_fd(&port)), events: libc::POLLIN, revents: 0 }];
    let count = |p: &Port| {
        let s = p.stats().port;
        match args.mode {
            Mode::Txonly => s.completions,
            Mode::Rxdrop | Mode::L2fwd | Mode::Pingpong | Mode::Pong => s.rx_frames,
        }
    };
    let mut rtts: Vec<u32> = Vec::new();
    let mut lost = 0u64;
    let mut seq = 0u64;
    while !signals::interrupted() {
        match args.mode {
            Mode::Txonly => {
                let room = port.tx_space(batch as u32).min(batch as u32);
                for _ in 0..room {
                    let Some(mut f) = port.alloc() else { break };
                    f.set_len(args.size);
                    if let Err(f) = port.send(f) {
                        port.release(f);
                        break;
                    }
                }
                port.flush()?;
            }
            Mode::Pingpong => {
                seq += 1;
                match ping(&mut port, &spec, &mut rx, args.tx_csum, seq)? {
                    Ping::Back(rtt) if rtts.len() < MAX_SAMPLES => {
                        rtts.push(rtt.as_nanos().min(u128::from(u32::MAX)) as u32)
                    }
                    Ping::Back(_) | Ping::NotSent => {}
                    Ping::Lost => lost += 1,
                }
            }
            Mode::Rxdrop | Mode::L2fwd | Mode::Pong => {
                let n = port.recv(&mut rx, batch);
                if n == 0 {
                    port.flush()?;
                    if args.busy_poll.is_none() {
                        // Wait for RX with a short timeout so the loop notices the clock.
                        // SAFETY: one valid pollfd for the call's duration.
                        unsafe { libc::poll(poll_fds.as_mut_ptr(), 1, 10) };
                    }
                }
                for mut f in rx.drain(..) {
                    if args.mode == Mode::Rxdrop {
                        port.release(f);
                        continue;
                    }
                    let d = port.umem().data_mut(&mut f);
                    if d.len() >= 12 {
                        let (dst, src) = d.split_at_mut(6);
                        dst.swap_with_slice(&mut src[..6]);
                    }
                    if args.mode == Mode::Pong {
                        swap_ip_and_ports(d);
                        if args.tx_csum {
                            partial_tcp_csum(d);
                        }
                    }
                    if let Err(f) = send(&mut port, f, args.tx_csum && args.mode == Mode::Pong) {
                        port.release(f);
                    }
                }
                if args.mode != Mode::Rxdrop {
                    port.flush()?;
                }
            }
        }
        let now = Instant::now();
        if now >= next_tick {
            let c = count(&port);
            let rate = (c - last) as f64 / (now - (next_tick - Duration::from_secs(1))).as_secs_f64();
            last = c;
            samples.push(rate);
            if !args.quiet {
                let s = port.stats();
                println!(
                    "{:>4}s {:>8} {:>16}  kicks {:>9} retries {:>7} xdp rx_dropped {} rx_ring_full {} fill_empty {}",
                    samples.len(),
                    format!("{:?}", args.mode).to_lowercase(),
                    fmt_rate(rate),
                    s.port.kicks,
                    s.port.kick_retries,
                    s.xdp.rx_dropped,
                    s.xdp.rx_ring_full,
                    s.xdp.rx_fill_ring_empty_descs
                );
            }
            next_tick += Duration::from_secs(1);
            if now >= end {
                break;
            }
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = (cpu_time() - cpu0).as_secs_f64();
    let total = count(&port);
    let _ = port.drain_tx(Duration::from_secs(1));
    let audit = match port.audit() {
        Ok(a) => format!("ok {a:?}"),
        Err(e) => format!("FAILED: {e}"),
    };
    let mut sorted: Vec<f64> = samples.iter().skip(1).copied().collect();
    if sorted.is_empty() {
        sorted = samples.clone();
    }
    sorted.sort_by(|a, b| a.total_cmp(b));
    let median = if sorted.is_empty() { total as f64 / elapsed } else { sorted[sorted.len() / 2] };
    let summary = Summary {
        mode: args.mode,
        size: args.size,
        attach: port.features().attach.map_or("none".into(), |m| m.to_string()),
        batch: args.batch,
        pps: median,
        pps_mean: total as f64 / elapsed,
        peer_pps: None,
        samples,
        cpu_ns_per_pkt: if total > 0 { cpu * 1e9 / total as f64 } else { 0.0 },
        features: port.features().clone(),
        stats: port.stats(),
        audit,
        rtt: Rtt::from_samples(rtts, lost),
    };
    println!("---- {:?} {} bytes on {} ({})", args.mode, args.size, ifname, port.features());
    if let Some(r) = &summary.rtt {
        let us = |ns: u64| ns as f64 / 1000.0;
        println!(
            "{:>28}: p50 {:.2} us  p90 {:.2}  p99 {:.2}  p99.9 {:.2}  mean {:.2}  ({} round trips, {} lost)",
            "round trip",
            us(r.p50_ns),
            us(r.p90_ns),
            us(r.p99_ns),
            us(r.p999_ns),
            r.mean_ns / 1000.0,
            r.count,
            r.lost
        );
    }
    println!("{:>28}: {}", "median rate", fmt_rate(summary.pps));
    println!("{:>28}: {}", "mean rate", fmt_rate(summary.pps_mean));
    println!("{:>28}: {:.1} ns", "CPU per packet (process)", summary.cpu_ns_per_pkt);
    println!("{:>28}: {} / {}", "kicks / retries", summary.stats.port.kicks, summary.stats.port.kick_retries);
    if args.mode == Mode::Txonly && port.features().driver == "veth" {
        println!("{:>28}: on veth the peer's receive work runs inside our sendto (about half the core)", "note");
    }
    println!("{:>28}: {}", "frame accounting", summary.audit);
    if let Some(p) = &args.json {
        std::fs::write(p, serde_json::to_vec_pretty(&summary)?)?;
    }
    if summary.audit.starts_with("FAILED") {
        bail!("frame accounting failed: {}", summary.audit);
    }
    if args.mode == Mode::Pingpong {
        match &summary.rtt {
            None => bail!("pingpong: no frame came back (is `pong` running on the peer end?)"),
            Some(r) if r.lost * 100 > r.count => bail!("pingpong: {} of {} frames did not come back", r.lost, r.count + r.lost),
            Some(_) => {}
        }
    }
    Ok(())
}

/// Writes the frame template once into every frame: frames are reused
/// unchanged after completion, so the send loop touches no packet bytes.
fn prewrite(port: &mut Port, spec: &FrameSpec) {
    let mut held = Vec::with_capacity(port.umem().frame_count() as usize);
    while let Some(mut f) = port.alloc() {
        pktgen::build(spec, port.umem().buf_mut(&mut f));
        held.push(f);
    }
    for f in held {
        port.release(f);
    }
}

fn iface_mac(ifname: &str) -> Option<[u8; 6]> {
    let s = std::fs::read_to_string(format!("/sys/class/net/{ifname}/address")).ok()?;
    pktgen::parse_mac(s.trim()).ok()
}
