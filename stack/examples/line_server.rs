//! A custom line protocol with per-connection state, on the kernel backend (swap in
//! `XskTransport` as in `echo_server.rs` for AF_XDP). One command per `\n`-terminated line:
//!
//! ```text
//! UPPER some text   -> SOME TEXT
//! ADD 2 40          -> 42
//! COUNT             -> requests so far on this connection
//! QUIT              -> BYE, then the server closes the connection
//! ```
//!
//! Run: `cargo run --release -p stack --example line_server -- 7008`, then `nc 127.0.0.1 7008`.
//! `stack/tests/examples.rs` runs this file's `run` end to end.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::BytesMut;
use stack::codec::Lines;
use stack::kernel::{KernelConfig, KernelTransport};
use stack::rr::{Handler, Reply, Server, ServerConfig};
use stack::transport::ConnId;

/// Longest accepted line: longer ones are a protocol error and close the connection.
pub const MAX_LINE: usize = 4096;

/// Per-connection state lives in the handler, in a table indexed by the connection's slot
/// (dense, reused after close): no map lookup and no allocation per request.
#[derive(Default)]
pub struct LineProto {
    conns: Vec<Option<(ConnId, u64)>>,
}

impl LineProto {
    fn state(&mut self, conn: ConnId) -> &mut u64 {
        let slot = conn.slot();
        if self.conns.len() <= slot {
            self.conns.resize(slot + 1, None);
        }
        // The full id guards against a slot reused by a newer connection.
        let entry = self.conns[slot].get_or_insert((conn, 0));
        if entry.0 != conn {
            *entry = (conn, 0);
        }
        &mut entry.1
    }
}

impl Handler for LineProto {
    fn handle(&mut self, conn: ConnId, req: &[u8], resp: &mut BytesMut) -> Reply {
        *self.state(conn) += 1;
        let line = String::from_utf8_lossy(req);
        let (cmd, rest) = line.split_once(' ').unwrap_or((&line, ""));
        match cmd.to_ascii_uppercase().as_str() {
            "UPPER" => resp.extend_from_slice(rest.to_uppercase().as_bytes()),
            "ADD" => {
                let sum =
                    rest.split_whitespace().map(str::parse::<i64>).try_fold(0i64, |acc, n| acc.checked_add(n.ok()?));
                match sum {
                    Some(s) => write!(resp.as_mut_writer(), "{s}").unwrap_or(()),
                    None => resp.extend_from_slice(b"ERR numbers please"),
                }
            }
            "COUNT" => write!(resp.as_mut_writer(), "{}", self.state(conn)).unwrap_or(()),
            "QUIT" => {
                resp.extend_from_slice(b"BYE");
                return Reply::Close;
            }
            _ => resp.extend_from_slice(b"ERR unknown command"),
        }
        Reply::Done
    }

    fn on_open(&mut self, conn: ConnId) {
        *self.state(conn) = 0;
    }

    fn on_close(&mut self, conn: ConnId) {
        if let Some(e) = self.conns.get_mut(conn.slot()) {
            *e = None;
        }
    }
}

/// Serves on 127.0.0.1:`port` (0 = any free port) until `stop` is set; `ready` gets the port.
pub fn run(port: u16, stop: &AtomicBool, ready: impl FnOnce(u16)) -> Result<(), Box<dyn std::error::Error>> {
    let t = KernelTransport::new(KernelConfig::default())?;
    let mut server =
        Server::new(t, Lines::new(MAX_LINE), LineProto::default(), ServerConfig { port, ..ServerConfig::default() })?;
    ready(server.local_addr().ok_or("no address")?.port());
    server.run_until(|| stop.load(Ordering::Relaxed))?;
    Ok(())
}

/// `BytesMut` as `io::Write`, for `write!` without a temporary `String`.
trait AsWriter {
    fn as_mut_writer(&mut self) -> bytes::buf::Writer<&mut BytesMut>;
}

impl AsWriter for BytesMut {
    fn as_mut_writer(&mut self) -> bytes::buf::Writer<&mut BytesMut> {
        bytes::BufMut::writer(self)
    }
}

#[allow(dead_code)]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let port = std::env::args().nth(1).map_or(Ok(7008), |p| p.parse())?;
    xsk_io::lab::install_signal_handlers();
    static STOP: AtomicBool = AtomicBool::new(false);
    std::thread::spawn(|| {
        while !xsk_io::lab::interrupted() {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        STOP.store(true, Ordering::Relaxed);
    });
    run(port, &STOP, |p| println!("line protocol on 127.0.0.1:{p}; try: nc 127.0.0.1 {p}"))
}
