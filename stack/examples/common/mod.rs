//! What the tokio examples share: the backend from the command line, as `echo_server` takes
//! it (`NAME kernel PORT` or `NAME xsk IFACE ADDR/LEN[,ADDR6/LEN] PORT`, or `shared` for the
//! interface's own addresses), and the stop signals.

#[cfg(feature = "tonic")]
pub mod hello_world;

use std::net::Ipv4Addr;

use stack::kernel::{KernelConfig, KernelTransport};
use stack::tokio::Net;
use stack::xsk::{Addr6Mode, AddrMode, XskConfig, XskTransport};

/// The transport the arguments name, run by a driver task on the current runtime, and the
/// port to serve on.
pub fn net_from_args(name: &str, default_port: u16) -> Result<(Net, u16), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = format!(
        "usage: {name} kernel [PORT] | {name} uring [PORT] | {name} xsk IFACE shared|ADDR/LEN[,ADDR6/LEN] [PORT] (or tokio [PORT]: tokio's own listener)"
    );
    match args.first().map(String::as_str) {
        Some("kernel") if args.len() <= 2 => {
            let port = args.get(1).map_or(Ok(default_port), |p| p.parse())?;
            let t = KernelTransport::new(KernelConfig::default().with_bind(Ipv4Addr::UNSPECIFIED))?;
            Ok((Net::spawn(t)?, port))
        }
        // Kernel TCP through io_uring (feature `uring`).
        #[cfg(feature = "uring")]
        Some("uring") if args.len() <= 2 => {
            use stack::uring::{UringConfig, UringTransport};
            let port = args.get(1).map_or(Ok(default_port), |p| p.parse())?;
            let t = UringTransport::new(UringConfig::default().with_bind(Ipv4Addr::UNSPECIFIED))?;
            Ok((Net::spawn(t)?, port))
        }
        // ADDR/LEN, or ADDR/LEN,ADDR6/LEN for IPv6 too (one listener serves both), or
        // `shared`: the interface's own addresses.
        Some("xsk") if (3..=4).contains(&args.len()) => {
            let (v4, v6) = args[2].split_once(',').map_or((args[2].as_str(), None), |(a, b)| (a, Some(b)));
            let mode = if v4 == "shared" {
                AddrMode::Shared
            } else {
                let (addr, len) = v4.split_once('/').ok_or(usage.clone())?;
                AddrMode::Dedicated { addr: addr.parse()?, prefix_len: len.parse()? }
            };
            let mut cfg = XskConfig::new(&args[1], mode);
            if let Some(v6) = v6 {
                let (addr, len) = v6.split_once('/').ok_or(usage)?;
                cfg.addr6 = Addr6Mode::Dedicated { addr: addr.parse()?, prefix_len: len.parse()? };
            }
            let port = args.get(3).map_or(Ok(default_port), |p| p.parse())?;
            Ok((Net::spawn(XskTransport::new(cfg)?)?, port))
        }
        _ => Err(usage.into()),
    }
}

/// `NAME tokio [PORT]`: the port to serve on with tokio's own listener, for comparison.
#[allow(dead_code)]
pub fn tokio_port() -> Option<u16> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("tokio") => args.get(1).map_or(Some(8080), |p| p.parse().ok()),
        _ => None,
    }
}

/// Resolves on SIGINT or SIGTERM: the server then stops accepting, finishes the requests in
/// flight, and the xsk backend puts the interface back as it was.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("a SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("a SIGINT handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
