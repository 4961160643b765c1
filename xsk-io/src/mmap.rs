//! Owned memory mappings: the UMEM area and the four rings.

use std::io;
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
