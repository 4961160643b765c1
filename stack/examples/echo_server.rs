//! An RFC 862 echo server on either backend, in a few dozen lines:
//!
//! ```text
//! cargo run --release -p stack --example echo_server -- kernel 7007
//! sudo target/release/examples/echo_server xsk eth1 198.18.0.100/24 7007   # AF_XDP (root)
//! nc 198.18.0.100 7007
//! ```
//!
//! The xsk backend attaches an XDP program to the interface for as long as the process runs
//! (detached when the transport drops, also on Ctrl-C) and answers ARP and ping for the
//! dedicated address; everything else keeps reaching the kernel.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use stack::codec::Stream;
use stack::kernel::{KernelConfig, KernelTransport};
use stack::rr::{Echo, Server, ServerConfig};
use stack::transport::Transport;
use stack::xsk::{AddrMode, XskConfig, XskTransport};

/// Errors are printed with Display: their text says what to do (Debug, what `main` returning
/// a `Result` prints, hides it in a struct dump).
fn main() -> std::process::ExitCode {
    match try_main() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("echo_server: error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn try_main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: echo_server kernel [PORT] | echo_server xsk IFACE ADDR/LEN [PORT]";
    // Ctrl-C and SIGTERM set the flag. The server then stops and the transport is dropped,
    // which detaches the XDP program (a signal that killed the process would leave the
    // interface's settings for the next start to put back).
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    match args.first().map(String::as_str) {
        Some("kernel") => {
            let port = args.get(1).map_or(Ok(7007), |p| p.parse())?;
            let t = KernelTransport::new(KernelConfig::default().with_bind(Ipv4Addr::UNSPECIFIED))?;
            serve(t, port, &stop)
        }
        Some("xsk") if args.len() >= 3 => {
            let (addr, len) = args[2].split_once('/').ok_or(usage)?;
            let mode = AddrMode::Dedicated { addr: addr.parse()?, prefix_len: len.parse()? };
            let port = args.get(3).map_or(Ok(7007), |p| p.parse())?;
            serve(XskTransport::new(XskConfig::new(&args[1], mode))?, port, &stop)
        }
        _ => Err(usage.into()),
    }
}

/// The part that does not care about the backend.
fn serve<T: Transport>(t: T, port: u16, stop: &AtomicBool) -> Result<(), Box<dyn std::error::Error>> {
    // No poll timeout: the loop sleeps until there is work, and the signals that set `stop`
    // (registered first, so the flag is set when the loop wakes) also wake it.
    let cfg = ServerConfig::default().with_port(port).with_poll_timeout(None);
    let mut server = Server::new(t, Stream, Echo, cfg)?;
    let waker = server.waker()?;
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        waker.wake_on_signal(sig)?;
    }
    println!("echo on {} ({}), Ctrl-C stops", server.local_addr().ok_or("no address")?, server.transport().name());
    server.run_until(|| stop.load(Ordering::Relaxed))?;
    // What the clients sent before the stop is echoed, then each connection gets a FIN.
    let done = server.shutdown(Duration::from_secs(5))?;
    println!("served {:?}; at the stop {done:?}", server.stats());
    Ok(())
}
