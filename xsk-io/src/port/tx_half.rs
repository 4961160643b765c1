//! The sending side of a port, borrowed apart from its UMEM.

use crate::ring::{Consumer, Producer};
use crate::sys::XdpDesc;
use crate::umem::{Frame, FrameTable, Place, Umem};

use super::stats::Counters;

/// The sending side of a port, borrowed from it by [`Port::split`](super::Port::split): the same
/// `alloc`/`send`/`release`/`reap` as on [`Port`](super::Port), usable while the UMEM is
/// borrowed for reading a received frame.
pub struct TxHalf<'a> {
    pub(super) umem: &'a Umem,
    pub(super) tx: &'a mut Producer<XdpDesc>,
    pub(super) comp: &'a mut Consumer<u64>,
    pub(super) frames: &'a mut FrameTable,
    pub(super) counters: &'a mut Counters,
    pub(super) tx_md: u32,
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

    /// As [`Port::alloc`](super::Port::alloc).
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
    /// UMEM has TX metadata): [`Features::tx_csum`](super::Features::tx_csum).
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

    /// As [`Port::release`](super::Port::release).
    #[inline]
    pub fn release(&mut self, f: Frame) {
        let addr = self.umem.take(f);
        self.frames.free(addr, Place::App);
    }

    /// As [`Port::send`](super::Port::send): queues the frame (its length clamped to its
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

    /// As [`Port::reap`](super::Port::reap).
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
