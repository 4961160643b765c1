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
//! [`TxHalf`] in `tx_half.rs`), and `open.rs` opens ports on an [`Iface`].

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::ring::{Consumer, Producer};
use crate::socket::{Rings, XskSocket};
use crate::steer::Steer;
use crate::sys::XdpDesc;
use crate::umem::{FrameTable, Place, Umem};
use crate::AttachMode;

// pub(crate): iface.rs takes PortError from where it is defined, not through
// this file, which uses Iface (no circle).
pub(crate) mod error;
mod features;
mod open;
mod rx;
mod stats;
mod tx;
mod tx_half;

pub use error::PortError;
pub use features::Features;
pub use stats::{Accounting, Counters, PortStats, ShedCounters};
pub use tx_half::TxHalf;
pub use crate::config::{BusyPoll, Knob, PortConfig, SteerSpec};
pub use crate::iface::Iface;

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
/// [`audit`](Self::audit) to prove the books. The interface preparation
/// (ownership, tuning, steering program) belongs to its [`Iface`], which the
/// port keeps alive; once the last port of an interface (and any clone of
/// [`iface`](Self::iface)) is dropped, the interface is put back.
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
    /// SYN shedding in the steering program, if on.
    shed: Option<crate::shed::ShedSlot>,
    /// The fill ring was found empty: check the kernel's count (once in a
    /// while) and say once where the frames were.
    fill_watch: FillWatch,
    /// TX metadata bytes in front of every TX frame's data (0: none
    /// registered): allocated frames start this far into their UMEM frame.
    tx_md: u32,
    /// A kick failed with a transient error: retry on the next flush.
    kick_pending: bool,
    /// [`publish`](Port::publish) left the kick to the next wait or flush.
    kick_owed: bool,
    /// Since when the link is down (the last kick said ENETDOWN/ENXIO), and
    /// when the kick was last tried.
    link_down: Option<LinkDown>,
    counters: Counters,
    features: Features,
    iface: Arc<Iface>,
}

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

/// What `open_queue` (`open.rs`) assembles a port from.
pub(crate) struct PortParts {
    pub sock: XskSocket,
    pub umem: Umem,
    pub rings: Rings,
    pub frames: FrameTable,
    pub tx_reserve: u32,
    /// TX metadata bytes registered with the UMEM (0: none).
    pub tx_md: u32,
    pub features: Features,
    pub iface: Arc<Iface>,
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
            kick_pending: false,
            kick_owed: false,
            link_down: None,
            counters: Counters::default(),
            features: p.features,
            iface: p.iface,
        };
        port.refill();
        port
    }

    pub(crate) fn set_shed(&mut self, slot: crate::shed::ShedSlot) {
        tracing::info!(
            "{}:{}: SYN shedding on: new connections' SYNs are dropped in XDP (counted) once fewer than {} RX/fill ring places \
             are left, or {} frames wait after the RX ring has not been empty for {:?}",
            self.features.ifname,
            self.features.queue,
            slot.keep,
            slot.standing,
            slot.behind_after
        );
        self.shed = Some(slot);
        self.update_shed();
    }

    /// Whether SYN shedding is on, and the places it keeps.
    pub fn shed_keep(&self) -> Option<u32> {
        self.shed.as_ref().map(|s| s.keep)
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
        let Some(s) = &mut self.shed else { return };
        let steered = s.steered();
        let queued = self.rx.pending();
        let b = s.budget(Instant::now(), self.features.rings.rx, queued, self.fill.in_flight());
        s.publish(steered, b);
    }

    pub(crate) fn set_attach(&mut self, mode: AttachMode) {
        self.features.attach = Some(mode);
    }

    /// The interface this port belongs to (tuning, program, sysctls).
    pub fn iface(&self) -> &Arc<Iface> {
        &self.iface
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

    /// The interface's steering program (to add or remove TCP ports, read its
    /// counters); None if the port was opened without `steer`.
    pub fn steer(&self) -> Option<&Steer> {
        self.iface.steer()
    }

    /// The port's counters and the socket's kernel counters (one
    /// `getsockopt`).
    pub fn stats(&self) -> PortStats {
        let shed = match (&self.shed, self.iface.steer()) {
            (Some(_), Some(steer)) => steer
                .counters()
                .map(|c| ShedCounters {
                    syn_dropped_rx_backlog: c.shed_rx,
                    syn_dropped_fill_low: c.shed_fill,
                    syn_dropped_standing_queue: c.shed_standing,
                })
                .unwrap_or_default(),
            _ => ShedCounters::default(),
        };
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
