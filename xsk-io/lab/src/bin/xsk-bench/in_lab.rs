//! Without `--iface`: a lab of its own, this binary run inside it (with a
//! generator or the reflector on the peer end), and the peer's rate added to
//! the summary.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};

use xsk_io::port::Setting;
use xsk_lab::lab::{self, Lab, LabConfig};
use xsk_lab::pktgen;

use crate::args::{Args, Mode};
use crate::report::fmt_rate;

/// Builds the lab, runs this binary inside it (and a generator for the RX
/// modes), then tears everything down.
pub(crate) fn in_lab(args: &Args) -> Result<()> {
    lab::sweep_stale("xb");
    let lab = Lab::new(&LabConfig { prefix: "xb".into(), ..LabConfig::default() }).context("building the veth lab")?;
    eprintln!(
        "lab: {} {} ({}) <-> {} {} ({})",
        lab.ns_a.name, lab.if_a, lab.addr_a, lab.ns_b.name, lab.if_b, lab.addr_b
    );
    let exe = std::env::current_exe()?;
    let mut gen: Option<Child> = None;
    let mut gen_json = None;
    if args.mode == Mode::Pingpong {
        // The reflector on the peer end, polled the same way as this side.
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &lab.ns_b.name]).arg(&exe).args(["pong", "--iface", &lab.if_b, "--quiet"]);
        c.args(["--attach", &args.attach.to_string(), "--ring-size", &args.ring_size.to_string()]);
        c.args(["--src-ip", &lab.addr_b.to_string(), "--dst-ip", &lab.addr_a.to_string(), "--port", &args.port.to_string()]);
        if args.tx_csum {
            c.arg("--tx-csum");
        }
        if let Some(b) = args.busy_poll {
            c.args(["--busy-poll", &b.to_string(), "--busy-budget", &args.busy_budget.to_string()]);
        }
        c.args(["--duration", &format!("{}ms", (args.duration + Duration::from_secs(3)).as_millis())]);
        gen = Some(c.stdout(Stdio::null()).spawn().context("starting the reflector")?);
        std::thread::sleep(Duration::from_millis(700));
    } else if args.mode != Mode::Txonly {
        // The generator: a txonly port on the peer end sending TCP to our steered port.
        let j = std::env::temp_dir().join(format!("xsk-bench-gen-{}.json", std::process::id()));
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &lab.ns_b.name]).arg(&exe).args([
            "txonly",
            "--iface",
            &lab.if_b,
            "--proto",
            "tcp",
            "--quiet",
        ]);
        c.args(["--size", &args.size.to_string(), "--batch", &args.batch.to_string()]);
        c.args(["--dst-mac", &pktgen::format_mac(&lab.mac_a)]);
        c.args(["--src-ip", &lab.addr_b.to_string(), "--dst-ip", &lab.addr_a.to_string()]);
        c.args(["--port", &args.port.to_string(), "--duration", &format!("{}ms", (args.duration + Duration::from_secs(2)).as_millis())]);
        c.arg("--json").arg(&j);
        gen = Some(c.stdout(Stdio::null()).spawn().context("starting the generator")?);
        gen_json = Some(j);
        std::thread::sleep(Duration::from_millis(700));
    }
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &lab.ns_a.name]).arg(&exe);
    c.arg(match args.mode {
        Mode::Txonly => "txonly",
        Mode::Rxdrop => "rxdrop",
        Mode::L2fwd => "l2fwd",
        Mode::Pingpong => "pingpong",
        Mode::Pong => "pong",
    });
    if args.mode == Mode::Pingpong && args.dst_mac.is_none() {
        c.args(["--dst-mac", &pktgen::format_mac(&lab.mac_b)]);
    }
    c.args(["--iface", &lab.if_a, "--queue", &args.queue.to_string()]);
    c.args(["--size", &args.size.to_string(), "--batch", &args.batch.to_string()]);
    c.args(["--attach", &args.attach.to_string()]);
    c.args(["--tx-budget", &setting_arg(args.tx_budget), "--xmit-batch", &setting_arg(args.xmit_batch)]);
    c.args(["--ring-size", &args.ring_size.to_string(), "--frame-size", &args.frame_size.to_string()]);
    if let Some(f) = args.frames {
        c.args(["--frames", &f.to_string()]);
    }
    if let Some(b) = args.busy_poll {
        c.args(["--busy-poll", &b.to_string(), "--busy-budget", &args.busy_budget.to_string()]);
    }
    c.args(["--duration", &format!("{}ms", args.duration.as_millis()), "--port", &args.port.to_string()]);
    c.args(["--src-ip", &lab.addr_a.to_string(), "--dst-ip", &lab.addr_b.to_string()]);
    if let Some(m) = &args.dst_mac {
        c.args(["--dst-mac", m]);
    }
    if args.quiet {
        c.arg("--quiet");
    }
    if args.no_tune {
        c.arg("--no-tune");
    }
    if args.tx_csum {
        c.arg("--tx-csum");
    }
    let j = std::env::temp_dir().join(format!("xsk-bench-{}.json", std::process::id()));
    c.arg("--json").arg(&j);
    let rx_before = read_counter(&lab, "rx_packets");
    let status = c.status().context("running the benchmark in the lab")?;
    let rx_after = read_counter(&lab, "rx_packets");
    if let Some(mut g) = gen {
        // SIGINT, not SIGKILL: the generator writes its summary and detaches cleanly.
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(g.id() as i32, libc::SIGINT) };
        let _ = g.wait();
    }
    if !status.success() {
        bail!("benchmark inside the lab failed ({status})");
    }
    let mut summary: serde_json::Value = serde_json::from_slice(&std::fs::read(&j)?)?;
    let _ = std::fs::remove_file(&j);
    let peer = match (&gen_json, args.mode) {
        (Some(gj), _) => {
            let v: Option<serde_json::Value> = std::fs::read(gj).ok().and_then(|b| serde_json::from_slice(&b).ok());
            let _ = std::fs::remove_file(gj);
            v.and_then(|v| v["pps"].as_f64())
        }
        (None, Mode::Txonly) => match (rx_before, rx_after) {
            (Some(a), Some(b)) => Some((b - a) as f64 / args.duration.as_secs_f64()),
            _ => None,
        },
        _ => None,
    };
    summary["peer_pps"] = serde_json::json!(peer);
    if let Some(p) = peer {
        let what = if args.mode == Mode::Txonly { "peer kernel received (mean)" } else { "generator sent (median)" };
        println!("{what:>28}: {}", fmt_rate(p));
    }
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_vec_pretty(&summary)?)?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn read_counter(lab: &Lab, name: &str) -> Option<u64> {
    lab.ns_b
        .run(&["cat", &format!("/sys/class/net/{}/statistics/{name}", lab.if_b)])
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

fn setting_arg(k: Setting) -> String {
    match k {
        Setting::Off => "off".into(),
        Setting::Auto => "auto".into(),
        Setting::Value(v) => v.to_string(),
    }
}
