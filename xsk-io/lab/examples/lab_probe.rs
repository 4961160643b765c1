//! Create a lab, print it, wait for Ctrl-C/SIGTERM or 2 seconds, clean up.
//!
//! ```text
//! sudo cargo run -p xsk-lab --example lab_probe           # 2 s
//! sudo timeout -s INT 1 target/debug/examples/lab_probe   # interrupted
//! sudo target/debug/examples/lab_probe --stubborn         # ignores the first signal
//!                                                          # (tests the second-signal path)
//! ```

use std::time::{Duration, Instant};

use xsk_lab::signals;
use xsk_lab::lab::{self, Lab, LabConfig};

fn main() {
    let stubborn = std::env::args().any(|a| a == "--stubborn");
    signals::install_signal_handlers();
    let swept = lab::sweep_stale("lp");
    if swept > 0 {
        println!("swept {swept} stale namespace(s)");
    }

    let lab = match Lab::new(&LabConfig::new("lp")) {
        Ok(lab) => lab,
        Err(e) => {
            eprintln!("lab_probe: {e}");
            std::process::exit(1);
        }
    };
    println!("lab up: {lab}");
    println!("  ns_a={} if_a={} addr_a={}/{}", lab.ns_a.name, lab.if_a, lab.addr_a, lab.prefix_len);
    println!("  ns_b={} if_b={} addr_b={}/{}", lab.ns_b.name, lab.if_b, lab.addr_b, lab.prefix_len);

    let wait = if stubborn { Duration::from_secs(30) } else { Duration::from_secs(2) };
    let start = Instant::now();
    while start.elapsed() < wait && (stubborn || !signals::interrupted()) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let why = if signals::interrupted() { "interrupted" } else { "timeout" };
    drop(lab);
    println!("lab_probe: {why}, cleaned up");
}
