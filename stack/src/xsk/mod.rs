//! The AF_XDP backend: smoltcp's TCP over an `xsk_io::Port`, behind the same
//! [`Transport`] trait as the kernel backend.
//!
//! Data flows one way per direction: RX ring -> port -> [`engine::Engine`]
//! (checks, demux, smoltcp, sockets) -> events -> application, and back
//! through the engine's [`engine::Link`] (`device`) to the TX ring. The
//! engine does no I/O and reads no clock; this module is its driver: it owns
//! the port, the epoll/timer wait, neighbour resolution from the kernel's
//! table, the ports claimed from the kernel, and fault injection. One
//! `XskTransport` is one single-threaded shard bound to one RX queue.

mod arp;
mod claims;
mod config;
mod demux;
mod device;
mod driver;
pub mod drops;
pub mod engine;
pub mod faults;
mod open;
pub mod testing;

pub use config::{AddrMode, Congestion, PartialCsum, XskConfig, XskError};
pub use device::DeviceStats;
pub use drops::{DropReason, DropStats};
pub use engine::EngineStats;

pub use driver::XskTransport;

use xsk_io::port::PortStats;

use crate::transport::TransportError;

fn backend_err(e: impl std::error::Error + Send + Sync + 'static) -> TransportError {
    TransportError::Backend { backend: "xsk", source: Box::new(e) }
}

/// Counters of the stack: the engine's, the device's and the port's.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct StackStats {
    #[serde(flatten)]
    pub engine: EngineStats,
    pub device: DeviceStats,
    pub port: PortStats,
}

impl std::ops::Deref for StackStats {
    type Target = EngineStats;
    fn deref(&self) -> &EngineStats {
        &self.engine
    }
}
