//! The embedded program: its object files (built by `build.rs`), the names
//! the loader looks up in them, and libbpf's log routed to `tracing`.

use std::sync::Once;

use libbpf_rs::PrintLevel;

/// Number of entries of `xsks_map`: the highest usable queue id is one less.
/// Keep in sync with `XSKS_MAX_QUEUES` in `steer.bpf.c`.
pub const MAX_QUEUES: u32 = 64;

pub(super) const PROG_NAME: &str = "xsk_steer";
pub(super) const MAP_XSKS: &str = "xsks_map";
pub(super) const MAP_TCP_PORTS: &str = "tcp_ports";
pub(super) const MAP_CFG: &str = "cfg";
pub(super) const MAP_COUNTERS: &str = "counters";

// Indices of the `counters` map; keep in sync with `steer.bpf.c`.
pub(super) const CNT_STEERED: u32 = 0;
pub(super) const CNT_PASSED: u32 = 1;
pub(super) const CNT_NO_SOCKET: u32 = 2;
pub(super) const CNT_DEFERRED: u32 = 3;
pub(super) const CNT_SHED_RX: u32 = 4;
pub(super) const CNT_SHED_FILL: u32 = 5;
pub(super) const CNT_SHED_STANDING: u32 = 6;
pub(super) const CNT_COOKIE: u32 = 7;

/// The compiled program, 8-byte aligned for libelf.
#[repr(C, align(8))]
pub(super) struct Aligned<B: ?Sized>(pub(super) B);
pub(super) static STEER_OBJ: &Aligned<[u8]> =
    &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/steer.bpf.o")));
/// The same program with deferred ACKs (`-DDEFER_ACKS`, see `acks`).
pub(super) static STEER_ACKS_OBJ: &Aligned<[u8]> =
    &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/steer_acks.bpf.o")));
pub(super) const MAP_ACK_STATE: &str = "ack_state";
pub(super) const MAP_ACK_RINGS: &str = "ack_rings";
pub(super) const MAP_SYN_COOKIES: &str = "syn_cookies";

/// Route libbpf's messages to `tracing` (debug level, target `libbpf`)
/// instead of stderr. Process-wide; installed once. Public for the other
/// BPF programs of the workspace (the benchmarks' NET_RX accountant).
pub fn route_libbpf_logs() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        fn to_tracing(level: PrintLevel, msg: String) {
            CAPTURE.with(|c| {
                if let Some(lines) = c.borrow_mut().as_mut() {
                    lines.extend(msg.lines().map(str::to_string));
                    let extra = lines.len().saturating_sub(CAPTURE_LINES);
                    lines.drain(..extra);
                }
            });
            let msg = msg.trim_end();
            match level {
                PrintLevel::Warn => tracing::debug!(target: "libbpf", "warn: {msg}"),
                PrintLevel::Info => tracing::debug!(target: "libbpf", "{msg}"),
                PrintLevel::Debug => tracing::trace!(target: "libbpf", "{msg}"),
            }
        }
        libbpf_rs::set_print(Some((PrintLevel::Debug, to_tracing)));
    });
}

/// Lines of libbpf's output kept by [`capture_log`] (the verifier's log ends with its verdict).
const CAPTURE_LINES: usize = 400;

thread_local! {
    static CAPTURE: std::cell::RefCell<Option<Vec<String>>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` (a program load on this thread) and returns its result with the last lines
/// libbpf printed meanwhile, the verifier's log among them.
pub(super) fn capture_log<T>(f: impl FnOnce() -> T) -> (T, Vec<String>) {
    route_libbpf_logs();
    CAPTURE.with(|c| *c.borrow_mut() = Some(Vec::new()));
    let r = f();
    let lines = CAPTURE.with(|c| c.borrow_mut().take()).unwrap_or_default();
    (r, lines)
}

/// The verifier's verdict from a captured log: the last line of the program's load log that
/// is not one of its statistics (e.g. "R4 has pointer with unsupported alu operation, pointer
/// arithmetic with it prohibited", CAP_PERFMON's absence).
pub(super) fn verifier_verdict(lines: &[String]) -> Option<String> {
    let end = lines.iter().rposition(|l| l.contains("-- END PROG LOAD LOG --"))?;
    let begin = lines[..end].iter().rposition(|l| l.contains("-- BEGIN PROG LOAD LOG --"))?;
    let useful: Vec<&str> = lines[begin + 1..end]
        .iter()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty() && !l.starts_with("processed ") && !l.starts_with("verification time"))
        .collect();
    useful.last().map(|l| l.to_string())
}
