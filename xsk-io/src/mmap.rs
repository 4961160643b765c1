//! Owned memory mappings: the UMEM area, the four rings, and the BPF maps
//! that deferred ACKs share with the steering program (`acks`).

use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64};
use std::os::fd::BorrowedFd;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;

/// A mapping that is unmapped on drop.
#[derive(Debug)]
pub struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; access to its
// contents is synchronised by the owners (ring indices, frame ownership).
unsafe impl Send for Mmap {}

impl Mmap {
    /// Anonymous, private, pre-faulted memory for a UMEM. Tries huge pages
    /// first when asked (fewer TLB misses on copies), then normal pages.
    pub fn anonymous(len: usize, huge: bool) -> io::Result<Mmap> {
        let base = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE;
        if huge {
            if let Ok(m) = Self::map(len, libc::PROT_READ | libc::PROT_WRITE, base | libc::MAP_HUGETLB, -1, 0) {
                return Ok(m);
            }
        }
        Self::map(len, libc::PROT_READ | libc::PROT_WRITE, base, -1, 0)
    }

    /// A ring of an AF_XDP socket, mapped shared at one of the XDP_PGOFF_* offsets.
    pub fn ring(fd: BorrowedFd<'_>, len: usize, offset: libc::off_t) -> io::Result<Mmap> {
        Self::map(
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            fd.as_raw_fd(),
            offset,
        )
    }

    /// A BPF map's memory (an mmapable array, or a ring buffer's pages),
    /// mapped shared at `offset`; read-only where the kernel refuses writers
    /// (a ring buffer's producer side).
    pub fn bpf_map(fd: BorrowedFd<'_>, len: usize, offset: libc::off_t, writable: bool) -> io::Result<Mmap> {
        let prot = if writable { libc::PROT_READ | libc::PROT_WRITE } else { libc::PROT_READ };
        Self::map(len, prot, libc::MAP_SHARED, fd.as_raw_fd(), offset)
    }

    /// The `u32` at byte `offset`, shared with the kernel.
    ///
    /// # Panics
    /// If `offset` is misaligned or out of the mapping.
    pub fn atomic_u32(&self, offset: usize) -> &AtomicU32 {
        assert!(offset.is_multiple_of(4) && offset + 4 <= self.len, "atomic_u32 at {offset} of {}", self.len);
        // SAFETY: in bounds and 4-aligned (checked above; the mapping is
        // page-aligned); the memory lives as long as `&self`. Our accesses
        // are atomic; the kernel's (BPF and ring buffer code) are aligned
        // word loads and stores or atomic adds, which do not tear.
        unsafe { &*self.ptr.as_ptr().add(offset).cast::<AtomicU32>() }
    }

    /// The `u64` at byte `offset`, shared with the kernel.
    ///
    /// # Panics
    /// If `offset` is misaligned or out of the mapping.
    pub fn atomic_u64(&self, offset: usize) -> &AtomicU64 {
        assert!(offset.is_multiple_of(8) && offset + 8 <= self.len, "atomic_u64 at {offset} of {}", self.len);
        // SAFETY: as in `atomic_u32`, with 8-byte alignment.
        unsafe { &*self.ptr.as_ptr().add(offset).cast::<AtomicU64>() }
    }

    /// `len` bytes at `offset`.
    ///
    /// # Safety
    /// Nobody, the kernel included, may write the range while the slice
    /// lives (a committed ring buffer record qualifies until the consumer
    /// position moves past it).
    ///
    /// # Panics
    /// If the range is out of the mapping.
    pub unsafe fn bytes(&self, offset: usize, len: usize) -> &[u8] {
        assert!(offset.checked_add(len).is_some_and(|e| e <= self.len), "bytes {offset}+{len} of {}", self.len);
        // SAFETY: in bounds (checked above) and alive as long as `&self`;
        // unchanged while the slice lives (the caller's promise).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(offset), len) }
    }

    fn map(len: usize, prot: i32, flags: i32, fd: i32, offset: libc::off_t) -> io::Result<Mmap> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "zero-length mapping"));
        }
        // SAFETY: a fresh mapping chosen by the kernel (addr = NULL) cannot
        // alias any Rust object; the result is checked before use.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, flags, fd, offset) };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mmap { ptr: NonNull::new(p.cast()).expect("mmap returned NULL"), len })
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    pub fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned, and no reference
        // into the mapping outlives `self` (borrows are tied to it).
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// A mapping touched only through atomics, so threads may share it (the
/// steering program's per-queue deferred-ACK state: each port's shard
/// writes its own queue's words).
#[derive(Debug)]
pub struct AtomicMap(Mmap);

// SAFETY: every access goes through `AtomicU32`/`AtomicU64` references
// (`u32`, `u64`), which are safe to use from any thread.
unsafe impl Sync for AtomicMap {}

impl AtomicMap {
    pub fn new(m: Mmap) -> AtomicMap {
        AtomicMap(m)
    }

    pub fn u32(&self, offset: usize) -> &AtomicU32 {
        self.0.atomic_u32(offset)
    }

    pub fn u64(&self, offset: usize) -> &AtomicU64 {
        self.0.atomic_u64(offset)
    }
}
