//! The engine's [`Link`] over the AF_XDP port's TX half.
//!
//! A TX token takes a UMEM frame only inside `consume` (smoltcp drops most
//! tokens unused) and queues it on the TX ring; nothing reaches the kernel
//! until the driver flushes the port, once per loop iteration. Received
//! frames do not pass through here: the driver lends their UMEM bytes to
//! `Engine::ingest` directly.

use smoltcp::phy;
use xsk_io::port::{Port, TxHalf};
use xsk_io::umem::{Frame, Umem};

use super::engine::Link;
use super::faults::RxFrames;

/// Counters of the device layer.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct DeviceStats {
    pub tx_frames: u64,
    /// smoltcp built a frame but no UMEM frame or TX slot was free.
    pub tx_dropped: u64,
    /// Frames larger than a UMEM frame (never expected with a sane MTU).
    pub tx_oversize: u64,
    /// ARP requests that smoltcp wanted to send in shared-address mode (the kernel owns ARP there).
    pub arp_intercepted: u64,
}

/// The device layer's own state, lent to each [`PortLink`].
pub struct DevState {
    /// Where smoltcp writes a frame that has no UMEM frame to go to (dropped).
    scratch: Vec<u8>,
    pub stats: DeviceStats,
    /// Shared-address mode: targets of ARP requests smoltcp wanted to send.
    pub arp_targets: Vec<[u8; 4]>,
    pub intercept_arp: bool,
    pub mtu: usize,
}

impl DevState {
    pub fn new(mtu: usize, intercept_arp: bool) -> DevState {
        DevState {
            scratch: vec![0u8; 64 * 1024],
            stats: DeviceStats::default(),
            arp_targets: Vec::with_capacity(64),
            intercept_arp,
            mtu,
        }
    }

    /// The link over `port` for one engine call, and the UMEM that received
    /// frames live in.
    pub fn link<'a>(&'a mut self, port: &'a mut Port) -> (PortLink<'a>, &'a Umem) {
        let (umem, tx) = port.split();
        let link = PortLink {
            umem,
            tx,
            scratch: &mut self.scratch,
            stats: &mut self.stats,
            arp_targets: self.intercept_arp.then_some(&mut self.arp_targets),
            mtu: self.mtu,
        };
        (link, umem)
    }
}

/// The port's TX half as the engine's link.
pub struct PortLink<'a> {
    umem: &'a Umem,
    tx: TxHalf<'a>,
    scratch: &'a mut [u8],
    stats: &'a mut DeviceStats,
    /// Shared-address mode: ARP belongs to the kernel; record targets instead of sending.
    arp_targets: Option<&'a mut Vec<[u8; 4]>>,
    mtu: usize,
}

impl<'p> Link for PortLink<'p> {
    type Tx<'t>
        = Tx<'t, 'p>
    where
        Self: 't;

    fn tx(&mut self) -> Tx<'_, 'p> {
        Tx {
            tx: &mut self.tx,
            umem: self.umem,
            scratch: self.scratch,
            stats: self.stats,
            arp_targets: self.arp_targets.as_deref_mut(),
        }
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

pub struct Tx<'a, 'p> {
    tx: &'a mut TxHalf<'p>,
    umem: &'a Umem,
    scratch: &'a mut [u8],
    stats: &'a mut DeviceStats,
    arp_targets: Option<&'a mut Vec<[u8; 4]>>,
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
        let r = f(&mut self.umem.buf_mut(&mut frame)[..len]);
        frame.set_len(len);
        if let Some(targets) = self.arp_targets {
            let d = self.umem.data(&frame);
            if d.len() >= 42 && d[12..14] == [0x08, 0x06] {
                // ARP request from smoltcp: the kernel owns ARP for a shared
                // address, so the driver resolves the target from the
                // kernel's neighbour table instead of putting this on the wire.
                if targets.len() < 64 {
                    targets.push([d[38], d[39], d[40], d[41]]);
                }
                self.stats.arp_intercepted += 1;
                self.tx.release(frame);
                return r;
            }
        }
        match self.tx.send(frame) {
            Ok(()) => self.stats.tx_frames += 1,
            Err(frame) => {
                self.tx.release(frame);
                self.stats.tx_dropped += 1;
            }
        }
        r
    }
}
