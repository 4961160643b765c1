//! A load-generating client for the line protocol of `stack/examples/line_server.rs`: `Client`
//! with a `FnWorkload` that sends `ADD i seq` and checks each reply, then prints the report.
//! `stack/tests/examples.rs` runs the two end to end.
//!
//! ```text
//! cargo run --release -p stack --example line_server -- 7008 &
//! cargo run --release -p rr-load --example client -- 127.0.0.1:7008
//! ```

use std::io::Write as _;
use std::net::SocketAddrV4;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use rr_load::{Client, ClientConfig, ClientReport, FnWorkload, LoadMode};
use stack::codec::Lines;
use stack::kernel::{KernelConfig, KernelTransport};

/// 4 connections, 8 requests in flight on each, for `duration` or `max` requests.
pub fn load(addr: SocketAddrV4, duration: Duration, max: u64) -> Result<ClientReport, Box<dyn std::error::Error>> {
    let workload = FnWorkload::new(
        |conn, seq, out: &mut BytesMut| {
            let _ = write!(out.writer(), "ADD {conn} {seq}");
        },
        |_, req: &[u8], resp: &[u8]| {
            // The check recomputes the sum from the request it answers.
            let text = String::from_utf8_lossy(req);
            let sum: u64 = text.split_whitespace().skip(1).filter_map(|n| n.parse::<u64>().ok()).sum();
            resp == sum.to_string().as_bytes()
        },
    );
    let cfg = ClientConfig::new(addr)
        .with_connections(4)
        .with_mode(LoadMode::ClosedLoop { depth: 8 })
        .with_duration(duration)
        .with_max_requests(Some(max));
    let t = KernelTransport::new(KernelConfig::default())?;
    Ok(Client::new(t, Lines::new(4096), workload, cfg).run()?)
}

/// Errors are printed with Display: their text says what to do (Debug, what `main` returning
/// a `Result` prints, hides it in a struct dump).
#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    match try_main() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("client: error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[allow(dead_code)]
fn try_main() -> Result<(), Box<dyn std::error::Error>> {
    let addr: SocketAddrV4 = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:7008".into()).parse()?;
    let report = load(addr, Duration::from_secs(2), 1_000_000)?;
    println!("{report}");
    if report.errors > 0 {
        return Err(format!("{} wrong replies", report.errors).into());
    }
    Ok(())
}
