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
