//! The connection vocabulary shared by the engine and every transport built
//! on it or beside it: ids ([`ConnId`], [`ListenerId`]), what a poll reports
//! ([`Event`]), what an operation can fail with ([`TransportError`]), the
//! generational slab ([`ConnSlab`]) that hands ids out, and a map keyed by ids ([`ConnMap`]). The `stack` crate
//! re-exports all of it in `stack::transport`, whose module docs give the
//! contract these types are used under.

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

/// A listening port: what `listen` returns (the engine's, or a transport's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ListenerId(pub u32);

/// What a poll reports (`Engine::take_events`, or a transport's `poll`). The edge semantics
/// are the `stack::transport` contract.
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
        /// The backend's name (`Transport::name`: "kernel", "xsk").
        backend: &'static str,
        /// What failed inside it.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
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
/// A hasher for [`ConnId`] keys: the ids are already well-distributed small integers, so a
/// multiplicative hash beats SipHash for a per-event lookup. The ids come from the transport
/// itself, not from the network, so HashDoS is not a concern.
#[derive(Default)]
pub struct ConnIdHasher(u64);

impl std::hash::Hasher for ConnIdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map keyed by [`ConnId`] with [`ConnIdHasher`]: per-connection state of an application
/// (the request/response server's table, the load generator's index).
pub type ConnMap<V> = std::collections::HashMap<ConnId, V, std::hash::BuildHasherDefault<ConnIdHasher>>;

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
