//! The AF_XDP user ABI from `include/uapi/linux/if_xdp.h`, written out here
//! because Debian's libc headers lag the kernel (options 9 and 10 are newer
//! than any libc crate release), and the small syscall helpers the other
//! modules share (`if_nametoindex`, `setsockopt`, `getsockopt`, errno
//! conversion).
//!
//! Public are only what a user of the crate needs to see: the two TX socket
//! options the port probes ([`XDP_MAX_TX_SKB_BUDGET`],
//! [`XDP_GENERIC_XMIT_BATCH`]), the kernel's per-socket counters
//! ([`XdpStatistics`], part of [`crate::port::PortStats`]), the RX headroom
//! ([`XDP_PACKET_HEADROOM`]) and [`if_nametoindex`]. The ring layout, the
//! `sockaddr_xdp` and the raw `setsockopt`/`getsockopt` wrappers stay inside
//! the crate.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd};

/// A libc return value as a `Result`: negative means `errno` holds the error.
#[inline]
pub(crate) fn cvt<T: Copy + Default + PartialOrd>(r: T) -> io::Result<T> {
    if r < T::default() {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// `if_nametoindex(3)` in the calling thread's network namespace: the
/// interface index of `ifname`.
///
/// # Errors
/// `InvalidInput` if the name contains a NUL byte; the OS error (usually
/// `ENODEV`) if there is no such interface in this namespace.
pub fn if_nametoindex(ifname: &str) -> io::Result<u32> {
    let c = std::ffi::CString::new(ifname)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("interface name {ifname:?} contains NUL")))?;
    // SAFETY: `c` is a valid NUL-terminated string for the call's duration.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(i)
    }
}

/// `setsockopt(2)` with a plain-data value.
pub(crate) fn setsockopt<T: Copy>(fd: BorrowedFd<'_>, level: i32, opt: i32, v: &T) -> io::Result<()> {
    // SAFETY: `v` is a live, initialised T and we pass its exact size; the
    // kernel only reads `optlen` bytes from it.
    let r = unsafe {
        libc::setsockopt(fd.as_raw_fd(), level, opt, (v as *const T).cast(), size_of::<T>() as libc::socklen_t)
    };
    cvt(r).map(drop)
}

/// `getsockopt(2)` into a plain integer struct; returns it and the length the kernel wrote.
pub(crate) fn getsockopt<T: Copy + Default>(fd: BorrowedFd<'_>, level: i32, opt: i32) -> io::Result<(T, usize)> {
    let mut v = T::default();
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `v`, a valid T-sized
    // buffer; callers use plain integer structs, valid for any bytes.
    let r = unsafe { libc::getsockopt(fd.as_raw_fd(), level, opt, (&mut v as *mut T).cast(), &mut len) };
    cvt(r).map(|_| (v, len as usize))
}

pub(crate) const AF_XDP: libc::c_int = 44;
pub(crate) const SOL_XDP: libc::c_int = 283;

// sockaddr_xdp.sxdp_flags
pub(crate) const XDP_COPY: u16 = 1 << 1;
pub(crate) const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;

// xdp_ring.flags
pub(crate) const XDP_RING_NEED_WAKEUP: u32 = 1 << 0;

// SOL_XDP socket options.
pub(crate) const XDP_MMAP_OFFSETS: libc::c_int = 1;
pub(crate) const XDP_RX_RING: libc::c_int = 2;
pub(crate) const XDP_TX_RING: libc::c_int = 3;
pub(crate) const XDP_UMEM_REG: libc::c_int = 4;
pub(crate) const XDP_UMEM_FILL_RING: libc::c_int = 5;
pub(crate) const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
pub(crate) const XDP_STATISTICS: libc::c_int = 7;
pub(crate) const XDP_OPTIONS: libc::c_int = 8;
/// `SOL_XDP` option 9 (Linux 6.17+), a `u32`: how many TX descriptors one
/// `sendto` may turn into skbs in copy mode (the kernel's default is 32; it
/// accepts 32 up to the TX ring size). Older kernels answer `ENOPROTOOPT`.
/// The port sets it ([`crate::port::QueueConfig::tx_budget`]) and reports it in
/// [`crate::port::Features::tx_budget`].
pub const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;
/// `SOL_XDP` option 10, a `u32`: batched copy-mode (generic) xmit, building
/// up to this many skbs and sending them under one TX queue lock with the
/// doorbell deferred (`xmit_more`); at most [`XDP_MAX_TX_SKB_BUDGET`].
/// Proposed upstream, in no released kernel: those answer `ENOPROTOOPT`,
/// which the port reports once and then runs without it.
pub const XDP_GENERIC_XMIT_BATCH: libc::c_int = 10;

pub(crate) const XDP_OPTIONS_ZEROCOPY: u32 = 1 << 0;

// xdp_umem_reg.flags: `tx_metadata_len` is honoured only with this flag
// (Linux 6.8+); older kernels refuse the unknown flag with EINVAL.
pub(crate) const XDP_UMEM_TX_METADATA_LEN: u32 = 1 << 2;
// xdp_desc.options: a `struct xsk_tx_metadata` precedes the frame's data.
pub(crate) const XDP_TX_METADATA: u32 = 1 << 1;
// xsk_tx_metadata.flags: complete the L4 checksum (CHECKSUM_PARTIAL in copy mode).
pub(crate) const XDP_TXMD_FLAGS_CHECKSUM: u64 = 1 << 1;
/// Bytes registered as TX metadata in front of every TX frame's data: room
/// for `struct xsk_tx_metadata` (24 bytes with `launch_time`), rounded up to
/// 32 so that the frame data stays 32-byte aligned. A multiple of 8, as the
/// kernel requires.
pub(crate) const TX_METADATA_LEN: u32 = 32;

// mmap offsets of the four rings.
pub(crate) const XDP_PGOFF_RX_RING: libc::off_t = 0;
pub(crate) const XDP_PGOFF_TX_RING: libc::off_t = 0x8000_0000;
pub(crate) const XDP_UMEM_PGOFF_FILL_RING: libc::off_t = 0x1_0000_0000;
pub(crate) const XDP_UMEM_PGOFF_COMPLETION_RING: libc::off_t = 0x1_8000_0000;

/// Bytes the kernel reserves in front of the data of every received frame
/// (`XDP_PACKET_HEADROOM`), on top of [`crate::umem::UmemConfig::headroom`]:
/// a received frame's data starts this far into its UMEM frame, so the
/// longest frame a socket can receive is the frame size minus this.
pub const XDP_PACKET_HEADROOM: u32 = 256;

// Busy polling socket options (asm-generic/socket.h).
pub(crate) const SO_BUSY_POLL: libc::c_int = 46;
/// `SO_PREFER_BUSY_POLL` (Linux 5.11).
pub const SO_PREFER_BUSY_POLL: libc::c_int = 69;
pub(crate) const SO_BUSY_POLL_BUDGET: libc::c_int = 70;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SockaddrXdp {
    pub sxdp_family: u16,
    pub sxdp_flags: u16,
    pub sxdp_ifindex: u32,
    pub sxdp_queue_id: u32,
    pub sxdp_shared_umem_fd: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct XdpRingOffset {
    pub producer: u64,
    pub consumer: u64,
    pub desc: u64,
    pub flags: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct XdpMmapOffsets {
    pub rx: XdpRingOffset,
    pub tx: XdpRingOffset,
    pub fr: XdpRingOffset,
    pub cr: XdpRingOffset,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct XdpUmemReg {
    pub addr: u64,
    pub len: u64,
    pub chunk_size: u32,
    pub headroom: u32,
    pub flags: u32,
    pub tx_metadata_len: u32,
}

/// The kernel's counters of one AF_XDP socket (`getsockopt(XDP_STATISTICS)`,
/// `struct xdp_statistics`), cumulative since the socket was created.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct XdpStatistics {
    /// Frames steered to the socket and dropped by the kernel for reasons
    /// other than a full RX ring: e.g. longer than a UMEM frame can hold, or
    /// no frame available from the fill ring to copy into.
    pub rx_dropped: u64,
    /// Invalid descriptors on the RX side.
    pub rx_invalid_descs: u64,
    /// TX descriptors the kernel rejected (address or length outside the
    /// UMEM or the frame); each is skipped, not sent.
    pub tx_invalid_descs: u64,
    /// Frames dropped because the RX ring was full: the application did not
    /// consume fast enough.
    pub rx_ring_full: u64,
    /// Times the kernel needed a frame to receive into and found the fill
    /// ring empty.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the kernel looked for TX descriptors and found the ring empty
    /// (not an error: every drained batch ends that way).
    pub tx_ring_empty_descs: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct XdpOptions {
    pub flags: u32,
}

/// One RX or TX ring entry.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct XdpDesc {
    pub addr: u64,
    pub len: u32,
    pub options: u32,
}

/// `struct xsk_tx_metadata` (include/uapi/linux/if_xdp.h), the request
/// half: what the kernel reads `tx_metadata_len` bytes before the data of a
/// descriptor with [`XDP_TX_METADATA`].
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct XskTxMetadata {
    pub flags: u64,
    /// Where the checksummed range starts, from the frame's first byte.
    pub csum_start: u16,
    /// Where the checksum field is, from `csum_start`.
    pub csum_offset: u16,
    pub _pad: u32,
    pub launch_time: u64,
}

/// `CLOCK_MONOTONIC` in nanoseconds: the clock of `bpf_ktime_get_ns` and of
/// `std::time::Instant` on Linux.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC exists on
    // every Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The page size from the aux vector (`AT_PAGESZ`), without `unsafe`.
pub fn page_size() -> usize {
    const AT_PAGESZ: u64 = 6;
    if let Ok(auxv) = std::fs::read("/proc/self/auxv") {
        for pair in auxv.chunks_exact(16) {
            let key = u64::from_ne_bytes(pair[..8].try_into().unwrap());
            let val = u64::from_ne_bytes(pair[8..].try_into().unwrap());
            if key == AT_PAGESZ {
                return val as usize;
            }
        }
    }
    4096
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::size_of;

    #[test]
    fn abi_sizes_match_if_xdp_h() {
        assert_eq!(size_of::<SockaddrXdp>(), 16);
        assert_eq!(size_of::<XdpRingOffset>(), 32);
        assert_eq!(size_of::<XdpMmapOffsets>(), 128);
        assert_eq!(size_of::<XdpUmemReg>(), 32);
        assert_eq!(size_of::<XdpStatistics>(), 48);
        assert_eq!(size_of::<XdpDesc>(), 16);
        assert_eq!(size_of::<XskTxMetadata>(), 24);
        assert!(size_of::<XskTxMetadata>() <= TX_METADATA_LEN as usize && TX_METADATA_LEN.is_multiple_of(8));
    }
}

/// The running kernel's (major, minor), from /proc/sys/kernel/osrelease.
pub fn kernel_version() -> Option<(u32, u32)> {
    let rel = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let mut it = rel.trim().split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}
