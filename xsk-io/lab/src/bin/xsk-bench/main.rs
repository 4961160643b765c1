//! xsk-bench: packet rates of the copy-mode AF_XDP port, our equivalent of
//! the kernel threads' `xdpsock` runs (see shared/seeds).
//!
//! Without `--iface`, it builds its own lab (two network namespaces joined
//! by veth, addresses in 198.18.0.0/15), runs itself inside it, and removes
//! it on exit, Ctrl-C included.

#![warn(clippy::undocumented_unsafe_blocks)]

use anyhow::Result;
use clap::Parser;

use xsk_lab::signals;

mod args;
mod bench;
mod in_lab;
mod pingpong;
mod report;
mod restore;
#[cfg(test)]
mod tests;

use args::Args;
use bench::bench;
use in_lab::in_lab;
use restore::{restore, RestoreArgs};

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    // `xsk-bench restore IF` is its own small command line (the benchmark's has a positional mode).
    if std::env::args().nth(1).as_deref() == Some("restore") {
        if let Err(e) = restore(RestoreArgs::parse_from(std::iter::once("xsk-bench restore".to_string()).chain(std::env::args().skip(2)))) {
            eprintln!("xsk-bench restore: error: {e:#}");
            std::process::exit(1);
        }
        return;
    }
    if let Err(e) = run(Args::parse()) {
        eprintln!("xsk-bench: error: {e:#}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<()> {
    signals::install_signal_handlers();
    match args.iface.clone() {
        Some(ifname) => bench(&args, &ifname),
        None => in_lab(&args),
    }
}
