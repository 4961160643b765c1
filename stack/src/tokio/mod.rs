//! Any [`Transport`] inside tokio: [`TcpListener`], [`TcpStream`] and [`Net::connect`], so
//! unmodified tokio servers (hyper, axum, tonic) run on the AF_XDP stack or, for comparison,
//! on the kernel backend. Feature `tokio` (and `axum` / `tonic` for those frameworks' traits).
//!
//! tokio cannot take a custom reactor (<https://github.com/tokio-rs/tokio/issues/1887>), so the transport is run by a
//! [`Driver`] task next to the application's tasks, in a current-thread runtime (one per
//! queue: [`serve_per_queue`]). Each pass of the driver takes in I/O with a zero-timeout
//! `poll`, wakes the connections that have events, flushes what the tasks wrote (and makes
//! the TX kick: tokio's epoll sleep does not transmit the AF_XDP ring as the xsk driver's own
//! poll(2) does), then waits for the transport's descriptor ([`Transport::wait_fd`] in an
//! `AsyncFd`), its next timer ([`Transport::next_wake`], a tokio `Sleep`) or a task's write.
//!
//! ```no_run
//! # async fn f() -> std::io::Result<()> {
//! use stack::kernel::{KernelConfig, KernelTransport};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! let net = stack::tokio::Net::spawn(KernelTransport::new(KernelConfig::default()).unwrap())?;
//! let listener = net.listen(7000)?;
//! let (mut s, _) = listener.accept().await?;
//! let mut buf = [0u8; 1024];
//! let n = s.read(&mut buf).await?;
//! s.write_all(&buf[..n]).await?;
//! # Ok(()) }
//! ```
//!
//! **Backpressure.** A stream keeps at most one `recv`'s worth of received bytes (the
//! transport's socket buffer bounds it) and takes more only once those are read; a write
//! goes straight into the transport's send buffer and waits (`Pending`) while it is full. So
//! a peer that does not read, or sends faster than the application reads, stalls its own
//! connection and grows no memory.
//!
//! **Shutdown.** The driver runs until the runtime drops it; the transport drops with the
//! last [`Net`], listener and stream. The xsk backend resets connections still open when it
//! drops, so call [`Net::drain`] after the server returns to let closed connections deliver
//! their last bytes and FIN.
//!
//! [`Transport`]: crate::transport::Transport
//! [`Transport::wait_fd`]: crate::transport::Transport::wait_fd
//! [`Transport::next_wake`]: crate::transport::Transport::next_wake

use std::time::Duration;

/// How long the stack holds the ACK of a request for its answer to carry, under tokio
/// ([`Net::new`] sets it on the transport: [`Transport::set_ack_delay`]). A framework answers
/// a few task hops after the driver took the request in (hyper's HTTP/2: tens of
/// microseconds), after the driver's flush; without a delay a bare ACK left first, a frame
/// and a TX kick of its own per request. Far below the 40 ms Linux holds its ACKs for, and
/// below the smallest tail-loss-probe allowance the stack's own client is given
/// (`--ack-delay`). A full segment is still acknowledged at once, and so is out-of-order
/// data. Change it with `net.with_transport(|t| t.set_ack_delay(None))`.
///
/// [`Transport::set_ack_delay`]: crate::transport::Transport::set_ack_delay
pub const ACK_DELAY: Duration = Duration::from_millis(2);

mod driver;
mod net;
mod shared;
mod stream;
mod threads;
#[cfg(test)]
mod tests;

pub use driver::Driver;
pub use net::Net;
pub use stream::{ConnectFuture, TcpListener, TcpStream};
#[cfg(feature = "tonic")]
pub use stream::Incoming;
pub use threads::serve_per_queue;
