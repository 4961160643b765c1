//! smoltcp's `phy::Device` over the AF_XDP port.
//!
//! The event loop feeds smoltcp one received frame at a time (it picks the
//! socket bucket per frame, see `demux`), so the RX side of this device is a
//! single slot. The TX side takes a UMEM frame only inside
//! `TxToken::consume` (smoltcp drops most TX tokens unused) and queues it on
//! the TX ring; nothing reaches the kernel until the loop flushes the port
//! once per iteration.

use smoltcp::phy::{self, Checksum, DeviceCapabilities, Medium};
use smoltcp::time::Instant;
use xsk_io::port::TxHalf;
use xsk_io::umem::{Frame, Umem};

/// Counters of the device layer.
#[derive(Clone, Copy, Debug, Default, serde::Serialize)]
pub struct DeviceStats {
    pub rx_frames: u64,
    pub tx_frames: u64,
    /// smoltcp built a frame but no UMEM frame or TX slot was free.
    pub tx_dropped: u64,
    /// Frames larger than a UMEM frame (never expected with a sane MTU).
    pub tx_oversize: u64,
    /// ARP requests that smoltcp wanted to send in shared-address mode (the kernel owns ARP there).
    pub arp_intercepted: u64,
}

/// The device layer's own state, lent to each [`OneShot`].
pub struct DevState {
    /// Where smoltcp writes a frame that has no UMEM frame to go to (dropped).
    pub scratch: Vec<u8>,
    pub stats: DeviceStats,
    /// Shared-address mode: targets of ARP requests smoltcp wanted to send.
    pub arp_targets: Vec<[u8; 4]>,
    pub intercept_arp: bool,
    pub faults: Option<super::faults::FaultState>,
    pub mtu: usize,
}

impl DevState {
    /// A device over `port` for one smoltcp ingress or egress call.
    pub fn one_shot<'a>(
        &'a mut self,
        port: &'a mut xsk_io::port::Port,
        rx: RxSlot<'a>,
        done: &'a mut Option<Frame>,
    ) -> OneShot<'a, 'a> {
        let (umem, tx) = port.split();
        OneShot {
            umem,
            tx,
            rx,
            done,
            scratch: &mut self.scratch,
            stats: &mut self.stats,
            arp_targets: self.intercept_arp.then_some(&mut self.arp_targets),
            faults: self.faults.as_mut(),
            mtu: self.mtu,
        }
    }
}

/// What is offered to smoltcp as the received packet.
pub enum RxSlot<'a> {
    Empty,
    /// A frame from the RX ring; handed back through `done` after use.
    Frame(Frame),
    /// A frame the stack made itself (a synthetic ARP reply).
    Bytes(&'a [u8]),
}

/// A device for one `poll_ingress_single` or `poll_egress` call.
pub struct OneShot<'a, 'p> {
    pub umem: &'a Umem,
    pub tx: TxHalf<'p>,
    pub rx: RxSlot<'a>,
    /// Where the consumed RX frame goes, for the caller to release.
    pub done: &'a mut Option<Frame>,
    pub scratch: &'a mut [u8],
    pub stats: &'a mut DeviceStats,
    /// Shared-address mode: ARP belongs to the kernel; record targets instead of sending.
    pub arp_targets: Option<&'a mut Vec<[u8; 4]>>,
    pub faults: Option<&'a mut super::faults::FaultState>,
    pub mtu: usize,
}

pub fn capabilities(mtu: usize) -> DeviceCapabilities {
    let mut caps = DeviceCapabilities::default();
    caps.medium = Medium::Ethernet;
    caps.max_transmission_unit = mtu + 14;
    // None: smoltcp must not clamp the TCP window to a burst size.
    caps.max_burst_size = None;
    // Copy mode hands us plain frames: checksums are ours to check and fill.
    caps.checksum.ipv4 = Checksum::Both;
    caps.checksum.tcp = Checksum::Both;
    caps.checksum.icmpv4 = Checksum::Both;
    caps
}

pub struct Rx<'a> {
    umem: &'a Umem,
    frame: Option<Frame>,
    bytes: &'a [u8],
    done: &'a mut Option<Frame>,
}

impl phy::RxToken for Rx<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        match &self.frame {
            Some(fr) => f(self.umem.data(fr)),
            None => f(self.bytes),
        }
    }
}

impl Drop for Rx<'_> {
    fn drop(&mut self) {
        // Consumed or not, the frame goes back to the caller: never lost.
        *self.done = self.frame.take();
    }
}

pub struct Tx<'a, 'p> {
    tx: &'a mut TxHalf<'p>,
    umem: &'a Umem,
    scratch: &'a mut [u8],
    stats: &'a mut DeviceStats,
    arp_targets: Option<&'a mut Vec<[u8; 4]>>,
    faults: Option<&'a mut super::faults::FaultState>,
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
                // address, so the loop resolves the target from the kernel's
                // neighbour table instead of putting this on the wire.
                if targets.len() < 64 {
                    targets.push([d[38], d[39], d[40], d[41]]);
                }
                self.stats.arp_intercepted += 1;
                self.tx.release(frame);
                return r;
            }
        }
        if let Some(f) = self.faults {
            if f.tx_drop() {
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

impl<'a, 'p> phy::Device for OneShot<'a, 'p> {
    type RxToken<'t>
        = Rx<'t>
    where
        Self: 't;
    type TxToken<'t>
        = Tx<'t, 'p>
    where
        Self: 't;

    fn receive(&mut self, _now: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        let (frame, bytes) = match std::mem::replace(&mut self.rx, RxSlot::Empty) {
            RxSlot::Empty => return None,
            RxSlot::Frame(f) => (Some(f), &[][..]),
            RxSlot::Bytes(b) => (None, b),
        };
        self.stats.rx_frames += 1;
        let rx = Rx { umem: self.umem, frame, bytes, done: self.done };
        let tx = Tx {
            tx: &mut self.tx,
            umem: self.umem,
            scratch: self.scratch,
            stats: self.stats,
            arp_targets: self.arp_targets.as_deref_mut(),
            faults: self.faults.as_deref_mut(),
        };
        Some((rx, tx))
    }

    fn transmit(&mut self, _now: Instant) -> Option<Self::TxToken<'_>> {
        if !self.tx.ready() {
            return None;
        }
        Some(Tx {
            tx: &mut self.tx,
            umem: self.umem,
            scratch: self.scratch,
            stats: self.stats,
            arp_targets: self.arp_targets.as_deref_mut(),
            faults: self.faults.as_deref_mut(),
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        capabilities(self.mtu)
    }
}
