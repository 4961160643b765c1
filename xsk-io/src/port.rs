//! A port: one interface queue as a batched, copy-mode AF_XDP endpoint.
//!
//! Frames move only through this type, so it can keep exact books:
//! every UMEM frame is in exactly one place (free, fill, app, tx), and
//! [`Port::audit`] proves it. The hot path (recv, alloc, send, flush) does no
//! allocation and at most one syscall per batch: a `sendto` when TX
//! descriptors were published and the kernel asks to be woken, or none
//! when the kick is left to [`Port::wait`], whose poll(2) transmits before
//! it sleeps.
//!
//! This file has the port's state, its accessors and its books; the methods
//! that move frames are split by direction (`rx.rs`, `tx.rs`, and
//! [`TxHalf`] in `tx_half.rs`), and `bind.rs` binds a port to a queue.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::ring::{Consumer, Producer};
use crate::socket::{Rings, XskSocket};
use crate::sys::XdpDesc;
use crate::umem::{FrameTable, Place, Umem};
use crate::AttachMode;

mod bind;
mod config;
mod error;
mod features;
mod rx;
mod stats;
mod tx;
mod tx_half;

pub use error::PortError;
pub use features::Features;
pub use stats::{Accounting, Counters, PortStats, ShedCounters};
pub use tx_half::TxHalf;
pub use config::{BusyPoll, QueueConfig, Setting};

/// What [`Port::wait`] woke for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ready {
    /// The RX ring has frames.
    pub rx: bool,
    /// The extra descriptor given to [`Port::wait`] is readable.
    pub extra: bool,
}

static SAID_FEATURES: AtomicBool = AtomicBool::new(false);

/// One interface queue as a copy-mode AF_XDP endpoint: a socket, its UMEM
/// and rings, and the books of where every frame is.
///
/// Data plane only: [`recv`](Self::recv) and [`release`](Self::release) on
/// the RX side; [`alloc`](Self::alloc), [`send`](Self::send),
/// [`flush`](Self::flush) and [`reap`](Self::reap) on the TX side;
/// [`audit`](Self::audit) to prove the books. Preparing the interface
/// (ownership, tuning, the XDP program that redirects into the socket) is
/// someone else's: the `xsk-device` crate, whose handle a port may keep
/// alive ([`keep_alive`](Self::keep_alive)), or the embedder's own setup.
///
/// A port is `Send` but not shared: one thread drives it. It is a
/// [`mio::event::Source`] (readable when the RX ring has frames).
pub struct Port {
    sock: XskSocket,
    umem: Umem,
    fill: Producer<u64>,
    comp: Consumer<u64>,
    rx: Consumer<XdpDesc>,
    tx: Producer<XdpDesc>,
    frames: FrameTable,
    /// Frames kept off the fill ring so that TX never starves.
    tx_reserve: u32,
    /// SYN shedding in the steering program, if on, and where its
    /// counters are read.
    shed: Option<(crate::shed::ShedSlot, ShedCounterSource)>,
    /// The fill ring was found empty: check the kernel's count (once in a
    /// while) and say once where the frames were.
    fill_watch: FillWatch,
    /// TX metadata bytes in front of every TX frame's data (0: none
    /// registered): allocated frames start this far into their UMEM frame.
    tx_md: u32,
    /// A kick failed with a transient error: retry on the next flush.
    kick_retry: bool,
    /// [`flush_before_wait`](Port::flush_before_wait) left the kick to the next wait or flush.
    kick_deferred: bool,
    /// Since when the link is down (the last kick said ENETDOWN/ENXIO), and
    /// when the kick was last tried.
    link_down: Option<LinkDown>,
    counters: Counters,
    features: Features,
    /// Whatever must live as long as the port and be dropped after its
    /// socket is closed (the prepared device): declared last, dropped last.
    keep_alive: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

/// Reads the steering program's shed counters (see [`Port::set_shed`]).
pub type ShedCounterSource = Box<dyn Fn() -> ShedCounters + Send>;

struct LinkDown {
    since: Instant,
    last_try: Instant,
}

/// When [`Port::refill`] finds the fill ring empty: whether to read the
/// kernel's count now (the first sighting, then every 1024th, so a ring that
/// stays empty costs a syscall per 1024 batches, not one each) and what it
/// said last; stops once it has logged.
#[derive(Default)]
struct FillWatch {
    sightings: u64,
    seen_empty: u64,
    logged: bool,
}

impl FillWatch {
    #[inline]
    fn armed(&self) -> bool {
        !self.logged
    }

    fn check_now(&mut self) -> bool {
        let now = self.sightings.is_multiple_of(1024);
        self.sightings += 1;
        now
    }
}

/// What `open_queue` (`bind.rs`) assembles a port from.
pub(crate) struct PortParts {
    pub sock: XskSocket,
    pub umem: Umem,
    pub rings: Rings,
    pub frames: FrameTable,
    pub tx_reserve: u32,
    /// TX metadata bytes registered with the UMEM (0: none).
    pub tx_md: u32,
    pub features: Features,
}

impl Port {
    pub(crate) fn new(p: PortParts) -> Port {
        let Rings { fill, comp, rx, tx } = p.rings;
        let mut port = Port {
            sock: p.sock,
            umem: p.umem,
            fill,
            comp,
            rx,
            tx,
            frames: p.frames,
            tx_reserve: p.tx_reserve,
            shed: None,
            fill_watch: FillWatch::default(),
            tx_md: p.tx_md,
            kick_retry: false,
            kick_deferred: false,
            link_down: None,
            counters: Counters::default(),
            features: p.features,
            keep_alive: None,
        };
        port.refill();
        port
    }

    /// Turns on SYN shedding with `slot` (see [`crate::shed`]): every `recv`
    /// then tells the steering program how many frames may still arrive.
    /// `counters` reads what the program shed, for [`stats`](Self::stats).
    pub fn set_shed(&mut self, slot: crate::shed::ShedSlot, counters: ShedCounterSource) {
        tracing::info!(
            "{}:{}: SYN shedding on: new connections' SYNs are dropped in XDP (counted) once fewer than {} RX/fill ring places \
             are left, or {} frames wait after the RX ring has not been empty for {:?}",
            self.features.ifname,
            self.features.queue,
            slot.keep,
            slot.standing,
            slot.behind_after
        );
        self.shed = Some((slot, counters));
        self.update_shed();
    }

    /// Whether SYN shedding is on, and the places it keeps.
    pub fn shed_keep(&self) -> Option<u32> {
        self.shed.as_ref().map(|(s, _)| s.keep)
    }

    /// The TX reserve: frames kept off the fill ring for sending.
    pub fn tx_reserve(&self) -> u32 {
        self.tx_reserve
    }

    /// Tells the steering program how many frames may arrive before only the
    /// shedding reserve is left (no syscall: three loads and a store). Without
    /// shedding (the default) one test, inlined: called on every `recv`.
    #[inline]
    fn update_shed(&mut self) {
        if self.shed.is_some() {
            self.publish_shed();
        }
    }

    #[inline(never)]
    fn publish_shed(&mut self) {
        let Some((s, _)) = &mut self.shed else { return };
        let steered = s.steered();
        let queued = self.rx.pending();
        let b = s.budget(Instant::now(), self.features.rings.rx, queued, self.fill.in_flight());
        s.publish(steered, b);
    }

    /// Records what the device setup knows and the socket cannot: the
    /// interface's driver and where its XDP program runs, for
    /// [`features`](Self::features) and [`log_features`](Self::log_features).
    pub fn set_device(&mut self, driver: String, attach: Option<AttachMode>) {
        self.features.driver = driver;
        self.features.attach = attach;
    }

    /// Keeps `owner` alive as long as the port, and drops it after the
    /// socket is closed: a prepared device is put back only once no socket
    /// is bound to it.
    pub fn keep_alive(&mut self, owner: Arc<dyn std::any::Any + Send + Sync>) {
        self.keep_alive = Some(owner);
    }

    /// Logs the features line, once per process.
    pub fn log_features(&self) {
        if !SAID_FEATURES.swap(true, Ordering::Relaxed) {
            tracing::info!("xsk port: {}", self.features);
        }
    }

    /// What the kernel and the device gave this port.
    pub fn features(&self) -> &Features {
        &self.features
    }

    /// The UMEM: read and write frames with it.
    pub fn umem(&self) -> &Umem {
        &self.umem
    }

    /// The port's counters and the socket's kernel counters (one
    /// `getsockopt`).
    pub fn stats(&self) -> PortStats {
        let shed = self.shed.as_ref().map(|(_, read)| read()).unwrap_or_default();
        PortStats { port: self.counters, xdp: self.sock.statistics().unwrap_or_default(), shed }
    }

    // ---- accounting -------------------------------------------------------

    fn base(&self, addr: u64) -> u64 {
        self.umem.frame_base(addr)
    }

    /// Where the frames are now (reads the kernel's ring indices).
    pub fn accounting(&mut self) -> Accounting {
        let rx_ring = self.rx.pending();
        let comp_ring = self.comp.pending();
        let fill = self.frames.count(Place::Fill);
        let tx = self.frames.count(Place::Tx);
        Accounting {
            total: self.frames.total(),
            free: self.frames.count(Place::Free),
            fill: fill - rx_ring.min(fill),
            rx_ring,
            app: self.frames.count(Place::App),
            tx: tx - comp_ring.min(tx),
            comp_ring,
        }
    }

    /// Proves that every frame is in exactly one place: the per-frame table
    /// is consistent, the free list has each free frame once, no bad
    /// transition happened, and the ring occupancies fit the places.
    /// Returns the [`Accounting`] it checked.
    ///
    /// # Errors
    /// A description of the first inconsistency found: a bug in the port or
    /// a kernel that returned an address it was not given.
    pub fn audit(&mut self) -> Result<Accounting, String> {
        self.frames.audit()?;
        let a = self.accounting();
        let sum = a.free + a.fill + a.rx_ring + a.app + a.tx + a.comp_ring;
        if sum != a.total {
            return Err(format!("places add up to {sum}, not {}: {a:?}", a.total));
        }
        if a.rx_ring > self.frames.count(Place::Fill) || a.comp_ring > self.frames.count(Place::Tx) {
            return Err(format!("rings hold more frames than the kernel was given: {a:?}"));
        }
        let fill_ring = self.fill.in_flight();
        if fill_ring > self.frames.count(Place::Fill) {
            return Err(format!("fill ring holds {fill_ring} > frames given for RX: {a:?}"));
        }
        Ok(a)
    }
}

impl AsFd for Port {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

/// The socket becomes readable when the RX ring has frames. mio is
/// edge-triggered: drain RX fully after each event. The completion ring
/// raises no events, so a sender waiting for TX frames must poll with a timeout.
impl mio::event::Source for Port {
    fn register(&mut self, registry: &mio::Registry, token: mio::Token, interests: mio::Interest) -> io::Result<()> {
        mio::unix::SourceFd(&self.sock.as_raw_fd()).register(registry, token, interests)
    }
    fn reregister(&mut self, registry: &mio::Registry, token: mio::Token, interests: mio::Interest) -> io::Result<()> {
        mio::unix::SourceFd(&self.sock.as_raw_fd()).reregister(registry, token, interests)
    }
    fn deregister(&mut self, registry: &mio::Registry) -> io::Result<()> {
        mio::unix::SourceFd(&self.sock.as_raw_fd()).deregister(registry)
    }
}

#[cfg(test)]
mod tests;
