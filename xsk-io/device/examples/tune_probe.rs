//! Probe and tune an interface for a copy-mode AF_XDP socket, then restore.
//!
//! ```text
//! ip netns exec tune-a target/debug/examples/tune_probe tv0 [skb|drv|auto] [single|all] [frame_size]
//! ```
//!
//! Prints the driver, the rx queue count and the `tune::prepare` report in
//! check-only and apply mode, then restores and checks with `ethtool -k` that
//! GRO (and, for a veth peer in this namespace, its TSO) is back to the
//! original state. Exits 1 if not. Run it in a namespace you created: it
//! changes device settings (and puts them back).

use std::process::{exit, Command};

use xsk_device::tune::{self, QueueLayout, TuneOptions};
use xsk_io::AttachMode;

/// `ethtool -k IF`, the line for `key` (e.g. `generic-receive-offload`), as on/off.
fn ethtool_k(ifname: &str, key: &str) -> Option<String> {
    let out = Command::new("ethtool").args(["-k", ifname]).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .map(|v| v.split_whitespace().next().unwrap_or("").to_string())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let ifname = args.get(1).cloned().unwrap_or_else(|| "tv0".into());
    let mode: AttachMode = args
        .get(2)
        .map(|s| s.parse().unwrap_or_else(|e| panic!("{e}")))
        .unwrap_or(AttachMode::Skb);
    let queues: QueueLayout = args
        .get(3)
        .map(|s| s.parse().unwrap_or_else(|e| panic!("{e}")))
        .unwrap_or(QueueLayout::Single);
    let frame_size: u32 = args
        .get(4)
        .map(|s| s.parse().expect("frame size"))
        .unwrap_or(4096);

    let driver = tune::driver_name(&ifname).unwrap_or_else(|e| {
        eprintln!("driver_name: {e}");
        exit(2)
    });
    let rxq = tune::rx_queue_count(&ifname).unwrap_or_else(|e| {
        eprintln!("rx_queue_count: {e}");
        exit(2)
    });
    println!("driver_name({ifname}) = {driver}");
    println!("rx_queue_count({ifname}) = {rxq}");

    // The devices whose state the tuning may touch: ours and a veth peer here.
    let snap = tune::snapshot(&ifname).unwrap_or_else(|e| {
        eprintln!("snapshot: {e}");
        exit(2)
    });
    let peer = match &snap.peer {
        tune::snapshot::Peer::Here(p) => Some(p.ifname.clone()),
        _ => None,
    };
    let gro_before = ethtool_k(&ifname, "generic-receive-offload");
    let tso_before = peer
        .as_ref()
        .and_then(|p| ethtool_k(p, "tcp-segmentation-offload"));
    println!("before: {ifname} gro {gro_before:?}; peer {peer:?} tso {tso_before:?}");

    let mut opts = TuneOptions::default().with_mode(mode).with_queues(queues).with_frame_size(frame_size);
    for apply in [false, true] {
        opts.apply = apply;
        println!("\n== prepare({ifname}, mode {mode}, queues {queues}, frame {frame_size}, apply {apply}) ==");
        match tune::prepare(&ifname, &opts) {
            Ok(mut t) => {
                print!("{}", t.summary());
                if apply {
                    println!(
                        "during: {ifname} gro {:?}; peer tso {:?}",
                        ethtool_k(&ifname, "generic-receive-offload"),
                        peer.as_ref()
                            .and_then(|p| ethtool_k(p, "tcp-segmentation-offload"))
                    );
                    println!("== restore() ==");
                    for s in t.restore() {
                        println!("  {s}");
                    }
                }
            }
            Err(e) => {
                println!("prepare failed: {e}");
                for s in e.report() {
                    println!("  {s}");
                }
            }
        }
    }

    // Dropping a Tuning restores too.
    opts.apply = true;
    if let Ok(t) = tune::prepare(&ifname, &opts) {
        println!(
            "\n== drop without restore() ({} change(s) pending); during: {ifname} gro {:?} ==",
            t.pending_restore(),
            ethtool_k(&ifname, "generic-receive-offload")
        );
        drop(t);
    }

    let gro_after = ethtool_k(&ifname, "generic-receive-offload");
    let tso_after = peer
        .as_ref()
        .and_then(|p| ethtool_k(p, "tcp-segmentation-offload"));
    println!("\nafter: {ifname} gro {gro_after:?}; peer {peer:?} tso {tso_after:?}");
    if gro_after != gro_before || tso_after != tso_before {
        println!("RESTORE MISMATCH");
        exit(1);
    }
    println!("restore ok: state as before");
}
