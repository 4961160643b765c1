//! The device: the AF_XDP port in both directions, as the engine sees it.
//!
//! [`Device`] owns the port and what wraps it, and is the one way frames
//! move between the port and the engine:
//! - in: [`Device::recv`] takes a batch from the RX ring, then
//!   [`Device::deliver`] hands the engine each frame, with the deferred ACKs
//!   of the XDP program's ack ring (`acks.rs`) merged in between them in
//!   arrival order, all through the fault injector (a pass-through unless
//!   faults are configured); each UMEM frame goes back to the port once read;
//! - out: [`Device::link`] is the engine's [`Link`]: the fault injector,
//!   then shared-address ARP interception (a pass-through in dedicated
//!   mode), then [`PortLink`], the port's TX half: a TX token takes a UMEM
//!   frame only inside `consume` (smoltcp drops most tokens unused) and
//!   queues it on the TX ring; nothing reaches the kernel until the driver
//!   flushes the port, once per loop iteration.

use stack_engine::smoltcp::phy;
use stack_engine::faults::{FaultState, Faulty};
use stack_engine::{Link, RxFrames};
use std::sync::Arc;

use xsk_device::Iface;
use xsk_io::port::{Port, TxHalf};
use xsk_io::umem::{Frame, Umem};

use super::acks::DeferredAcks;
use super::arp::{Intercept, SharedArp};

/// The engine's link over the device, for one engine call.
pub(crate) type DevLink<'a> = Faulty<'a, Intercept<'a, PortLink<'a>>>;

/// The port and everything between it and the engine. See the module docs.
pub(crate) struct Device {
    pub(crate) port: Port,
    /// The prepared interface: its steering program (ports to claim, ack
    /// rings, cookies). Declared after the port: dropped after it.
    pub(crate) iface: Arc<Iface>,
    state: DevState,
    /// Shared-address mode's ARP (interception and the kernel's table).
    pub(crate) arp: SharedArp,
    /// Fault injection (tests): the state of the [`Faulty`] link wrapper.
    pub(crate) faults: Option<FaultState<Frame>>,
    /// Pure ACKs that arrived while asleep (None: off or unavailable).
    pub(crate) acks: Option<DeferredAcks>,
    /// The received batch, between `recv` and `deliver`.
    batch: Vec<Frame>,
    /// Frames taken from the RX ring at most per batch.
    batch_max: usize,
}

impl Device {
    pub(crate) fn new(
        port: Port,
        iface: Arc<Iface>,
        mtu: usize,
        arp: SharedArp,
        faults: Option<FaultState<Frame>>,
        acks: Option<DeferredAcks>,
        batch_max: usize,
    ) -> Device {
        let state = DevState { scratch: vec![0u8; 64 * 1024], stats: DeviceStats::default(), mtu };
        Device { port, iface, state, arp, faults, acks, batch: Vec::with_capacity(batch_max), batch_max }
    }

    /// The engine's link for one call.
    pub(crate) fn link(&mut self) -> DevLink<'_> {
        let (umem, tx) = self.port.split();
        dev_link(umem, tx, &mut self.state, &mut self.arp, &mut self.faults)
    }

    /// Takes a batch from the RX ring (refilling the fill ring); how many
    /// frames. Less than a full batch: the ring is drained.
    pub(crate) fn recv(&mut self) -> usize {
        self.port.recv(&mut self.batch, self.batch_max)
    }

    /// Whether the last `recv` took a full batch (more may be waiting).
    pub(crate) fn batch_full(&self, n: usize) -> bool {
        n == self.batch_max
    }

    /// Whether `deliver` may have something for `ingest` when `recv` took no
    /// frame: one the fault injector holds, or deferred ACKs in their ring.
    /// The pass before a sleep, once per request at light load, has neither.
    #[inline]
    pub(crate) fn may_deliver(&self) -> bool {
        self.faults.is_some() || self.acks.as_ref().is_some_and(|a| a.pending())
    }

    /// Hands `ingest` the batch `recv` took and the deferred ACKs, in
    /// arrival order: each frame with `None` (it arrived now), each ACK
    /// with when it arrived (`CLOCK_MONOTONIC` ns). `drained`: the RX ring
    /// is empty, so ACKs that came after its last frame go in too (`wall`:
    /// now, the clock a record is held on while its earlier frames are
    /// missing).
    pub(crate) fn deliver(
        &mut self,
        drained: bool,
        wall: u64,
        ingest: &mut impl FnMut(Option<u64>, &[u8], &mut DevLink<'_>),
    ) {
        if !self.batch.is_empty() || self.faults.is_some() {
            // (Without frames, only the fault injector may hold one that is due.)
            let Device { port, state, arp, faults, acks, batch, .. } = self;
            let (umem, tx) = port.split();
            let mut link = dev_link(umem, tx, state, arp, faults);
            match acks.as_mut() {
                Some(acks) if acks.pending() => {
                    for f in batch.drain(..) {
                        acks.take_ready(&mut |ack, at| ingest(Some(at), ack, &mut link));
                        link.receive(f, &mut |l, f| ingest(None, umem.data(f), l));
                        acks.received(1);
                    }
                }
                acks => {
                    if let Some(a) = acks {
                        a.received(batch.len());
                    }
                    for f in batch.drain(..) {
                        link.receive(f, &mut |l, f| ingest(None, umem.data(f), l));
                    }
                }
            }
            link.deliver_held(&mut |l, f| ingest(None, umem.data(f), l));
        }
        if drained {
            self.take_acks(wall, ingest);
        }
    }

    /// With the RX ring drained: the deferred ACKs that came after its
    /// frames (or hold the first one until the frames before it come). Not
    /// with fault injection (deferred ACKs are off then).
    fn take_acks(&mut self, wall: u64, ingest: &mut impl FnMut(Option<u64>, &[u8], &mut DevLink<'_>)) {
        let Some(acks) = &mut self.acks else { return };
        if !acks.pending() {
            return;
        }
        for round in 0..2 {
            let (umem, tx) = self.port.split();
            let mut link = dev_link(umem, tx, &mut self.state, &mut self.arp, &mut self.faults);
            let held = acks.take_drained(wall, |ack, at| ingest(Some(at), ack, &mut link));
            // A record waits for frames: if the kernel dropped them (one
            // getsockopt, only now), count them and try again.
            if !held || round == 1 || !acks.account_lost(self.port.rx_lost()) {
                return;
            }
        }
    }

    /// The device's counters (the port's are the port's).
    pub(crate) fn stats(&self) -> DeviceStats {
        let mut s = self.state.stats;
        s.arp_intercepted = self.arp.intercepted();
        s.deferred_acks = self.acks.as_ref().map(|a| a.stats).unwrap_or_default();
        s
    }
}

/// Counters of the device layer.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
#[non_exhaustive]
pub struct DeviceStats {
    /// Frames queued on the TX ring.
    pub tx_frames: u64,
    /// smoltcp built a frame but no UMEM frame or TX slot was free.
    pub tx_dropped: u64,
    /// Frames larger than a UMEM frame (never expected with a sane MTU).
    pub tx_oversize: u64,
    /// ARP frames that smoltcp wanted to send in shared-address mode (the
    /// kernel owns ARP there; counted by `arp.rs`).
    pub arp_intercepted: u64,
    /// Deferred ACKs (all zero when off).
    pub deferred_acks: super::AckStats,
    /// SYNs the XDP program answered with this queue's cookies (see
    /// `XskConfig::xdp_syn_cookies`); the engine's own are `syn_cookies_sent`.
    pub xdp_syn_cookies: u64,
    /// Sleeps in the port's wait.
    pub sleeps: u64,
    /// Sleeps that the transport's timer ended: a deadline (the engine's or the caller's) or
    /// a [`Waker`](crate::Waker)'s wake. With the signalling timer, a sleep that its signal
    /// ended: another transport's in the same thread with the same signal counts too.
    pub timer_wakes: u64,
}

/// The engine's link over the port's halves: the one place the wrappers' order is decided
/// (fault injector outside, ARP interception inside, the port's TX half last).
fn dev_link<'a>(
    umem: &'a Umem,
    tx: TxHalf<'a>,
    st: &'a mut DevState,
    arp: &'a mut SharedArp,
    faults: &'a mut Option<FaultState<Frame>>,
) -> DevLink<'a> {
    let port = PortLink { umem, tx, scratch: &mut st.scratch, stats: &mut st.stats, mtu: st.mtu };
    Faulty::new(arp.wrap(port), faults.as_mut())
}

/// The device's own state, lent to each [`PortLink`].
struct DevState {
    /// Where smoltcp writes a frame that has no UMEM frame to go to (dropped).
    scratch: Vec<u8>,
    stats: DeviceStats,
    mtu: usize,
}

/// The port's TX half as the engine's link.
pub(crate) struct PortLink<'a> {
    umem: &'a Umem,
    tx: TxHalf<'a>,
    scratch: &'a mut [u8],
    stats: &'a mut DeviceStats,
    mtu: usize,
}

impl<'p> Link for PortLink<'p> {
    type Tx<'t>
        = Tx<'t, 'p>
    where
        Self: 't;

    fn tx(&mut self) -> Tx<'_, 'p> {
        Tx { tx: &mut self.tx, umem: self.umem, scratch: self.scratch, stats: self.stats }
    }

    fn csum_offload(&self) -> bool {
        self.tx.csum_offload()
    }

    fn tx_ready(&mut self) -> bool {
        self.tx.ready()
    }

    fn mtu(&self) -> usize {
        self.mtu
    }
}

impl RxFrames for PortLink<'_> {
    type Frame = Frame;
    fn release(&mut self, f: Frame) {
        self.tx.release(f)
    }
}

/// One frame to send, written straight into a UMEM frame.
pub(crate) struct Tx<'a, 'p> {
    tx: &'a mut TxHalf<'p>,
    umem: &'a Umem,
    scratch: &'a mut [u8],
    stats: &'a mut DeviceStats,
}

impl phy::TxToken for Tx<'_, '_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let Some(mut frame) = self.tx.alloc() else {
            self.stats.tx_dropped += 1;
            let n = len.min(self.scratch.len());
            return f(&mut self.scratch[..n]);
        };
        if len > self.umem.capacity(&frame) {
            self.tx.release(frame);
            self.stats.tx_oversize += 1;
            let n = len.min(self.scratch.len());
            return f(&mut self.scratch[..n]);
        }
        let buf = &mut self.umem.buf_mut(&mut frame)[..len];
        let r = f(buf);
        // With the offload, the engine left the TCP checksum to us
        // (`Link::csum_offload`): the pseudo-header sum, and the kernel does
        // the rest.
        let csum = if self.tx.csum_offload() { stack_engine::csum::fill_tcp_pseudo(buf) } else { None };
        frame.set_len(len);
        let sent = match csum {
            Some(start) => self.tx.send_csum(frame, start, stack_engine::csum::TCP_CSUM_OFFSET),
            None => self.tx.send(frame),
        };
        match sent {
            Ok(()) => self.stats.tx_frames += 1,
            Err(frame) => {
                self.tx.release(frame);
                self.stats.tx_dropped += 1;
            }
        }
        r
    }
}
