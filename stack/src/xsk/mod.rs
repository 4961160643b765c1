//! The AF_XDP backend: smoltcp's TCP over an `xsk_io::Port`, behind the same
//! [`Transport`](crate::transport::Transport) trait as the kernel backend.
//! One [`XskTransport`] is one single-threaded shard bound to one RX queue.
//!
//! The protocol lives in a sans-IO engine, its own crate (`stack-engine`,
//! in `stack/engine/`): it does no I/O and reads no clock, so the whole
//! stack runs in memory in unit tests and the fuzzer (`testing/`, feature
//! `testing`). `XskTransport` is its driver: it opens the port,
//! moves frames between the port and the engine, sleeps in the port's
//! poll(2) (with a timerfd for waits under 10 ms that need sub-millisecond
//! precision), resolves neighbours from the kernel's table and holds the
//! stack's ports in the kernel.
//!
//! # The data path
//!
//! A frame goes one way per direction, one step per file; the table of those
//! steps is in the repository's `README.md`, section "Data path" (one copy,
//! so it cannot drift).
//!
//! The driver's loop (`XskTransport::poll`: receive, ingest, report events,
//! egress, then sleep until the engine's next timer, the sleep making the
//! TX kick) and `flush` are in `driver.rs`; opening (interface, ports,
//! steering, engine configuration, timerfd) in `open.rs`; configuration in
//! `config.rs`; the ports held in the kernel in shared-address mode in
//! `port_placeholders.rs`.

mod acks;
mod arp;
mod port_placeholders;
mod config;
mod device;
mod driver;
mod neigh6;
mod open;
mod park;
mod stages;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use acks::AckStats;
pub use config::{Addr6Mode, AddrMode, PartialCsum, XdpCookies, XskConfig, XskError};
pub use device::DeviceStats;
pub use stack_engine::{
    Congestion, DropReason, DropStats, EngineConfig, EngineStats, Faults, Recovery, RecoveryStats, SynCookies,
};
pub use stages::StageTimes;

pub use driver::XskTransport;
/// What the xsk backend needs of the process, and dropping the rest after setup.
pub use xsk_device::privileges;
/// The directory of the crash-safe device records (`/run/xsk-io` by default).
pub use xsk_device::state::{set_state_dir, state_dir};

use xsk_io::port::PortStats;

use crate::transport::TransportError;

fn backend_err(e: impl std::error::Error + Send + Sync + 'static) -> TransportError {
    TransportError::Backend { backend: "xsk", source: Box::new(e) }
}

/// Counters of the stack: the engine's, the device's and the port's.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
#[non_exhaustive]
pub struct StackStats {
    /// The engine's (flattened into the top level in JSON).
    #[serde(flatten)]
    pub engine: EngineStats,
    /// The device's.
    pub device: DeviceStats,
    /// The port's and the XDP socket's.
    pub port: PortStats,
    /// Where requests' time went (`XskConfig::stage_times`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stages: Option<StageTimes>,
}

impl std::ops::Deref for StackStats {
    type Target = EngineStats;
    fn deref(&self) -> &EngineStats {
        &self.engine
    }
}
