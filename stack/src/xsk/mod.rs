//! The AF_XDP backend: smoltcp's TCP over an `xsk_io::Port`, behind the same
//! [`Transport`](crate::transport::Transport) trait as the kernel backend.
//! One [`XskTransport`] is one single-threaded shard bound to one RX queue.
//!
//! The protocol lives in a sans-IO engine (`engine/`): it does no I/O and
//! reads no clock, so the whole stack runs in memory in unit tests and the
//! fuzzer (`testing/`). `XskTransport` is its driver: it opens the port,
//! moves frames between the port and the engine, sleeps in the port's
//! poll(2) (with a timerfd for waits under 10 ms that need sub-millisecond
//! precision), resolves neighbours from the kernel's table and holds the
//! stack's ports in the kernel.
//!
//! # The data path
//!
//! A frame goes one way per direction, one step per file. In:
//!
//! | step | what happens | where |
//! |---|---|---|
//! | ring | the steering program sends the stack's frames to the socket's RX ring | `xsk-io`: `bpf/`, `steer.rs`, `ring.rs` |
//! | port | `Port::recv` takes a batch off the RX ring (and refills the fill ring) | `xsk-io`: `port.rs` |
//! | device | each frame's bytes are lent in place from the UMEM, the frame given back once read | `device.rs` |
//! | (wrappers) | fault injection when configured (tests); shared-mode ARP | `faults.rs`, `arp.rs` |
//! | engine | checks and classification, then smoltcp in the frame's socket bucket | `engine/ingest.rs`, `demux.rs`, `csum.rs`, `drops.rs` |
//! | engine | socket state becomes events (accept, data, room, close) | `engine/lifecycle.rs`, `engine/egress.rs` |
//! | transport | `poll` returns the events; `recv` copies the data out | `driver.rs`, `engine/connections.rs` |
//! | app | the request/response server or the user's loop | `crate::rr`, the application |
//!
//! And back:
//!
//! | step | what happens | where |
//! |---|---|---|
//! | app | `send`, `close` | the application |
//! | transport | passed to the engine; `flush` (or the next `poll`) runs egress | `driver.rs` |
//! | engine | data into the socket's buffer; egress runs smoltcp for touched buckets and due timers | `engine/connections.rs`, `engine/egress.rs` |
//! | (wrappers) | ARP kept off the wire in shared mode; fault injection | `arp.rs`, `faults.rs` |
//! | device | smoltcp writes each frame straight into a UMEM frame, queued on the TX ring | `device.rs` |
//! | port | `Port::publish` publishes the TX ring; the kick is the sleep's poll(2) (`Port::wait`: copy mode transmits before it sleeps), or a sendto when `poll` returns without sleeping | `xsk-io`: `port.rs` |
//!
//! The driver's loop (`XskTransport::poll`: receive, ingest, report events,
//! egress, then sleep until the engine's next timer, the sleep making the
//! TX kick) and `flush` are in `driver.rs`; opening (interface, ports,
//! steering, engine configuration, timerfd) in `open.rs`; configuration in
//! `config.rs`; the ports held in the kernel in shared-address mode in
//! `claims.rs`.

mod acks;
mod arp;
mod claims;
mod config;
mod csum;
mod demux;
mod device;
mod driver;
mod drops;
mod engine;
pub mod faults;
mod open;
mod recovery;
pub mod testing;

pub use acks::AckStats;
pub use config::{AddrMode, Congestion, PartialCsum, XskConfig, XskError};
pub use device::DeviceStats;
pub use drops::{DropReason, DropStats};
pub use engine::EngineStats;
pub use faults::Faults;
pub use recovery::{Recovery, RecoveryStats};

pub use driver::XskTransport;

use xsk_io::port::PortStats;

use crate::transport::TransportError;

fn backend_err(e: impl std::error::Error + Send + Sync + 'static) -> TransportError {
    TransportError::Backend { backend: "xsk", source: Box::new(e) }
}

/// Counters of the stack: the engine's, the device's and the port's.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct StackStats {
    /// The engine's (flattened into the top level in JSON).
    #[serde(flatten)]
    pub engine: EngineStats,
    /// The device's.
    pub device: DeviceStats,
    /// The port's and the XDP socket's.
    pub port: PortStats,
}

impl std::ops::Deref for StackStats {
    type Target = EngineStats;
    fn deref(&self) -> &EngineStats {
        &self.engine
    }
}
