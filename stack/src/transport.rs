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

use std::net::SocketAddrV4;
use std::time::Duration;

use bytes::BytesMut;

/// A connection handle: slot index (low [`ConnId::SLOT_BITS`] bits) plus a generation counter
/// (high bits) that changes every time the slot is reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u32);

impl ConnId {
    /// Bits of the id used for the slot index: up to 2^20 (about 1M) live connections per
    /// transport.
    pub const SLOT_BITS: u32 = 20;
    /// Largest slot index + 1.
    pub const MAX_SLOTS: usize = 1 << Self::SLOT_BITS;
    const SLOT_MASK: u32 = (1 << Self::SLOT_BITS) - 1;
    const GEN_MASK: u32 = (1 << (32 - Self::SLOT_BITS)) - 1;

    /// Builds an id from a slot index (< [`ConnId::MAX_SLOTS`]) and a generation (wraps).
    pub fn new(slot: usize, generation: u32) -> Self {
        debug_assert!(slot < Self::MAX_SLOTS);
        ConnId(((generation & Self::GEN_MASK) << Self::SLOT_BITS) | (slot as u32 & Self::SLOT_MASK))
    }

    /// Dense slot index. Slots are reused after `close`, so they suit `Vec`-indexed side tables
    /// as long as the full id is compared too.
    pub fn slot(self) -> usize {
        (self.0 & Self::SLOT_MASK) as usize
    }

    /// How many times the slot had been reused when this id was handed out (wraps at
    /// 2^(32 - [`ConnId::SLOT_BITS`])).
    pub fn generation(self) -> u32 {
        self.0 >> Self::SLOT_BITS
    }
}

/// `slot.generation`, e.g. `3.1`: the second connection to use slot 3.
impl std::fmt::Display for ConnId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.slot(), self.generation())
    }
}

/// A listening port opened with [`Transport::listen`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ListenerId(pub u32);

/// What [`Transport::poll`] reports. See the module docs for the exact edge semantics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// A new inbound connection on `listener`. It is established and writable. If data is
    /// already waiting, `Readable` follows.
    Accepted {
        /// The listener it arrived on.
        listener: ListenerId,
        /// The new connection's id, valid until the application closes it.
        conn: ConnId,
    },
    /// An outgoing `connect` completed. The connection is now writable.
    Connected(ConnId),
    /// New bytes, EOF or an error can be read with `recv` (drain until it returns `Ok(0)`).
    Readable(ConnId),
    /// A `send` that was short (or returned 0) can now make progress.
    Writable(ConnId),
    /// The peer will send nothing more: FIN, reset, socket error, or a failed `connect`. The
    /// id stays valid until the application calls `close`. Reported exactly once.
    Closed(ConnId),
}

/// Errors a transport can return. Peer misbehaviour never shows up here (it becomes
/// [`Event::Closed`]), except `send` on a connection that was reset.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The id was closed by the application, or never existed (stale id).
    #[error("unknown or already closed connection {0:?}")]
    UnknownConn(ConnId),
    /// The listener id was never returned by this transport's `listen`.
    #[error("unknown listener {0:?}")]
    UnknownListener(ListenerId),
    /// The connection can no longer carry outgoing data (reset, socket error, failed
    /// connect). `Closed` is (or was) reported for it.
    #[error("connection {0:?} can no longer send (reset or failed)")]
    ConnectionClosed(ConnId),
    /// `listen` on a port that is already taken: by another socket (kernel backend), or by a
    /// listener of this stack or a kernel program (xsk backend, shared-address mode).
    #[error("port {0} already in use")]
    AddrInUse(u16),
    /// Out of connection slots, ports or buffers.
    #[error("resource exhausted: {0}")]
    Exhausted(&'static str),
    /// An argument the backend cannot use; the text says which.
    #[error("invalid argument: {0}")]
    InvalidInput(&'static str),
    /// A system call failed (socket, epoll, timerfd, ...).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Backend-specific failure (e.g. an AF_XDP ring or smoltcp error).
    #[error("{backend} backend: {source}")]
    Backend {
        /// The backend's [`Transport::name`].
        backend: &'static str,
        /// What failed inside it.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
}

/// A single-threaded, event-driven TCP connection API. See the module docs for the contract.
pub trait Transport {
    /// Starts listening on `port` (0 = backend picks an ephemeral port: see `local_addr`).
    fn listen(&mut self, port: u16) -> Result<ListenerId, TransportError>;

    /// Starts a non-blocking connect. Completion is reported as `Connected(id)`, failure
    /// as `Closed(id)`.
    fn connect(&mut self, addr: SocketAddrV4) -> Result<ConnId, TransportError>;

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

    /// Pushes out work queued by `send` calls since the last `flush`. The RR layer calls it
    /// once per loop iteration. A batching backend may leave the last step to the next `poll`,
    /// which makes it before it returns or while it sleeps (xsk: the frames are in the TX ring
    /// and the kernel is told by `poll`'s wait, one syscall for both), so call `poll` after it.
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

    /// Connections the application closed that still deliver data or a FIN. Dropping the
    /// transport before this reaches 0 resets them on the xsk backend (the kernel finishes
    /// closes by itself: always 0).
    fn closing(&self) -> usize {
        0
    }

    /// The address a listener is bound to (with the real port if `listen(0)` was used).
    fn local_addr(&self, listener: ListenerId) -> Option<SocketAddrV4>;

    /// The remote address of a connection: None once the backend no longer knows it, and
    /// always after the application closed it. Costs no syscall (the kernel backend keeps
    /// what `accept` and `connect` gave it).
    fn peer_addr(&self, conn: ConnId) -> Option<SocketAddrV4>;

    /// Short backend name for reports: "kernel" or "xsk".
    fn name(&self) -> &'static str;
}

/// A generational slab: dense slots that are reused, with ids that go stale on reuse. Shared by
/// the backends so every backend hands out [`ConnId`]s the same way.
#[derive(Debug)]
pub struct ConnSlab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    len: usize,
}

#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

impl<T> Default for ConnSlab<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> ConnSlab<T> {
    /// An empty slab.
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// An empty slab with room for `cap` entries before it reallocates.
    pub fn with_capacity(cap: usize) -> Self {
        ConnSlab { slots: Vec::with_capacity(cap), free: Vec::with_capacity(cap), len: 0 }
    }

    /// Stores `value` and returns its new id. Fails once [`ConnId::MAX_SLOTS`] are in use.
    pub fn insert(&mut self, value: T) -> Result<ConnId, TransportError> {
        let slot = match self.free.pop() {
            Some(s) => s as usize,
            None if self.slots.len() < ConnId::MAX_SLOTS => {
                self.slots.push(Slot { generation: 0, value: None });
                self.slots.len() - 1
            }
            None => return Err(TransportError::Exhausted("connection slots")),
        };
        let entry = &mut self.slots[slot];
        entry.value = Some(value);
        self.len += 1;
        Ok(ConnId::new(slot, entry.generation))
    }

    /// The value stored under `id`; `None` if the id was removed (stale) or never existed.
    pub fn get(&self, id: ConnId) -> Option<&T> {
        let entry = self.slots.get(id.slot())?;
        if Self::gen_matches(entry, id) {
            entry.value.as_ref()
        } else {
            None
        }
    }

    /// The value stored under `id`, mutable; `None` for a stale or unknown id.
    pub fn get_mut(&mut self, id: ConnId) -> Option<&mut T> {
        let entry = self.slots.get_mut(id.slot())?;
        if Self::gen_matches(entry, id) {
            entry.value.as_mut()
        } else {
            None
        }
    }

    /// Removes the value and bumps the slot's generation so `id` goes stale.
    pub fn remove(&mut self, id: ConnId) -> Option<T> {
        let entry = self.slots.get_mut(id.slot())?;
        if !Self::gen_matches(entry, id) {
            return None;
        }
        let value = entry.value.take()?;
        entry.generation = entry.generation.wrapping_add(1);
        self.free.push(id.slot() as u32);
        self.len -= 1;
        Some(value)
    }

    /// Live entries.
    pub fn len(&self) -> usize {
        self.len
    }

    /// No live entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Live entries with their current ids.
    pub fn iter(&self) -> impl Iterator<Item = (ConnId, &T)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| s.value.as_ref().map(|v| (ConnId::new(i, s.generation), v)))
    }

    /// Live entries with their current ids, mutable.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (ConnId, &mut T)> {
        self.slots
            .iter_mut()
            .enumerate()
            .filter_map(|(i, s)| s.value.as_mut().map(|v| (ConnId::new(i, s.generation), v)))
    }

    fn gen_matches(entry: &Slot<T>, id: ConnId) -> bool {
        // Compare only the bits that the id can hold: generations wrap within GEN_MASK.
        (entry.generation & ConnId::GEN_MASK) == id.generation()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conn_id_round_trips() {
        let id = ConnId::new(12345, 7);
        assert_eq!(id.slot(), 12345);
        assert_eq!(id.generation(), 7);
        // Generation wraps inside its bit field instead of corrupting the slot.
        let wrapped = ConnId::new(3, ConnId::GEN_MASK + 2);
        assert_eq!(wrapped.slot(), 3);
        assert_eq!(wrapped.generation(), 1);
    }

    #[test]
    fn slab_ids_go_stale_on_reuse() {
        let mut slab = ConnSlab::new();
        let a = slab.insert("a").unwrap();
        let b = slab.insert("b").unwrap();
        assert_eq!(slab.len(), 2);
        assert_eq!(slab.remove(a), Some("a"));
        assert_eq!(slab.remove(a), None, "double remove is harmless");
        let c = slab.insert("c").unwrap();
        assert_eq!(c.slot(), a.slot(), "slot is reused");
        assert_ne!(c, a, "but the id differs");
        assert_eq!(slab.get(a), None);
        assert_eq!(slab.get(c), Some(&"c"));
        assert_eq!(slab.get(b), Some(&"b"));
        let live: Vec<_> = slab.iter().map(|(id, v)| (id, *v)).collect();
        assert_eq!(live, vec![(c, "c"), (b, "b")]);
        assert_eq!(slab.get(ConnId::new(999, 0)), None);
    }
}
