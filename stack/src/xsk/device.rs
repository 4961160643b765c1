//! The device: smoltcp's view of the AF_XDP port, and nothing else.
//!
//! [`PortLink`] is the engine's [`Link`] over the port's TX half: a TX token
//! takes a UMEM frame only inside `consume` (smoltcp drops most tokens
//! unused) and queues it on the TX ring; nothing reaches the kernel until
//! the driver flushes the port, once per loop iteration. Received frames
//! are lent to `Engine::ingest` in place (their bytes in the UMEM) and given
//! back to the port through the link ([`RxFrames`]).

use smoltcp::phy;
use xsk_io::port::{Port, TxHalf};
use xsk_io::umem::{Frame, Umem};

use stack_engine::Link;
use stack_engine::RxFrames;

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
}

/// The device's own state, lent to each [`PortLink`].
pub(crate) struct DevState {
    /// Where smoltcp writes a frame that has no UMEM frame to go to (dropped).
    scratch: Vec<u8>,
    pub(crate) stats: DeviceStats,
    mtu: usize,
}

impl DevState {
    pub(crate) fn new(mtu: usize) -> DevState {
        DevState { scratch: vec![0u8; 64 * 1024], stats: DeviceStats::default(), mtu }
    }

    /// The link over `port` for one engine call, and the UMEM that received
    /// frames live in.
    pub(crate) fn link<'a>(&'a mut self, port: &'a mut Port) -> (PortLink<'a>, &'a Umem) {
        let (umem, tx) = port.split();
        let link = PortLink { umem, tx, scratch: &mut self.scratch, stats: &mut self.stats, mtu: self.mtu };
        (link, umem)
    }
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
