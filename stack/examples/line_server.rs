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
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use stack::bytes::{BufMut, BytesMut};
use stack::codec::Lines;
use stack::kernel::{KernelConfig, KernelTransport};
use stack::rr::{Handler, Reply, Server, ServerConfig};
use stack::transport::ConnId;

/// Longest accepted line: a longer one is answered `ERR line longer than 4096 bytes` and
/// closes the connection.
pub const MAX_LINE: usize = 4096;

/// The protocol. Its per-connection state (`Session`) is kept by the server, which makes
/// it in `on_open`, lends it to each `handle` and gives it back in `on_close`.
#[derive(Default)]
pub struct LineProto {
    /// Connections served so far (state of the whole server lives in the handler).
    pub served: u64,
}

/// One connection's state.
#[derive(Default)]
pub struct Session {
    requests: u64,
    peer: Option<SocketAddrV4>,
}

impl Handler for LineProto {
    type Conn = Session;

    fn handle(&mut self, _conn: ConnId, session: &mut Session, req: &[u8], resp: &mut BytesMut) -> Reply {
        session.requests += 1;
        let line = String::from_utf8_lossy(req);
        let (cmd, rest) = line.split_once(' ').unwrap_or((&line, ""));
        match cmd.to_ascii_uppercase().as_str() {
            "UPPER" => resp.extend_from_slice(rest.to_uppercase().as_bytes()),
            "ADD" => {
                let sum =
                    rest.split_whitespace().map(str::parse::<i64>).try_fold(0i64, |acc, n| acc.checked_add(n.ok()?));
                match sum {
                    Some(s) => write!(resp.writer(), "{s}").unwrap_or(()),
                    None => resp.extend_from_slice(b"ERR numbers please"),
                }
            }
            "COUNT" => write!(resp.writer(), "{}", session.requests).unwrap_or(()),
            "QUIT" => {
                resp.extend_from_slice(b"BYE");
                return Reply::Close;
            }
            _ => resp.extend_from_slice(b"ERR unknown command"),
        }
        // `Lines` ends each response with the `\n`.
        Reply::Done
    }

    fn on_open(&mut self, _conn: ConnId, peer: Option<SocketAddrV4>) -> Session {
        Session { requests: 0, peer }
    }

    fn on_close(&mut self, conn: ConnId, session: Session) {
        self.served += 1;
        if let Some(peer) = session.peer {
            eprintln!("{conn} from {peer}: {} requests", session.requests);
        }
    }
}

/// Serves on 127.0.0.1:`port` (0 = any free port) until `stop` is set; `ready` gets the port.
/// Then stops gracefully: the requests already received are answered, and each connection
/// is closed with a FIN (within 5 s).
pub fn run(port: u16, stop: &AtomicBool, ready: impl FnOnce(u16)) -> Result<(), Box<dyn std::error::Error>> {
    let t = KernelTransport::new(KernelConfig::default())?;
    let mut server =
        Server::new(t, Lines::with_errors(MAX_LINE), LineProto::default(), ServerConfig::default().with_port(port))?;
    ready(server.local_addr().ok_or("no address")?.port());
    server.run_until(|| stop.load(Ordering::Relaxed))?;
    let done = server.shutdown(Duration::from_secs(5))?;
    eprintln!("stopped: {done:?}, {} connections served", server.handler().served);
    Ok(())
}

/// Errors are printed with Display: their text says what to do (Debug, what `main` returning
/// a `Result` prints, hides it in a struct dump).
#[allow(dead_code)]
fn main() -> std::process::ExitCode {
    match try_main() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("line_server: error: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[allow(dead_code)]
fn try_main() -> Result<(), Box<dyn std::error::Error>> {
    let port = std::env::args().nth(1).map_or(Ok(7008), |p| p.parse())?;
    // Ctrl-C or SIGTERM sets the flag; `run_until` checks it between steps.
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    run(port, &stop, |p| println!("line protocol on 127.0.0.1:{p}; try: nc 127.0.0.1 {p}"))
}
