//! Feeds millions of hostile frames through the stack's engine and the
//! request/response server, in memory (no root, no network), and checks that
//! nothing panics, wedges or leaks.

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use stack::xsk::testing::fuzz::{run, FuzzConfig};

#[derive(Parser, Debug)]
#[command(
    name = "stack-fuzz",
    version,
    about = "Structure-aware fuzzing of the AF_XDP stack's engine and the echo server, in memory",
    long_about = "Plays hundreds of hostile TCP peers (handshakes, in/out-of-window and overlapping data, \
RST/ACK storms, zero windows, option soup, bad and partial checksums, fragments, truncated and random \
frames, ARP/ICMP junk, impossible sources, bit flips) against the engine and rr::Server with the echo \
handler, while an honest client keeps checking echoes. Fails (exit 1) on a panic, a wedged server or \
sockets left after every timeout. Deterministic for a given --seed. With --twin, a second server that \
gives every segment to smoltcp's general path gets the same frames: its answers and every socket's \
state must equal those of the server that takes the fast path (header prediction), or the run fails."
)]
struct Cli {
    /// Frames to send.
    #[arg(long, default_value_t = 10_000_000)]
    frames: u64,
    /// Seed of the generator (same seed, same run).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Hostile peers in play.
    #[arg(long, default_value_t = 256)]
    peers: usize,
    /// Connections the server accepts at most (small, so the limit is hit).
    #[arg(long, default_value_t = 160)]
    max_conns: usize,
    /// Socket buckets of the server (a power of two; 0: one per 8 connections, at least
    /// 16). Many (e.g. 1024) leave most connections alone in theirs, where an answer
    /// leaves when written without the bucket's egress.
    #[arg(long, default_value_t = 0)]
    buckets: usize,
    /// When the server answers SYNs with cookies: auto (when its half-open table is full, the
    /// default), always (every handshake through the cookie path), off.
    #[arg(long, value_name = "auto|always|off", default_value = "auto")]
    syn_cookies: apps::SynCookiesArg,
    /// Run a twin server without the fast path and compare answers and socket states after
    /// every batch (slower: every frame is handled twice and the states compared).
    #[arg(long)]
    twin: bool,
    /// The server and the honest client offer microsecond TCP timestamps, and the hostile
    /// peers send timestamp options (wild echoes among them).
    #[arg(long)]
    timestamps: bool,
    /// Every other hostile peer speaks IPv6 to the same listener, with what only IPv6 has:
    /// extension header chains, fragments, neighbour discovery and ICMPv6 junk.
    #[arg(long)]
    ipv6: bool,
    /// The server delays its ACKs up to this long (as the tokio adapter makes it), e.g. 2ms.
    #[arg(long, value_name = "DURATION", value_parser = apps::parse_duration)]
    ack_delay: Option<std::time::Duration>,
    /// Write the report as JSON here.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// No progress lines.
    #[arg(long)]
    quiet: bool,
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(0)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut cfg = FuzzConfig::default();
    (cfg.frames, cfg.seed, cfg.peers, cfg.max_conns) = (cli.frames, cli.seed, cli.peers, cli.max_conns);
    (cfg.syn_cookies, cfg.twin, cfg.timestamps, cfg.ipv6) = (cli.syn_cookies.into(), cli.twin, cli.timestamps, cli.ipv6);
    (cfg.ack_delay, cfg.buckets) = (cli.ack_delay, cli.buckets);
    let start = Instant::now();
    let quiet = cli.quiet;
    let r = run(&cfg, |r| {
        if !quiet && r.frames % (cfg.frames / 10).max(1) < (cfg.frames / 100).max(1) {
            eprintln!(
                "{:>11} frames  {:>6.1} s  accepted {:>8}  requests {:>8}  drops {:>9}  live sockets {:>5}  rss {} KiB",
                r.frames,
                start.elapsed().as_secs_f64(),
                r.accepted,
                r.requests,
                r.drops.total(),
                r.end_live_sockets,
                rss_kib()
            );
        }
    });
    let secs = start.elapsed().as_secs_f64();
    let (ok, rep, err) = match r {
        Ok(rep) => (true, rep, None),
        Err((e, rep)) => (false, rep, Some(e)),
    };
    println!("stack-fuzz: {} frames, seed {}, {:.1} s ({:.0} frames/s), peak RSS {} KiB", rep.frames, rep.seed, secs, rep.frames as f64 / secs, rss_kib());
    println!(
        "  server: accepted {}, requests {}, answers {} ({} TCP segments to IPv6 peers), honest echoes {}",
        rep.accepted, rep.requests, rep.answers, rep.answers6, rep.honest_echoes
    );
    let r = &rep.recovery;
    println!(
        "  recovery: {} fast retransmits (+{} holes), {} RTO retransmits ({} undone by F-RTO), {} tail probes",
        r.fast_retransmits, r.hole_retransmits, r.rto_retransmits, r.frto_undone, r.tail_probes
    );
    if cli.twin {
        println!(
            "  fast path: {} segments in, {} out ({} bucket egresses without a scan, {} answers and {} pure ACKs needing none); twin without it: the same answers after every batch, the same state in {} bucket looks",
            rep.fast_path, rep.fast_send, rep.fast_egress, rep.sent_now, rep.acks_quiet, rep.twin_checks
        );
    } else {
        println!(
            "  fast path: {} segments in, {} out ({} bucket egresses without a scan, {} answers and {} pure ACKs needing none; --twin compares it with smoltcp's general path)",
            rep.fast_path, rep.fast_send, rep.fast_egress, rep.sent_now, rep.acks_quiet
        );
    }
    println!("  SYN cookies: sent {}, connections made from one {}", rep.syn_cookies_sent, rep.syn_cookies_accepted);
    println!(
        "  peaks: live sockets {}, connections {}, half-open {}; closed by idle timeout {}, peer silent with data out {}, FIN timeout {}",
        rep.max_live_sockets, rep.max_connections, rep.max_half_open, rep.idle_closed, rep.timed_out, rep.fin_timeouts
    );
    println!("  drops by reason:");
    for (name, n) in rep.drops.iter() {
        println!("    {name:<14} {n:>10}");
    }
    println!(
        "  at the end: live sockets {} (listening {}), connections {}, half-open {}, server connections {}",
        rep.end_live_sockets, rep.end_listening, rep.end_connections, rep.end_half_open, rep.end_server_conns
    );
    if let Some(p) = &cli.json {
        let v = serde_json::json!({ "ok": ok, "error": err, "seconds": secs, "report": rep });
        if let Err(e) = std::fs::write(p, serde_json::to_string_pretty(&v).unwrap_or_default()) {
            eprintln!("stack-fuzz: writing {}: {e}", p.display());
        }
    }
    match err {
        None => {
            println!("stack-fuzz: ok");
            ExitCode::SUCCESS
        }
        Some(e) => {
            eprintln!("stack-fuzz: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}
