//! Runs the examples' own code end to end on loopback (kernel backend, no root): the line
//! protocol server from `examples/line_server.rs` in a thread, driven by the load client from
//! rr-load's `examples/client.rs` (apps/loadgen) and by a plain `TcpStream` for the
//! per-connection state and QUIT.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddrV4, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

#[path = "../examples/line_server.rs"]
#[allow(dead_code)]
mod line_server;

#[path = "../../apps/loadgen/examples/client.rs"]
#[allow(dead_code)]
mod client;

#[test]
fn line_server_with_example_client_and_tcpstream() {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let stop2 = stop.clone();
    let server =
        std::thread::spawn(move || line_server::run(0, &stop2, |p| tx.send(p).unwrap()).map_err(|e| e.to_string()));
    let port = rx.recv_timeout(Duration::from_secs(10)).expect("server ready");
    let addr = SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, port);

    let report = client::load(addr, Duration::from_secs(5), 20_000).expect("client run");
    assert_eq!((report.requests, report.errors, report.lost), (20_000, 0, 0), "{report}");

    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut w = s;
    w.write_all(b"UPPER hello there\nADD 2 40\nADD x\nNOPE\nCOUNT\nQUIT\nUPPER never\n").unwrap();
    let mut lines = Vec::new();
    let mut line = String::new();
    while r.read_line(&mut line).unwrap() > 0 {
        lines.push(line.trim_end().to_string());
        line.clear();
    }
    // QUIT answered, then closed: the line after it is never served.
    assert_eq!(lines, ["HELLO THERE", "42", "ERR numbers please", "ERR unknown command", "5", "BYE"]);

    stop.store(true, Ordering::Relaxed);
    server.join().unwrap().expect("server ran cleanly");
}
