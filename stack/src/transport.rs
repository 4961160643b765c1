//! The connection API that every backend implements (kernel TCP via mio, smoltcp over AF_XDP).
//!
//! The request/response layer ([`crate::rr`]) is written only against [`Transport`], so both
//! backends run identical application logic. The API is single-threaded and event-driven: the
//! application calls [`Transport::poll`] to collect [`Event`]s, then reacts with `recv`, `send`
//! and `close`. Nothing on the hot path allocates: events go into a caller-owned `Vec`, received
//! bytes into a caller-owned `BytesMut`.
//!
//! # Contract (every backend must provide exactly this)
//!
//! **Ids.** A [`ConnId`] is valid from the moment `connect` returns it or `poll` reports it in
//! [`Event::Accepted`] until the application calls [`Transport::close`] on it. Closing is the
//! *only* way an id dies: a connection the peer closed or reset stays allocated (reporting
//! [`Event::Closed`] once) until the application closes it. After `close`, operations on the id
//! return [`TransportError::UnknownConn`] and the id is never reported again. Ids carry a
//! generation (see [`ConnSlab`]), so a recycled slot gets a different id.
//!
//! **Stale events.** One `poll` may append several events for the same connection. If the
//! application closes a connection while working through the batch, later events for it are
//! stale: the application must skip events for ids it no longer knows, and operations on
//! them return `UnknownConn` rather than touching another connection.
//!
//! **Readable: edge-triggered on "drained".** After a `recv` on `c` returned `Ok(0)`, or if
//! there was no `recv` yet, the backend reports `Readable(c)` once new bytes (or EOF, or an
//! error) are available. After it reports `Readable(c)`, it need not report it again until
//! `recv(c)` has returned `Ok(0)`. So the application must keep calling `recv` until it returns
//! `Ok(0)`. It may postpone that, e.g. for back-pressure, but then it must remember that the
//! connection may still hold data. Extra `Readable` events are allowed, and a `recv` that then
//! returns `Ok(0)` handles them. A backend whose [`Transport::recv_drains`] is true takes every
//! byte the connection holds in each `recv` and re-arms `Readable` then, so one `recv` that
//! returned bytes counts as drained: the call that would return `Ok(0)` may be left out.
//! Backends should not re-report `Readable` for data the application
//! is deliberately leaving unread, because that would make a back-pressured loop spin. A
//! level-triggered backend (smoltcp: `can_recv()`) meets this by reporting only for
//! connections that it marked "wants notification" when their last `recv` returned 0.
//!
//! **Writable: edge-triggered on "blocked".** `send` may accept fewer bytes than offered (even
//! 0). The backend then reports `Writable(c)` once more can be queued. A `send` that accepted
//! everything gives no promise of a `Writable`. Before [`Event::Connected`], `send` returns
//! `Ok(0)`: the `Connected` event doubles as the first "writable" notification.
//!
//! **EOF and errors.** `recv` never fails because of the peer: at EOF, reset or a socket error,
//! it returns `Ok(0)` and the backend queues [`Event::Closed`] (reported by the next `poll`,
//! which then does not block). Every byte that arrived before the peer's FIN can be read with
//! `recv` before `Closed` is reported. `Closed` is reported exactly once per connection, also
//! when an outgoing `connect` fails. After a FIN (half-close) `send` may still work. After a
//! reset or error it returns [`TransportError::ConnectionClosed`]. In every case the application
//! must call `close` to free the id.
//!
//! **close()** starts a graceful shutdown. Data already accepted by `send` is still delivered
//! (kernel: send buffer, smoltcp: TX buffer), then FIN. It frees the id at once and reports
//! no event.
//!
//! **poll(timeout).** Appends events, never clears `events`. `None` waits until at least one
//! event or an I/O wake-up. `Some(Duration::ZERO)` never blocks. Returning with no events
//! (timeout, spurious wake-up, EINTR) is not an error. Timeouts may be rounded up to the backend's
//! timer resolution (the kernel backend uses epoll: 1 ms).
//!
//! **flush()** is called once per application loop iteration after the application queued its
//! sends, so batching backends (AF_XDP TX ring) can kick once per iteration instead of once per
//! `send`.

use std::net::{SocketAddr, SocketAddrV4};
use std::time::Duration;

use bytes::BytesMut;

/// The ids, events, errors and slab are the engine crate's (every backend shares them).
pub use stack_engine::{ConnId, ConnIdHasher, ConnMap, ConnSlab, Event, ListenerId, TransportError};
/// A single-threaded, event-driven TCP connection API. See the module docs for the contract.
pub trait Transport {
    /// Starts listening on `port` (0 = backend picks an ephemeral port: see `local_addr`).
    fn listen(&mut self, port: u16) -> Result<ListenerId, TransportError>;

    /// Starts a non-blocking connect. Completion is reported as `Connected(id)`, failure
    /// as `Closed(id)`.
    fn connect(&mut self, addr: SocketAddrV4) -> Result<ConnId, TransportError>;

    /// [`connect`](Self::connect) to an IPv4 or IPv6 address. Default: IPv4 through
    /// `connect`, IPv6 refused with [`TransportError::InvalidInput`] (the kernel backend
    /// connects over IPv6 too).
    fn connect_ip(&mut self, addr: SocketAddr) -> Result<ConnId, TransportError> {
        match addr {
            SocketAddr::V4(a) => self.connect(a),
            SocketAddr::V6(_) => Err(TransportError::InvalidInput("this backend connects over IPv4 only")),
        }
    }

    /// Runs the event loop once: waits up to `timeout` (None = until something happens) for
    /// I/O and appends events to `events` (without clearing it).
    fn poll(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> Result<(), TransportError>;

    /// Appends readable bytes to `buf` (growing it if it has little spare capacity). Returns
    /// how many bytes were appended. `Ok(0)` means nothing right now (and re-arms `Readable`) or
    /// EOF (reported through `Closed`).
    fn recv(&mut self, conn: ConnId, buf: &mut BytesMut) -> Result<usize, TransportError>;

    /// Queues bytes for sending and returns how many were accepted. Fewer than `data.len()`
    /// means the buffer is full: wait for `Writable`.
    fn send(&mut self, conn: ConnId, data: &[u8]) -> Result<usize, TransportError>;

    /// Graceful close. Frees the id at once and is a no-op for unknown ids.
    fn close(&mut self, conn: ConnId);

    /// Stops listening: a new connection to the listener's port is refused (the kernel
    /// backends close the listening socket, the stack answers its SYN with a RST), as after
    /// tokio's listener is dropped; connections already accepted go on. Events already
    /// queued may still report an `Accepted` from it. Default: nothing (the listener keeps
    /// accepting).
    fn unlisten(&mut self, listener: ListenerId) {
        let _ = listener;
    }

    /// Pushes out work queued by `send` calls since the last `flush`. The RR layer calls it
    /// once per loop iteration. A batching backend may leave the last step to the next `poll`,
    /// which makes it before it returns or while it sleeps (xsk: the frames are in the TX ring
    /// and the kernel is told by `poll`'s wait, one syscall for both), so call `poll` after it.
    /// (xsk: `send` already put an answer to an idle connection in the TX ring; `flush`
    /// publishes it.)
    fn flush(&mut self) -> Result<(), TransportError> {
        Ok(())
    }

    /// Half-close: a FIN follows the data already accepted by `send`, and `recv` keeps
    /// working until the peer's FIN (`Closed`). Later `send`s fail with
    /// [`TransportError::ConnectionClosed`]. The id stays valid until `close`.
    fn shutdown_write(&mut self, conn: ConnId) -> Result<(), TransportError>;

    /// True if every `recv` takes all the bytes the connection holds and re-arms `Readable`
    /// as an `Ok(0)` would (see the module docs): an application may then stop reading after
    /// one `recv` that returned bytes. False (the default) asks for the `Ok(0)`: the kernel
    /// backend reads what fits its buffer.
    fn recv_drains(&self) -> bool {
        false
    }

    /// For a loop that sleeps elsewhere (the tokio adapter, [`crate::tokio`]): a descriptor
    /// that becomes readable when `poll` has I/O to take in. Edge-triggered use is fine as long
    /// as the loop calls `poll(Some(Duration::ZERO))` after each wake-up until it returns no
    /// events. `None`: the loop must poll on a timer.
    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        None
    }

    /// For such a loop: how long it may sleep on [`wait_fd`](Self::wait_fd) before `poll` is
    /// due again for the backend's own timers (`None`: only I/O wakes it; `Some(ZERO)`:
    /// `poll` has work now, e.g. events queued by `recv` or `send`).
    fn next_wake(&mut self) -> Option<Duration> {
        Some(Duration::from_millis(1))
    }

    /// For such a loop, after `flush`: makes the TX kick that `flush` leaves to `poll`'s
    /// sleep (xsk), so nothing waits in the ring while the loop sleeps elsewhere.
    fn kick(&mut self) -> Result<(), TransportError> {
        Ok(())
    }

    /// For such a loop, whose application answers a few task hops after the request is
    /// taken in: how long the ACK of received data may wait for the answer to carry it
    /// (`None`, the default: it leaves with the next flush, as a bare ACK if the answer is not
    /// written yet). The tokio adapter sets it ([`crate::tokio::ACK_DELAY`]). The backends on
    /// kernel TCP ignore it: the kernel delays its ACKs itself.
    fn set_ack_delay(&mut self, delay: Option<Duration>) {
        let _ = delay;
    }

    /// A [`Waker`](crate::Waker) that ends this transport's `poll` wait, from another thread or
    /// a signal handler: `poll` returns, with no event if nothing else happened. Every call
    /// gives a waker of the same transport. A loop with one sleeps with no timeout and checks
    /// its flags each time `poll` returns; without one it must poll with a timeout to notice
    /// them, which costs a kernel timer on every sleep.
    ///
    /// # Errors
    /// [`TransportError::InvalidInput`] when the backend cannot be woken (the default).
    fn waker(&mut self) -> Result<crate::Waker, TransportError> {
        Err(TransportError::InvalidInput("this backend cannot be woken: poll with a timeout"))
    }

    /// Connections the application closed that still deliver data or a FIN. Dropping the
    /// transport before this reaches 0 resets them on the xsk and uring backends (the epoll
    /// backend hands every close to the kernel, which finishes it by itself: always 0).
    fn closing(&self) -> usize {
        0
    }

    /// The address a listener is bound to (with the real port if `listen(0)` was used).
    fn local_addr(&self, listener: ListenerId) -> Option<SocketAddrV4>;

    /// The remote address of a connection: None once the backend no longer knows it, and
    /// always after the application closed it. Costs no syscall (the kernel backend keeps
    /// what `accept` and `connect` gave it).
    fn peer_addr(&self, conn: ConnId) -> Option<SocketAddrV4>;

    /// [`peer_addr`](Self::peer_addr) for either family. Default: the IPv4 peer only (a
    /// backend that serves IPv6 overrides it: the kernel backend, the in-memory one).
    fn peer_socket_addr(&self, conn: ConnId) -> Option<SocketAddr> {
        self.peer_addr(conn).map(SocketAddr::V4)
    }

    /// Short backend name for reports: "kernel" (epoll), "uring" or "xsk".
    fn name(&self) -> &'static str;
}
