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

use stack::codec::Stream;
use stack::kernel::{KernelConfig, KernelTransport};
use stack::rr::{Echo, Server, ServerConfig};
use stack::transport::Transport;
use stack::xsk::{AddrMode, XskConfig, XskTransport};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: echo_server kernel [PORT] | echo_server xsk IFACE ADDR/LEN [PORT]";
    xsk_io::lab::install_signal_handlers();
    match args.first().map(String::as_str) {
        Some("kernel") => {
            let port = args.get(1).map_or(Ok(7007), |p| p.parse())?;
            let t = KernelTransport::new(KernelConfig { bind: Ipv4Addr::UNSPECIFIED, ..KernelConfig::default() })?;
            serve(t, port)
        }
        Some("xsk") if args.len() >= 3 => {
            let (addr, len) = args[2].split_once('/').ok_or(usage)?;
            let mode = AddrMode::Dedicated { addr: addr.parse()?, prefix_len: len.parse()? };
            let port = args.get(3).map_or(Ok(7007), |p| p.parse())?;
            serve(XskTransport::new(XskConfig::new(&args[1], mode))?, port)
        }
        _ => Err(usage.into()),
    }
}

/// The part that does not care about the backend.
fn serve<T: Transport>(t: T, port: u16) -> Result<(), Box<dyn std::error::Error>> {
    let mut server = Server::new(t, Stream, Echo, ServerConfig { port, ..ServerConfig::default() })?;
    println!("echo on {} ({}), Ctrl-C stops", server.local_addr().ok_or("no address")?, server.transport().name());
    server.run_until(xsk_io::lab::interrupted)?;
    println!("served {:?}", server.stats());
    Ok(())
}
