//! The provided-buffer ring that multishot receives take their buffers from (Linux 5.19+).
//!
//! Two anonymous mappings: the ring of `io_uring_buf` entries the kernel reads, and the
//! buffers themselves. The kernel takes a buffer from the ring for each receive completion
//! and names it in the completion's flags; the transport hands its bytes to the application
//! in `recv` and only then gives it back ([`BufRing::give`]), so a buffer is never written by
//! the kernel while a slice of it is alive. Given-back buffers reach the kernel when
//! [`BufRing::publish`] moves the shared tail, once per pass.

use std::io;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, Ordering};

/// One entry of the ring, as `struct io_uring_buf` in the kernel's uapi.
#[repr(C)]
struct RingEntry {
    addr: u64,
    len: u32,
    bid: u16,
    /// In entry 0 this field is the ring's tail (`io_uring_buf_ring.tail`).
    resv: u16,
}

/// An anonymous, page-aligned, zeroed mapping, unmapped on drop.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mapping {
    fn new(len: usize) -> io::Result<Mapping> {
        // SAFETY: an anonymous private mapping at an address the kernel picks; no file, no
        // existing memory is touched. The result is checked before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { ptr: NonNull::new(p.cast()).expect("mmap returned a non-null address"), len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly one mapping made in `new`, unmapped once, here. The
        // ring that the kernel reads is unregistered (or its io_uring gone) before the
        // transport drops it: `UringTransport`'s drop order.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// The ring and its buffers (buffer group `group`).
pub(super) struct BufRing {
    ring: Mapping,
    bufs: Mapping,
    entries: u16,
    size: u32,
    /// The tail as this side last wrote it (published or not).
    tail: u16,
    /// Buffers the kernel holds (given back and published, not yet used for a receive).
    kernel_has: u32,
}

// SAFETY: the mappings are owned by this value alone; the raw pointers are not shared with
// other threads by it (the kernel's access is the io_uring's, which moves with the transport).
unsafe impl Send for BufRing {}

impl BufRing {
    /// `entries` buffers (a power of two, at most 32768) of `size` bytes each, every one
    /// given to the kernel (published by the first [`publish`](Self::publish)).
    pub(super) fn new(entries: u16, size: u32) -> io::Result<BufRing> {
        if !entries.is_power_of_two() || entries > 32768 || size == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "receive buffers: a power of two up to 32768, of at least one byte"));
        }
        let ring = Mapping::new(usize::from(entries) * std::mem::size_of::<RingEntry>())?;
        let bufs = Mapping::new(usize::from(entries) * size as usize)?;
        let mut r = BufRing { ring, bufs, entries, size, tail: 0, kernel_has: 0 };
        for bid in 0..entries {
            r.give(bid);
        }
        Ok(r)
    }

    /// The ring's address, to register it.
    pub(super) fn ring_addr(&self) -> u64 {
        self.ring.ptr.as_ptr() as u64
    }

    pub(super) fn entries(&self) -> u16 {
        self.entries
    }

    /// Buffers the kernel holds now (once published): receives can still land while this is
    /// above zero.
    pub(super) fn available(&self) -> u32 {
        self.kernel_has
    }

    /// A receive completion took buffer `bid` from the kernel.
    pub(super) fn taken(&mut self) {
        self.kernel_has = self.kernel_has.saturating_sub(1);
    }

    /// The first `len` bytes of buffer `bid`, which a completion handed to this side and which
    /// has not been given back since.
    pub(super) fn bytes(&self, bid: u16, len: u32) -> &[u8] {
        let bid = bid & (self.entries - 1);
        let len = len.min(self.size) as usize;
        // SAFETY: `bid < entries`, so the range lies inside the buffers' mapping. The kernel
        // writes a buffer only while it sits in the ring; this one was taken by a completion
        // and is given back (`give`) only after the caller is done with the slice, which the
        // borrow of `self` holds: `give` needs `&mut self`.
        unsafe { std::slice::from_raw_parts(self.bufs.ptr.as_ptr().add(usize::from(bid) * self.size as usize), len) }
    }

    /// Puts buffer `bid` back in the ring (seen by the kernel after `publish`).
    pub(super) fn give(&mut self, bid: u16) {
        let bid = bid & (self.entries - 1);
        let slot = usize::from(self.tail & (self.entries - 1));
        let addr = self.bufs.ptr.as_ptr() as u64 + u64::from(bid) * u64::from(self.size);
        // SAFETY: `slot < entries`: inside the ring's mapping. The kernel reads only entries
        // between its head and the published tail; this slot is past the published tail, so
        // the kernel does not read it until `publish`. Entry 0's `resv` is the shared tail:
        // written only through `publish`'s atomic, never here (a field write of addr, len
        // and bid only).
        unsafe {
            let e = self.ring.ptr.as_ptr().cast::<RingEntry>().add(slot);
            std::ptr::addr_of_mut!((*e).addr).write(addr);
            std::ptr::addr_of_mut!((*e).len).write(self.size);
            std::ptr::addr_of_mut!((*e).bid).write(bid);
        }
        self.tail = self.tail.wrapping_add(1);
        self.kernel_has += 1;
    }

    /// Makes every buffer given back so far visible to the kernel.
    pub(super) fn publish(&self) {
        // SAFETY: the tail is the u16 at byte 14 of the ring (entry 0's `resv`), 2-aligned
        // inside a page-aligned mapping; the kernel reads it concurrently, hence the atomic.
        // Release: the entries written by `give` are visible before the tail that covers them.
        let tail = unsafe { &*self.ring.ptr.as_ptr().add(14).cast::<AtomicU16>() };
        tail.store(self.tail, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gives_every_buffer_and_reads_them_back() {
        let mut r = BufRing::new(8, 64).unwrap();
        assert_eq!(r.available(), 8);
        r.publish();
        r.taken();
        assert_eq!(r.available(), 7);
        assert_eq!(r.bytes(3, 100).len(), 64, "a length is capped at the buffer size");
        assert!(r.bytes(3, 10).iter().all(|&b| b == 0));
        r.give(3);
        assert_eq!(r.available(), 8);
        assert!(BufRing::new(6, 64).is_err(), "not a power of two");
    }
}
