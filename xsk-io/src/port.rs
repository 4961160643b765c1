//! A port: one interface queue as a batched, copy-mode AF_XDP endpoint.
//!
//! Frames move only through this type, so it can keep exact books:
//! every UMEM frame is in exactly one place (free, fill, app, tx), and
//! [`Port::audit`] proves it. The hot path (recv, alloc, send, flush) does no
//! allocation and at most one syscall per batch: a `sendto` when TX
//! descriptors were published and the kernel asks to be woken, or none
//! when the kick is left to [`Port::wait`], whose poll(2) transmits before
//! it sleeps.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::ring::{Consumer, Producer};
use crate::socket::{RingSizes, Rings, SocketError, XskSocket};
use crate::state::StateError;
use crate::steer::{Steer, SteerError};
use crate::sys::{XdpDesc, XdpStatistics};
use crate::tune::{self, QueueLayout, TuneError};
use crate::umem::{Frame, FrameTable, Place, Umem};
use crate::AttachMode;

/// Why preparing an interface, opening a port, or flushing failed.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// No interface of that name in the calling thread's network namespace.
    #[error("interface {0:?} not found (ip link show)")]
    NoInterface(String),
    /// The UMEM could not be mapped (bad [`UmemConfig`](crate::umem::UmemConfig), no memory).
    #[error("creating the UMEM: {0}")]
    Umem(#[source] io::Error),
    /// Creating, setting up or binding the AF_XDP socket failed.
    #[error(transparent)]
    Socket(#[from] SocketError),
    /// Loading or attaching the steering program, or updating its maps, failed.
    #[error(transparent)]
    Steer(#[from] SteerError),
    /// A device check or change failed (everything changed was rolled back).
    #[error(transparent)]
    Tune(#[from] TuneError),
    /// The interface is owned by another live process, or its crash-safe
    /// record could not be written or restored.
    #[error(transparent)]
    State(#[from] StateError),
    /// The kernel refused a value for a socket option the user set explicitly
    /// ([`Knob::Value`]), or read back another value than was set. (A kernel
    /// without the option is not an error: see [`Features`].)
    #[error("{knob} = {value} rejected by the kernel: {source}{hint}")]
    Knob {
        /// The option, e.g. `"XDP_GENERIC_XMIT_BATCH"`.
        knob: &'static str,
        /// The value that was asked for.
        value: u32,
        /// The OS error (or the read-back mismatch).
        source: io::Error,
        /// Empty, or `" (<allowed range>)"`.
        hint: &'static str,
    },
    /// The kernel bound the socket zero-copy although copy mode was asked
    /// for; the port refuses to run (the interface name).
    #[error("the kernel bound {0} zero-copy although copy mode was asked for")]
    ZeroCopy(String),
    /// The TX `sendto` failed with an error that is neither transient
    /// (`EAGAIN`, `ENOBUFS`, `EBUSY`) nor a down link (`ENETDOWN`, `ENXIO`).
    /// The frames stay queued and the next flush retries.
    #[error("kicking TX failed: {0}")]
    Kick(#[source] io::Error),
}

pub use crate::config::{BusyPoll, Knob, PortConfig, SteerSpec};
pub use crate::iface::Iface;


/// What the kernel and the device gave a port, probed at bind; its
/// `Display` is the one-line summary [`Port::log_features`] prints.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Features {
    /// The interface.
    pub ifname: String,
    /// The queue the socket is bound to.
    pub queue: u32,
    /// The driver (`ETHTOOL_GDRVINFO`), `"unknown"` if it could not be read.
    pub driver: String,
    /// Where the steering program runs (None: no program attached).
    pub attach: Option<AttachMode>,
    /// Always false: a zero-copy bind is refused ([`PortError::ZeroCopy`]).
    pub zerocopy: bool,
    /// Always true: the socket is bound with `XDP_USE_NEED_WAKEUP`, so the
    /// port makes a syscall only when the kernel asks for one.
    pub need_wakeup: bool,
    /// `XDP_MAX_TX_SKB_BUDGET` in force, in descriptors per `sendto` (None:
    /// left at the kernel default, or a kernel older than 6.17: 32).
    pub tx_budget: Option<u32>,
    /// `XDP_GENERIC_XMIT_BATCH` in force, in frames per queue lock (None:
    /// turned off, or a kernel without it).
    pub xmit_batch: Option<u32>,
    /// Busy polling, if configured.
    pub busy_poll: Option<BusyPoll>,
    /// TX checksum offload through AF_XDP TX metadata
    /// ([`TxHalf::send_csum`]): asked for ([`PortConfig::tx_csum`]) and
    /// taken by the kernel (Linux 6.8+).
    pub tx_csum: bool,
    /// The ring sizes.
    pub rings: RingSizes,
    /// UMEM frame size in bytes.
    pub frame_size: u32,
    /// UMEM frames.
    pub frame_count: u32,
}

impl std::fmt::Display for Features {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{} driver={} xdp={} copy-mode need_wakeup={} tx_budget={} xmit_batch={} busy_poll={} tx_csum={} rings(fill/comp/rx/tx)={}/{}/{}/{} frames={}x{}",
            self.ifname,
            self.queue,
            self.driver,
            self.attach.map_or("none".to_string(), |m| m.to_string()),
            self.need_wakeup,
            self.tx_budget.map_or("unsupported(32)".to_string(), |b| b.to_string()),
            self.xmit_batch.map_or("unsupported".to_string(), |b| b.to_string()),
            self.busy_poll.map_or("off".to_string(), |b| format!("{}us/{}", b.usecs, b.budget)),
            if self.tx_csum { "offload" } else { "off" },
            self.rings.fill,
            self.rings.comp,
            self.rings.rx,
            self.rings.tx,
            self.frame_count,
            self.frame_size,
        )
    }
}

/// The port's own counters, cumulative since it was opened.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct Counters {
    /// Frames handed to the application by [`Port::recv`].
    pub rx_frames: u64,
    /// `recv` calls that returned at least one frame.
    pub rx_batches: u64,
    /// Frames queued for TX by `send`.
    pub tx_frames: u64,
    /// TX publishes (one Release store each).
    pub tx_batches: u64,
    /// Sent frames returned through the completion ring.
    pub completions: u64,
    /// sendto calls.
    pub kicks: u64,
    /// TX wake-ups made by [`Port::wait`]'s poll(2) instead of a sendto
    /// (copy mode: the kernel transmits before it sleeps).
    pub folded_kicks: u64,
    /// sendto answered EAGAIN/ENOBUFS, or EBUSY: the descriptors not yet
    /// taken stay queued and are retried on the next flush.
    pub kick_retries: u64,
    /// Frames the kernel took from the TX ring and dropped instead of
    /// sending: copy-mode `sendto` answers EBUSY when the driver returned
    /// NET_XMIT_DROP (e.g. carrier down) for one frame; that frame still
    /// completes (its address comes back in the completion ring), so the
    /// frame books stay exact, but it never reached the wire.
    pub tx_dropped: u64,
    /// Times the port found the link down (sendto: ENETDOWN, or ENXIO when
    /// the socket lost its device) and started waiting for it.
    pub link_downs: u64,
    /// send() found the TX ring full.
    pub tx_ring_full: u64,
    /// Frames sent with TX metadata asking the kernel to complete the
    /// checksum ([`TxHalf::send_csum`]).
    pub tx_csum_offloaded: u64,
    /// recvfrom calls (fill-ring wakeups, busy polling).
    pub rx_wakeups: u64,
    /// flushes that could not keep the fill ring topped up (no free frames).
    pub fill_short: u64,
    /// Receive calls that found the fill ring empty (the kernel had taken
    /// every frame given to it): frames arriving then are dropped
    /// (`rx_fill_ring_empty_descs`).
    pub fill_empty_seen: u64,
    /// RX descriptors skipped because they named no frame the kernel held
    /// (never expected: a kernel or accounting bug).
    pub rx_skipped: u64,
}

/// Everything a port counts: its own counters and the kernel's for its socket.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct PortStats {
    /// The port's counters.
    pub port: Counters,
    /// The kernel's counters of the socket (all 0 if they could not be read).
    pub xdp: XdpStatistics,
    /// SYNs the steering program shed (all 0 while shedding is off). The
    /// program's counters are per interface: with several ports on one
    /// interface each reports the interface's total.
    pub shed: ShedCounters,
}

/// SYNs the steering program dropped under overload, by reason (see
/// [`crate::shed`]).
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct ShedCounters {
    /// The RX ring had no more room than the reserve kept for open connections.
    pub syn_dropped_rx_backlog: u64,
    /// The fill ring had no more frames than the reserve.
    pub syn_dropped_fill_low: u64,
    /// The RX ring had not been empty for a while and the frames waiting
    /// reached the standing limit.
    pub syn_dropped_standing_queue: u64,
}

/// Where the frames are, with the kernel-side places split by ring; the
/// fields add up to `total` (checked by [`Port::audit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Accounting {
    /// Frames in the UMEM.
    pub total: u32,
    /// On the port's free list.
    pub free: u32,
    /// Given for RX: in the fill ring, or taken by the kernel and not yet in RX.
    pub fill: u32,
    /// Received, waiting in the RX ring.
    pub rx_ring: u32,
    /// Held by the application (received or allocated, not yet sent or released).
    pub app: u32,
    /// Given for TX: in the TX ring or being sent.
    pub tx: u32,
    /// Sent, waiting in the completion ring.
    pub comp_ring: u32,
}


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

/// At most this many frames in flight (handed to TX, not yet completed)
/// let [`Port::publish`] leave the kick to the wait: the smallest TX budget
/// (copy mode before `XDP_MAX_TX_SKB_BUDGET`: 32 per call), so one poll(2)
/// sends them all, and few enough that the socket's send buffer cannot be
/// full (the kernel would leave frames in the ring, and nothing wakes a
/// sleeper for that).
const FOLD_MAX: u32 = 32;

/// [`Port::publish`] reaps completions once this many frames are out for TX (half of
/// [`FOLD_MAX`], so completed frames left unreaped never make a small batch look large).
const REAP_BATCH: u32 = FOLD_MAX / 2;

/// How often a port whose link is down tries the kick again.
const LINK_RETRY: Duration = Duration::from_millis(10);

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

/// What [`crate::iface`] assembles a port from.
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
    /// Prepares `cfg.ifname` ([`Iface::prepare`], single-queue layout) and
    /// opens one queue (`cfg.queue`), attaching the steering program if
    /// `cfg.steer` is set.
    ///
    /// # Errors
    /// Any [`PortError`] of preparing the interface or opening the queue;
    /// what was changed by then is put back.
    pub fn open(cfg: &PortConfig) -> Result<Port, PortError> {
        let iface = Iface::prepare(cfg, QueueLayout::Single)?;
        let mut v = iface.open_ports(cfg, &[cfg.queue])?;
        Ok(v.pop().expect("one queue asked, one port"))
    }

    /// Opens every RX queue of the interface, one socket and one UMEM each,
    /// sharing one steering program, so that one stack shard can run per queue.
    /// The ports are in queue order; `cfg.queue` is ignored.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub fn open_all(cfg: &PortConfig) -> Result<Vec<Port>, PortError> {
        let iface = Iface::prepare(cfg, QueueLayout::All)?;
        let n = tune::rx_queue_count(&cfg.ifname)?;
        iface.open_ports(cfg, &(0..n).collect::<Vec<_>>())
    }

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
    /// shedding reserve is left (no syscall: three loads and a store).
    #[inline]
    fn update_shed(&mut self) {
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

    // ---- RX ---------------------------------------------------------------

    /// Moves up to `max` received frames into `out` (which should have the
    /// capacity reserved, so no allocation happens). Returns how many.
    ///
    /// First tops up the fill ring with frames released since the last call.
    /// With nothing received it wakes the kernel's RX side if it asks for it
    /// (need_wakeup) or busy polling is on: one `recvfrom`, at most.
    pub fn recv(&mut self, out: &mut Vec<Frame>, max: usize) -> usize {
        // Frames released since the last call go back to the kernel first:
        // under a burst an empty fill ring drops frames, which TCP pays for
        // with retransmissions.
        self.refill();
        let mut n = 0;
        while n < max {
            let Some(d) = self.rx.pop() else { break };
            if self.frames.transition(self.base(d.addr), Place::Fill, Place::App) {
                let len = (d.len as usize).min(self.umem.frame_size() as usize) as u32;
                out.push(self.umem.frame(d.addr, len));
                n += 1;
            } else {
                self.counters.rx_skipped += 1;
            }
        }
        self.update_shed();
        if n > 0 {
            self.rx.release();
            self.counters.rx_frames += n as u64;
            self.counters.rx_batches += 1;
        } else if self.features.busy_poll.is_some() || self.fill.needs_wakeup() {
            // Nothing received: drive NAPI (busy polling) or wake the fill side.
            self.counters.rx_wakeups += 1;
            let _ = self.sock.kick_rx();
        }
        n
    }

    /// Frames waiting in the RX ring (one read of its producer index).
    pub fn rx_ready(&mut self) -> u32 {
        self.rx.pending()
    }

    /// Frames the program redirected to this socket that never reached the
    /// application: dropped by the kernel (no fill frame, RX ring full; one
    /// `getsockopt(XDP_STATISTICS)`) or skipped by [`recv`](Self::recv).
    /// Cumulative.
    pub fn rx_lost(&self) -> u64 {
        let k = self.sock.statistics().map(|s| s.rx_dropped + s.rx_ring_full).unwrap_or(0);
        k + self.counters.rx_skipped
    }

    /// Gives a frame back (received or allocated, not sent) to the free list;
    /// the next `recv` or `flush` hands it to the fill ring.
    ///
    /// # Panics
    /// If the frame belongs to another port's UMEM.
    #[inline]
    pub fn release(&mut self, f: Frame) {
        self.split().1.release(f)
    }

    // ---- TX ---------------------------------------------------------------

    /// Splits the port into the UMEM (read frames with it) and the TX half
    /// (allocate, send, release), so that a received frame can be read while
    /// a reply is built: what a smoltcp RX/TX token pair needs.
    #[inline]
    pub fn split(&mut self) -> (&Umem, TxHalf<'_>) {
        let half = TxHalf {
            umem: &self.umem,
            tx: &mut self.tx,
            comp: &mut self.comp,
            frames: &mut self.frames,
            counters: &mut self.counters,
            tx_md: self.tx_md,
        };
        (&self.umem, half)
    }

    /// An empty frame (length 0) to build a packet in; reaps completions if
    /// the free list is empty. None if every frame is in use.
    #[inline]
    pub fn alloc(&mut self) -> Option<Frame> {
        self.split().1.alloc()
    }

    /// Free TX ring slots, refreshing the kernel's index only when fewer than
    /// `want` are known to be free.
    pub fn tx_space(&mut self, want: u32) -> u32 {
        self.tx.free(want)
    }

    /// Queues a frame for sending; nothing reaches the kernel before
    /// [`flush`](Self::flush). Gives the frame back if the TX ring is full.
    #[inline]
    pub fn send(&mut self, f: Frame) -> Result<(), Frame> {
        self.split().1.send(f)
    }

    /// Publishes queued TX descriptors (one Release store) and kicks the
    /// kernel (one sendto) if it asks for it; reaps completions and tops up
    /// the fill ring (once it lacks a batch, see `refill`). Transient kick
    /// errors are retried on the next flush.
    ///
    /// A link that is down (`ENETDOWN`/`ENXIO`) is not an error: the frames
    /// stay queued, [`link_down`](Self::link_down) turns true, and flushes
    /// retry the kick every 10 ms until the link is back.
    ///
    /// # Errors
    /// [`PortError::Kick`] for any other `sendto` error (the frames stay
    /// queued; the next flush retries).
    pub fn flush(&mut self) -> Result<(), PortError> {
        let published = self.tx.publish();
        if published > 0 {
            self.counters.tx_batches += 1;
        }
        if (published > 0 || self.kick_pending || self.kick_owed) && self.tx.needs_wakeup() {
            self.kick()?;
        }
        self.reap();
        self.refill();
        Ok(())
    }

    /// As [`flush`](Self::flush), but the kick is left to the next
    /// [`wait`](Self::wait), which makes it inside its poll(2), or to the
    /// next `flush` (whichever comes first; [`kick_owed`](Self::kick_owed)
    /// says one is due), when at most 32 frames are in flight (more, or a
    /// down link: kicked here, as `flush` does). For a loop that sleeps once it has sent: one
    /// syscall instead of a sendto and a wait, and the peer the frames wake
    /// (veth: on this CPU) runs once this thread sleeps instead of
    /// preempting it on its way back from sendto. While the link is down
    /// the kick is made here, as `flush` makes it (every 10 ms). Completions
    /// are reaped once 16 frames are out for TX (`flush` reaps them all).
    ///
    /// # Errors
    /// As [`flush`](Self::flush) while the link is down; otherwise none.
    pub fn publish(&mut self) -> Result<(), PortError> {
        let published = self.tx.publish();
        if published > 0 {
            self.counters.tx_batches += 1;
        }
        // Completions are taken in batches here: at light load every publish sends one
        // frame, and reading the completion ring for it cost more than building it.
        // Fewer than REAP_BATCH frames wait, so the count below still tells a burst.
        // (`flush` takes them all: `drain_tx` waits for that.)
        if self.frames.count(Place::Tx) >= REAP_BATCH {
            self.reap();
        }
        if (published > 0 || self.kick_pending) && self.tx.needs_wakeup() {
            // One poll(2) transmits at most one TX budget (32 before 6.17),
            // and what it leaves would wait out the sleep: many frames in
            // flight are kicked now (sendto retries leftovers soon), as is
            // a down link (rate-limited).
            if self.link_down.is_some() || self.frames.count(Place::Tx) > FOLD_MAX {
                self.kick()?;
            } else {
                self.kick_owed = true;
            }
        }
        self.refill();
        Ok(())
    }

    /// Whether [`publish`](Self::publish) left a kick that no wait or flush
    /// has made yet.
    pub fn kick_owed(&self) -> bool {
        self.kick_owed
    }

    /// Sleeps until the RX ring has frames, `extra` (e.g. a timerfd) is
    /// readable, or `timeout` (rounded up to whole milliseconds; None: no
    /// limit), and makes an owed kick on the way: in copy mode with
    /// need_wakeup the kernel's poll transmits the TX ring before it sleeps
    /// (`xsk_poll`: "Poll needs to drive Tx also in copy mode"). A kick is
    /// owed only when the TX ring asked for a wake-up, so only then.
    ///
    /// # Errors
    /// The OS error of poll(2) (`Interrupted` for a signal); an owed kick
    /// that the kernel did not finish stays due (the next flush makes it).
    pub fn wait(&mut self, extra: Option<BorrowedFd<'_>>, timeout: Option<Duration>) -> io::Result<Ready> {
        let ms = timeout.map_or(-1, |t| t.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32);
        let folded = std::mem::take(&mut self.kick_owed);
        let r = self.sock.wait_readable(extra, ms);
        if folded {
            self.counters.folded_kicks += 1;
            // A link that went down meanwhile sends nothing: what is left
            // is kicked by the next flush (after this wait; `publish` keeps
            // the fold to loads one poll sends whole).
            self.kick_pending = self.tx.in_flight() > 0;
        }
        let (rx, extra) = r?;
        Ok(Ready { rx, extra })
    }

    fn kick(&mut self) -> Result<(), PortError> {
        self.kick_owed = false;
        if let Some(d) = &self.link_down {
            // Waiting for the link: try again now and then, not on every flush.
            if d.last_try.elapsed() < LINK_RETRY {
                return Ok(());
            }
        }
        self.counters.kicks += 1;
        match self.sock.kick_tx() {
            Ok(()) => {
                if let Some(d) = self.link_down.take() {
                    tracing::info!("{}: link back after {:.1?}, sending again", self.features.ifname, d.since.elapsed());
                }
                // Copy mode sends at most the budget per call: if descriptors
                // are left, the next flush must kick again.
                self.kick_pending = self.tx.in_flight() > 0;
                Ok(())
            }
            Err(e) => match e.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) => {
                    self.counters.kick_retries += 1;
                    self.kick_pending = true;
                    Ok(())
                }
                // __xsk_generic_xmit: the driver dropped the frame it was
                // given (NET_XMIT_DROP); the frame was consumed from the TX
                // ring and completes through the completion ring. The loop
                // stopped there: the rest stays queued for the next kick.
                Some(libc::EBUSY) => {
                    self.counters.kick_retries += 1;
                    self.counters.tx_dropped += 1;
                    self.kick_pending = true;
                    Ok(())
                }
                // xsk_check_common: the device is down (ENETDOWN) or the
                // socket lost it (ENXIO). Nothing was taken from the TX ring;
                // wait for the link with the descriptors queued.
                Some(libc::ENETDOWN) | Some(libc::ENXIO) => {
                    self.kick_pending = true;
                    let now = Instant::now();
                    match &mut self.link_down {
                        Some(d) => d.last_try = now,
                        None => {
                            self.counters.link_downs += 1;
                            tracing::warn!(
                                "{}: {e}: waiting for the link ({} TX frame(s) queued stay queued; retrying every {LINK_RETRY:?})",
                                self.features.ifname,
                                self.tx.in_flight()
                            );
                            self.link_down = Some(LinkDown { since: now, last_try: now });
                        }
                    }
                    Ok(())
                }
                _ => {
                    self.kick_pending = true;
                    Err(PortError::Kick(e))
                }
            },
        }
    }

    /// Whether a flush is needed to make progress on TX. False while the
    /// link is down: the next flush retries, whenever the caller does one.
    pub fn tx_pending(&self) -> bool {
        (self.kick_pending && self.link_down.is_none()) || self.tx.unpublished() > 0
    }

    /// Whether the last kick found the link down (see [`Counters::link_downs`]).
    pub fn link_down(&self) -> bool {
        self.link_down.is_some()
    }

    /// Frames handed to the kernel for TX and not yet completed.
    pub fn tx_outstanding(&self) -> u32 {
        self.frames.count(Place::Tx)
    }

    /// Returns completed TX frames to the free list; returns how many.
    pub fn reap(&mut self) -> u32 {
        self.split().1.reap()
    }

    /// Tops up the fill ring from the free list, keeping the TX reserve.
    ///
    /// Not while it lacks fewer than [`REFILL_BATCH`] frames and still holds an RX
    /// ring's worth: at light load every receive brings one frame, and topping up one
    /// (the free list, a ring write, the index store the kernel reads) per frame cost
    /// more than reading it. A burst still finds the RX ring full before the fill ring
    /// empty, as when it was always full.
    fn refill(&mut self) {
        let in_flight = self.fill.in_flight();
        if in_flight == 0 && self.counters.rx_frames > 0 {
            self.fill_ran_empty();
        }
        if skip_refill(in_flight, self.features.rings.fill, self.features.rings.rx) {
            return;
        }
        let spare = crate::socket::fill_spare(self.frames.free_len() as u32, self.tx_reserve, self.frames.count(Place::Tx));
        let want = self.fill.free(spare.max(1)).min(spare);
        for _ in 0..want {
            let Some(addr) = self.frames.alloc(Place::Fill) else { break };
            let pushed = self.fill.push(addr);
            debug_assert!(pushed, "fill ring had room");
        }
        if self.fill.publish() == 0 && self.fill.in_flight() == 0 && spare == 0 {
            self.counters.fill_short += 1;
        }
    }

    /// The fill ring was found empty (the kernel took every frame): counts
    /// it, and now and then (the first time, then every 1024th) reads the
    /// kernel's count of frames dropped for it; the first time that count
    /// has risen, logs where the frames were.
    #[cold]
    fn fill_ran_empty(&mut self) {
        self.counters.fill_empty_seen += 1;
        if !self.fill_watch.armed() || !self.fill_watch.check_now() {
            return;
        }
        let Ok(st) = self.sock.statistics() else { return };
        if st.rx_fill_ring_empty_descs > self.fill_watch.seen_empty {
            self.fill_watch.seen_empty = st.rx_fill_ring_empty_descs;
            self.fill_watch.logged = true;
            let a = self.accounting();
            tracing::warn!(
                "{}:{}: the fill ring ran empty and the kernel dropped {} frame(s) so far (rx_fill_ring_empty_descs); \
                 the {} frames were: free {}, fill ring {}, RX ring {}, held by the stack {}, TX {}, completion ring {} \
                 (TX reserve {}, rings fill/rx/tx {}/{}/{}). Said once; the count is in the port's statistics",
                self.features.ifname,
                self.features.queue,
                st.rx_fill_ring_empty_descs,
                a.total,
                a.free,
                a.fill,
                a.rx_ring,
                a.app,
                a.tx,
                a.comp_ring,
                self.tx_reserve,
                self.features.rings.fill,
                self.features.rings.rx,
                self.features.rings.tx,
            );
        }
    }

    /// Flushes until every TX frame has completed, or `timeout`; sleeps 50 us
    /// between flushes. Returns whether everything completed.
    ///
    /// # Errors
    /// As [`flush`](Self::flush).
    pub fn drain_tx(&mut self, timeout: Duration) -> Result<bool, PortError> {
        let end = Instant::now() + timeout;
        loop {
            self.flush()?;
            if self.frames.count(Place::Tx) == 0 {
                return Ok(true);
            }
            if Instant::now() >= end {
                return Ok(false);
            }
            if !self.kick_pending && self.tx.needs_wakeup() {
                self.kick()?;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
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

/// The sending side of a port, borrowed from it by [`Port::split`]: the same
/// `alloc`/`send`/`release`/`reap` as on [`Port`], usable while the UMEM is
/// borrowed for reading a received frame.
pub struct TxHalf<'a> {
    umem: &'a Umem,
    tx: &'a mut Producer<XdpDesc>,
    comp: &'a mut Consumer<u64>,
    frames: &'a mut FrameTable,
    counters: &'a mut Counters,
    tx_md: u32,
}

impl TxHalf<'_> {
    fn base(&self, addr: u64) -> u64 {
        self.umem.frame_base(addr)
    }

    /// Whether a frame could be sent now: a TX slot and a frame are free
    /// (after reaping completions if needed).
    #[inline]
    pub fn ready(&mut self) -> bool {
        if self.frames.free_len() == 0 {
            self.reap();
        }
        self.frames.free_len() > 0 && self.tx.free(1) > 0
    }

    /// As [`Port::alloc`].
    #[inline]
    pub fn alloc(&mut self) -> Option<Frame> {
        if self.frames.free_len() == 0 {
            self.reap();
        }
        let addr = self.frames.alloc(Place::App)?;
        // With TX metadata the kernel reads it in front of the data (and
        // rejects a descriptor with less room before it than that).
        Some(self.umem.frame(addr + self.tx_md as u64, 0))
    }

    /// Whether [`send_csum`](Self::send_csum) offloads the checksum (the
    /// UMEM has TX metadata): [`Features::tx_csum`].
    #[inline]
    pub fn csum_offload(&self) -> bool {
        self.tx_md != 0
    }

    /// As [`send`](Self::send), with the frame's L4 checksum left to the
    /// kernel (TX metadata with `XDP_TXMD_FLAGS_CHECKSUM`; in copy mode the
    /// skb is CHECKSUM_PARTIAL: the device completes it, or the kernel does
    /// when the device cannot, and a local receiver such as a veth peer
    /// skips verifying it). The caller writes the pseudo-header sum into the
    /// checksum field, which is `csum_offset` bytes after `csum_start`
    /// (counted from the frame's first byte), as for any CHECKSUM_PARTIAL
    /// packet. Without TX metadata ([`csum_offload`](Self::csum_offload)
    /// false), or for a range that does not fit the frame (which the kernel
    /// would refuse, stalling the ring), it is a plain `send`.
    #[inline]
    pub fn send_csum(&mut self, mut f: Frame, csum_start: u16, csum_offset: u16) -> Result<(), Frame> {
        let len = f.len().min(self.umem.capacity(&f));
        if self.tx_md == 0 || csum_start as usize + csum_offset as usize + 2 > len {
            return self.send(f);
        }
        let md = crate::sys::XskTxMetadata { flags: crate::sys::XDP_TXMD_FLAGS_CHECKSUM, csum_start, csum_offset, ..Default::default() };
        if !self.umem.write_tx_metadata(&mut f, self.tx_md, &md) {
            return self.send(f);
        }
        self.push(f, crate::sys::XDP_TX_METADATA)?;
        self.counters.tx_csum_offloaded += 1;
        Ok(())
    }

    /// As [`Port::release`].
    #[inline]
    pub fn release(&mut self, f: Frame) {
        let addr = self.umem.take(f);
        self.frames.free(addr, Place::App);
    }

    /// As [`Port::send`]: queues the frame (its length clamped to its
    /// capacity); gives it back if the TX ring is full.
    #[inline]
    pub fn send(&mut self, f: Frame) -> Result<(), Frame> {
        self.push(f, 0)
    }

    #[inline]
    fn push(&mut self, f: Frame, options: u32) -> Result<(), Frame> {
        let len = f.len().min(self.umem.capacity(&f)) as u32;
        let desc = XdpDesc { addr: f.addr(), len, options };
        if !self.tx.push(desc) {
            self.counters.tx_ring_full += 1;
            return Err(f);
        }
        let addr = self.umem.take(f);
        let base = self.base(addr);
        self.frames.transition(base, Place::App, Place::Tx);
        self.counters.tx_frames += 1;
        Ok(())
    }

    /// As [`Port::reap`].
    pub fn reap(&mut self) -> u32 {
        let mut n = 0;
        while let Some(addr) = self.comp.pop() {
            if self.frames.free(addr, Place::Tx) {
                n += 1;
            }
        }
        if n > 0 {
            self.comp.release();
            self.counters.completions += n as u64;
        }
        n
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

/// Frames the fill ring may lack before [`Port`] tops it up: the receive batch.
pub(crate) const REFILL_BATCH: u32 = 64;

/// Whether a fill ring with `in_flight` of its `fill` slots given to the kernel can wait
/// for its top-up: it lacks fewer than [`REFILL_BATCH`] and holds at least an RX ring
/// (`rx` slots) of frames, so a burst fills the RX ring before it empties the fill ring.
fn skip_refill(in_flight: u32, fill: u32, rx: u32) -> bool {
    in_flight >= rx && fill - in_flight.min(fill) < REFILL_BATCH
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_fill_ring_waits_for_a_batch_but_never_below_an_rx_ring() {
        use super::{skip_refill, REFILL_BATCH};
        // The stack's sizing: fill twice the RX ring.
        assert!(skip_refill(8192, 8192, 4096));
        assert!(skip_refill(8192 - REFILL_BATCH + 1, 8192, 4096));
        assert!(!skip_refill(8192 - REFILL_BATCH, 8192, 4096));
        assert!(!skip_refill(0, 8192, 4096));
        // Fill and RX the same size: only a full ring waits, as before.
        assert!(skip_refill(2048, 2048, 2048));
        assert!(!skip_refill(2047, 2048, 2048));
        // A ring smaller than a batch waits down to an RX ring's worth; a count past
        // the size does not wrap.
        assert!(skip_refill(15, 16, 8));
        assert!(!skip_refill(7, 16, 8));
        assert!(skip_refill(9000, 8192, 4096));
    }

    #[test]
    fn a_port_can_move_to_its_thread() {
        fn is_send<T: Send>() {}
        is_send::<super::Port>();
    }
}
