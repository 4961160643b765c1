//! TCP for request/response (RPC) servers and clients, with one API over two backends: the
//! kernel's TCP ([`kernel`]) and smoltcp over an AF_XDP socket in copy mode ([`xsk`]). Code
//! written against [`transport::Transport`] (or the request/response layer [`rr`] on top of it)
//! runs unchanged on either, so the two can be compared with everything above them equal.
//!
//! # Which backend
//!
//! - [`KernelTransport`] (kernel TCP through epoll): needs no privileges, works on any interface
//!   including loopback, talks to clients on the same host. Use it to develop, to serve local
//!   clients, and as the baseline.
//! - [`xsk::XskTransport`] (smoltcp over an AF_XDP port on one interface): for servers in VMs
//!   and containers on `virtio_net` or `veth` devices, where it aims at lower CPU per request
//!   and tail latency than the guest kernel's TCP. IPv4 and TCP only. Clients must come over
//!   the wire (another machine, VM or network namespace): the host's own packets to a local
//!   address never pass the interface's XDP hook. One transport binds one RX queue and is driven
//!   by one thread; [`xsk::XskTransport::shards`] opens one per queue, each for its own thread.
//!
//! # Which address mode (xsk)
//!
//! [`xsk::AddrMode`] in [`xsk::XskConfig`]:
//! - **Dedicated** `{ addr, prefix_len }`: an address the kernel does not have. The stack answers
//!   ARP and ping for it; its listening ports and its whole ephemeral range
//!   ([`xsk::EngineConfig::ephemeral`]) are steered to it; off-link peers go through
//!   [`xsk::XskConfig::gateway`]. Use it when you can add an address (a lab, a second address
//!   in the subnet).
//! - **Shared**: the interface's own IPv4 address (it must have one). Only the ports the stack
//!   uses are steered to it (its listening ports and the local ports of its live connections),
//!   each held in the kernel by a placeholder socket while in use, so kernel programs keep every
//!   other port (SSH, DHCP, ...). ARP stays with the kernel, neighbours come from the kernel's
//!   table, off-link peers go through its default route. A port a kernel socket already has is
//!   refused ([`TransportError::AddrInUse`] from `listen`; `connect` picks another). Use it
//!   when the machine has one address.
//!
//! # What the xsk backend needs
//!
//! - **Capabilities**, not root: `CAP_NET_RAW`, `CAP_NET_ADMIN`, `CAP_BPF`, `CAP_PERFMON`
//!   and `CAP_IPC_LOCK` (or a memlock limit that holds the UMEM), and a writable state
//!   directory ([`xsk::privileges`] says what each is for). Opening checks them first and
//!   names each one missing with its fix. Once every transport is open,
//!   [`xsk::privileges::drop_after_setup`] keeps only `CAP_NET_ADMIN` (the device is put back
//!   at exit) and can switch user; call it before spawning threads. The kernel backend needs
//!   none.
//! - **The device**: an Ethernet interface whose MTU fits a UMEM frame (MTU + 18 bytes within
//!   the frame minus XDP headroom; an MTU that does not fit is refused with the `ip link set`
//!   that fixes it), a queue [`xsk::XskConfig::port`]`.queue` that exists, copy mode (a driver
//!   that forces zero-copy is refused). `virtio_net` and `veth` get driver-specific preparation
//!   and, with the default [`xsk_io::AttachMode::Auto`], the program in driver (native) mode;
//!   other drivers get it in generic (SKB) mode.
//!   Only one process at a time may own an interface: a second one is refused, naming the pid.
//!
//! # What it does to the interface, and undoes
//!
//! Each step is logged through `tracing`: install a subscriber to see it (e.g.
//! `tracing_subscriber::fmt().with_env_filter(EnvFilter::from_default_env()).init()`, then
//! `RUST_LOG=info`, or `debug` for every step); without one nothing is printed. Before
//! changing anything it writes the original state to a record in the state directory
//! ([`xsk::state_dir`], `/run/xsk-io` by default: [`xsk::set_state_dir`] or
//! `XSK_IO_STATE_DIR` move it) and holds a lock for its whole life. It turns GRO and
//! LRO off in generic mode and segmentation offloads off on a veth peer, reduces a `virtio_net`
//! device to one channel when one queue is bound, and attaches the steering program through a
//! bpf_link. The program hands the stack only its own flows and passes everything else to the
//! kernel. When the last transport on the interface is dropped, the program is detached and
//! the settings put back. After `kill -9`, an OOM kill or an abort, the program goes away with
//! the process (bpf_link), shared-mode ports are released with their placeholder sockets, and
//! the device settings are restored by the next start on that interface or by
//! `xsk-bench restore IF`. So stop on SIGINT/SIGTERM by returning from the event loop, which
//! drops the transport: the examples set a flag with `signal_hook::flag::register` and stop
//! with [`Server::run_until`] and [`Server::shutdown`].
//!
//! # The request/response API ([`rr`])
//!
//! - A [`Handler`] gets each decoded request and appends its response: [`Reply::Done`], or
//!   [`Reply::Close`] to close after the response, or [`Reply::Pending`] to answer later
//!   through [`Completions`] (in [`Handler::tick`]) or [`Server::complete`], with responses kept
//!   in request order. The server keeps each connection's [`Handler::Conn`] for the handler:
//!   `on_open` makes it (with the peer's address), `handle` gets it, `on_close` gets it back.
//!   [`Echo`] and [`Kv`] are ready-made handlers.
//! - A [`Server`] runs a handler over a transport with a [`Codec`] ([`LengthPrefixed`],
//!   [`Lines`], [`Stream`], or your own): [`Server::run_until`] or one [`Server::step`] at a
//!   time. It pipelines, batches responses, and stops reading a connection whose unsent
//!   responses reach [`ServerConfig::write_high_water`]. [`Server::shutdown`] stops it
//!   gracefully (answers what was received, FIN, `on_close` for every connection); dropping
//!   a server resets its connections.
//! - Under it, [`Transport`] is the connection API itself (listen, connect, poll for
//!   [`Event`]s, recv, send, close, flush) for programs that run their own loop; its module
//!   docs give the exact contract.
//! - The load generator that drives such servers (closed or open loop, requests from a
//!   workload, each response checked and timed, a report at the end; rr-bench's engine) is
//!   not part of this crate: it is the `rr-load` crate (`apps/loadgen/`), over the same
//!   [`Transport`].
//!
//! # tokio servers (feature `tokio`)
//!
//! `stack::tokio` runs either backend inside a tokio runtime with a `TcpListener` and
//! `TcpStream` of its own, so axum (feature `axum`) and tonic (feature `tonic`) servers run
//! unmodified but for the listener; `examples/axum_server.rs`, `grpc_server.rs`.
//!
//! # The Redis-protocol service
//!
//! A `Handler` that serves RESP2/RESP3 (GET, SET with expiry, counters, hashes, MULTI/EXEC,
//! the start-up queries of stock clients) lives in the `apps` crate (`apps::resp`), built on
//! this API: `rr-server --service resp` runs it, and `redis-cli`, `redis-benchmark` and client
//! libraries work against it on either backend.
//!
//! # Examples
//!
//! `stack/examples/`: `echo_server.rs` (an echo server on either backend, the xsk one with a
//! dedicated address) and `line_server.rs` (a line protocol with per-connection state and
//! QUIT; `rr-load`'s `examples/client.rs` is a load client for it, and
//! `stack/tests/examples.rs` runs the two end to end).
//! The smallest server, on the kernel backend:
//!
//! ```no_run
//! use stack::{Echo, KernelConfig, KernelTransport, LengthPrefixed, Server, ServerConfig};
//!
//! # fn main() -> Result<(), stack::TransportError> {
//! let transport = KernelTransport::new(KernelConfig::default())?; // 127.0.0.1
//! let cfg = ServerConfig::default().with_port(7000);
//! let mut server = Server::new(transport, LengthPrefixed::default(), Echo, cfg)?;
//! server.run_until(|| false)
//! # }
//! ```

#![warn(missing_docs)]
// The crate docs name the xsk backend's items; without the feature they do not exist and
// rustdoc would warn of every link to them (the text still says what they are).
#![cfg_attr(not(feature = "xsk"), allow(rustdoc::broken_intra_doc_links))]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod codec;
pub mod kernel;
pub mod napi;
pub mod rr;
pub(crate) mod sockets;
pub(crate) mod timer;
#[cfg(feature = "tokio")]
pub mod tokio;
pub mod transport;
#[cfg(feature = "uring")]
pub mod uring;
pub mod wake;
#[cfg(feature = "xsk")]
pub mod xsk;

/// The `bytes` crate, whose `BytesMut` [`Handler::handle`] writes responses into and
/// [`Transport::recv`] reads into: use it from here, so the versions always match.
pub use bytes;
pub use codec::{Codec, CodecError, LengthPrefixed, Lines, Stream};
pub use kernel::{KernelConfig, KernelTransport};
pub use wake::Waker;
pub use rr::{
    Completions, Echo, Handler, Kv, KvRequest, KvResponse, KvStatus, Reply, Server, ServerConfig, ServerStats,
    ShutdownStats,
};
pub use transport::{ConnId, ConnSlab, Event, ListenerId, Transport, TransportError};
