#![warn(clippy::undocumented_unsafe_blocks)]
//! TCP/IP for the benchmark: a backend-independent request/response layer ([`rr`]) over the
//! [`transport::Transport`] trait, with two backends: the kernel's TCP stack ([`kernel`]) and
//! smoltcp over AF_XDP (`xsk`, added by its owner). Plus framing ([`codec`]) and CPU accounting
//! ([`cpu`]) for the measurements.

pub mod codec;
pub mod cpu;
pub mod kernel;
pub mod resp;
pub mod rr;
pub mod timer;
pub mod transport;
pub mod xsk;

pub use codec::{Codec, CodecError, LengthPrefixed, Lines, Stream};
pub use kernel::{KernelConfig, KernelTransport};
pub use rr::{
    Client, ClientConfig, ClientError, ClientReport, Completions, Echo, EchoWorkload, FnWorkload, Handler, Kv, KvRequest,
    KvResponse, KvStatus, LoadMode, Reply, Server, ServerConfig, ServerStats, Workload,
};
pub use transport::{ConnId, ConnSlab, Event, ListenerId, Transport, TransportError};
