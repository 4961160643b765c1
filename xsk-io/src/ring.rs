//! The four single-producer/single-consumer rings shared with the kernel.
//!
//! Each ring is a power-of-two array of entries plus a producer and a consumer
//! index that run freely (wrapping u32) and are masked on access. We keep
//! cached copies of both indices so that the shared cache lines are touched
//! once per batch, not once per entry: the other side's index is re-read
//! (Acquire) only when the cached view says the ring is full or empty, and
//! ours is published (Release) once per batch.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::mmap::Mmap;
use crate::sys::{XdpRingOffset, XDP_RING_NEED_WAKEUP};

/// The mapping and the raw pointers into it.
#[derive(Debug)]
struct Shared<T> {
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    desc: *mut T,
    mask: u32,
    _map: Mmap,
    _t: PhantomData<T>,
}

// SAFETY: the pointers refer into `_map`, owned by this value; the ring
// protocol (one producer, one consumer, indices with Acquire/Release) is what
// makes concurrent access by the kernel sound, and the Rust side is `&mut`.
unsafe impl<T: Send> Send for Shared<T> {}

impl<T: Copy> Shared<T> {
    /// `map` must be the mapping of a ring of `entries` entries of `T` laid
    /// out as `off` says (from XDP_MMAP_OFFSETS).
    fn new(map: Mmap, off: &XdpRingOffset, entries: u32) -> Shared<T> {
        assert!(entries.is_power_of_two(), "ring size must be a power of two");
        let end = off.desc as usize + entries as usize * std::mem::size_of::<T>();
        assert!(end <= map.len(), "ring mapping too small");
        for o in [off.producer, off.consumer, off.flags] {
            assert!(o as usize + 4 <= map.len() && o % 4 == 0, "bad ring offset");
        }
        assert!((off.desc as usize).is_multiple_of(std::mem::align_of::<T>()));
        let base = map.as_ptr();
        // SAFETY: (all four pointers) the offsets were checked above to lie
        // inside the mapping and to be aligned for their types.
        unsafe {
            Shared {
                producer: base.add(off.producer as usize).cast(),
                consumer: base.add(off.consumer as usize).cast(),
                flags: base.add(off.flags as usize).cast(),
                desc: base.add(off.desc as usize).cast(),
                mask: entries - 1,
                _map: map,
                _t: PhantomData,
            }
        }
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points into the live mapping (see `new`); AtomicU32 has the
        // layout of the kernel's u32 index.
        unsafe { &*self.producer }
    }
    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { &*self.consumer }
    }
    fn flags(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { &*self.flags }
    }
    fn read(&self, idx: u32) -> T {
        // SAFETY: masked index is < entries, inside the mapping; the caller
        // only reads entries between consumer and producer (Acquire-loaded),
        // which the kernel has finished writing.
        unsafe { self.desc.add((idx & self.mask) as usize).read_volatile() }
    }
    fn write(&self, idx: u32, v: T) {
        // SAFETY: masked index is < entries; the caller only writes entries
        // between producer and consumer + size, which the kernel has released.
        unsafe { self.desc.add((idx & self.mask) as usize).write_volatile(v) }
    }
}

/// A ring we produce into: fill (u64 addresses) and TX (descriptors).
#[derive(Debug)]
pub struct Producer<T> {
    ring: Shared<T>,
    size: u32,
    /// Next index we will write (published or not).
    cached_prod: u32,
    /// Consumer index + size: we may write up to here.
    cached_limit: u32,
    /// Last producer value published to the kernel.
    published: u32,
}

impl<T: Copy> Producer<T> {
    pub fn new(map: Mmap, off: &XdpRingOffset, entries: u32) -> Producer<T> {
        let ring = Shared::new(map, off, entries);
        let prod = ring.producer().load(Ordering::Relaxed);
        let cons = ring.consumer().load(Ordering::Acquire);
        Producer { ring, size: entries, cached_prod: prod, cached_limit: cons.wrapping_add(entries), published: prod }
    }

    /// Free slots, refreshing the consumer index only when fewer than `want` are known free.
    pub fn free(&mut self, want: u32) -> u32 {
        let free = self.cached_limit.wrapping_sub(self.cached_prod);
        if free >= want {
            return free;
        }
        self.cached_limit = self.ring.consumer().load(Ordering::Acquire).wrapping_add(self.size);
        self.cached_limit.wrapping_sub(self.cached_prod)
    }

    /// Writes one entry (not yet visible to the kernel). False if the ring is full.
    #[inline]
    pub fn push(&mut self, v: T) -> bool {
        if self.cached_limit == self.cached_prod && self.free(1) == 0 {
            return false;
        }
        self.ring.write(self.cached_prod, v);
        self.cached_prod = self.cached_prod.wrapping_add(1);
        true
    }

    /// Entries written but not yet published.
    pub fn unpublished(&self) -> u32 {
        self.cached_prod.wrapping_sub(self.published)
    }

    /// Makes every pushed entry visible to the kernel with one Release store.
    pub fn publish(&mut self) -> u32 {
        let n = self.unpublished();
        if n > 0 {
            self.ring.producer().store(self.cached_prod, Ordering::Release);
            self.published = self.cached_prod;
        }
        n
    }

    /// Entries published and not yet consumed by the kernel.
    pub fn in_flight(&self) -> u32 {
        self.published.wrapping_sub(self.ring.consumer().load(Ordering::Acquire))
    }

    pub fn needs_wakeup(&self) -> bool {
        self.ring.flags().load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0
    }
}

/// A ring we consume from: RX (descriptors) and completion (u64 addresses).
#[derive(Debug)]
pub struct Consumer<T> {
    ring: Shared<T>,
    cached_cons: u32,
    cached_prod: u32,
}

impl<T: Copy> Consumer<T> {
    pub fn new(map: Mmap, off: &XdpRingOffset, entries: u32) -> Consumer<T> {
        let ring = Shared::new(map, off, entries);
        let cons = ring.consumer().load(Ordering::Relaxed);
        let prod = ring.producer().load(Ordering::Acquire);
        Consumer { ring, cached_cons: cons, cached_prod: prod }
    }

    /// Entries ready to read, refreshing the producer index (Acquire) only
    /// when the cached view has fewer than `want`.
    pub fn available(&mut self, want: u32) -> u32 {
        let n = self.cached_prod.wrapping_sub(self.cached_cons);
        if n >= want {
            return n;
        }
        self.cached_prod = self.ring.producer().load(Ordering::Acquire);
        self.cached_prod.wrapping_sub(self.cached_cons)
    }

    /// Reads the next entry; its slot is handed back by `release`.
    #[inline]
    pub fn pop(&mut self) -> Option<T> {
        if self.cached_prod == self.cached_cons && self.available(1) == 0 {
            return None;
        }
        let v = self.ring.read(self.cached_cons);
        self.cached_cons = self.cached_cons.wrapping_add(1);
        Some(v)
    }

    /// Hands every popped slot back to the kernel with one Release store.
    pub fn release(&mut self) {
        self.ring.consumer().store(self.cached_cons, Ordering::Release);
    }

    /// Entries the kernel has produced that we have not popped yet (refreshes).
    pub fn pending(&mut self) -> u32 {
        self.available(u32::MAX)
    }

    /// The ring's positions, wrapping: ours (the next entry to pop) and the
    /// kernel's (the next it fills; refreshed).
    pub fn positions(&mut self) -> (u32, u32) {
        self.available(u32::MAX);
        (self.cached_cons, self.cached_prod)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A ring in anonymous memory, with us playing both sides.
    fn layout(entries: u32, elem: usize) -> (Mmap, XdpRingOffset) {
        let off = XdpRingOffset { producer: 0, consumer: 64, flags: 128, desc: 192 };
        let map = Mmap::anonymous(192 + entries as usize * elem, false).unwrap();
        (map, off)
    }

    fn kernel_index(map_ptr: *mut u8, off: u64) -> &'static AtomicU32 {
        // SAFETY: test-only; the mapping outlives the ring in each test.
        unsafe { &*(map_ptr.add(off as usize) as *const AtomicU32) }
    }

    #[test]
    fn producer_respects_capacity_and_wraps() {
        let (map, off) = layout(8, 8);
        let base = map.as_ptr();
        let mut p: Producer<u64> = Producer::new(map, &off, 8);
        let kcons = kernel_index(base, off.consumer);
        let kprod = kernel_index(base, off.producer);
        for round in 0..5u64 {
            let mut n = 0;
            while p.push(round * 100 + n) {
                n += 1;
            }
            assert_eq!(n, 8, "a free ring takes exactly `size` entries");
            assert_eq!(kprod.load(Ordering::Relaxed), (round as u32) * 8, "nothing visible before publish");
            assert_eq!(p.publish(), 8);
            assert_eq!(p.in_flight(), 8);
            // the "kernel" consumes all
            kcons.store(kprod.load(Ordering::Relaxed), Ordering::Release);
            assert_eq!(p.in_flight(), 0);
        }
    }

    #[test]
    fn consumer_sees_only_published_entries_across_wrap() {
        let (map, off) = layout(4, 16);
        let base = map.as_ptr();
        let desc = base.wrapping_add(off.desc as usize) as *mut crate::sys::XdpDesc;
        let kprod = kernel_index(base, off.producer);
        let kcons = kernel_index(base, off.consumer);
        // start near u32 wrap to exercise wrapping arithmetic
        kprod.store(u32::MAX - 1, Ordering::Relaxed);
        kcons.store(u32::MAX - 1, Ordering::Relaxed);
        let mut c: Consumer<crate::sys::XdpDesc> = Consumer::new(map, &off, 4);
        assert!(c.pop().is_none());
        let mut next = u32::MAX - 1;
        for i in 0..3u64 {
            // SAFETY: test-only write into the ring's descriptor array.
            unsafe { desc.add((next & 3) as usize).write(crate::sys::XdpDesc { addr: i, len: 1, options: 0 }) };
            next = next.wrapping_add(1);
        }
        kprod.store(next, Ordering::Release);
        let got: Vec<u64> = std::iter::from_fn(|| c.pop()).map(|d| d.addr).collect();
        assert_eq!(got, vec![0, 1, 2]);
        assert_eq!(kcons.load(Ordering::Relaxed), u32::MAX - 1, "not released yet");
        c.release();
        assert_eq!(kcons.load(Ordering::Relaxed), next);
    }
}
