//! The AF_XDP socket: creation, UMEM registration, ring setup, copy-mode
//! bind, and the kernel's socket options (probed once, reported).
//!
//! A [`crate::port::Port`] is built from these pieces by
//! [`Port::bind`](crate::port::Port::bind); what is public here is what a user needs to name
//! ([`RingSizes`], [`SocketError`]) and enough of [`XskSocket`] to probe which
//! `SOL_XDP` options the running kernel has, without binding anything.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::mmap::Mmap;
use crate::ring::{Consumer, Producer};
use crate::sys::*;
use crate::umem::Umem;

/// How long [`XskSocket::bind`] keeps retrying a queue that answers `EBUSY` before it reports
/// another socket: the kernel frees a closed socket's hold on the queue asynchronously.
const BIND_BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(2);
const BIND_RETRY_STEP: std::time::Duration = std::time::Duration::from_millis(5);

/// Why creating, setting up or binding an AF_XDP socket failed. Each variant
/// carries the OS error and, where one is likely, what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// `socket(AF_XDP)` failed: missing privileges (`EPERM`) or a kernel
    /// without `CONFIG_XDP_SOCKETS` (`EAFNOSUPPORT`).
    #[error("creating an AF_XDP socket failed: {0} (EPERM: needs CAP_NET_RAW; EAFNOSUPPORT: the kernel needs CONFIG_XDP_SOCKETS)")]
    Create(#[source] io::Error),
    /// A ring size option, reading the ring offsets, or mapping a ring failed;
    /// also a ring size that is not a power of two (`InvalidInput`).
    #[error("{what} failed: {source}")]
    Setup {
        /// The step, e.g. `"mapping the rx ring"`.
        what: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// `XDP_UMEM_REG` failed; `ENOMEM`/`EPERM` mean the pinned-memory limit
    /// (`CAP_IPC_LOCK` or `RLIMIT_MEMLOCK`).
    #[error("registering the UMEM ({bytes} bytes) failed: {source}; {hint}")]
    UmemReg {
        /// Size of the area that was to be registered.
        bytes: usize,
        /// The OS error.
        source: io::Error,
        /// The likely cause.
        hint: &'static str,
    },
    /// `bind` to the interface queue failed (no such queue, queue taken by
    /// another AF_XDP socket, interface gone, ...).
    #[error("binding to {ifname} queue {queue} in copy mode failed: {source}; {hint}")]
    Bind {
        /// The interface.
        ifname: String,
        /// The queue id.
        queue: u32,
        /// The OS error.
        source: io::Error,
        /// The likely cause for the errno, or "see dmesg".
        hint: String,
    },
}

/// Sizes of the four rings of a socket, in entries; each must be a power of
/// two (>= 2). Default: 2048 each.
///
/// RX and fill bound how many received frames can wait for the application;
/// TX bounds how many frames one flush can queue (and is the default
/// [`XDP_MAX_TX_SKB_BUDGET`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct RingSizes {
    /// Fill ring: frames given to the kernel to receive into.
    pub fill: u32,
    /// Completion ring: sent frames the kernel hands back.
    pub comp: u32,
    /// RX ring: received frames.
    pub rx: u32,
    /// TX ring: frames to send.
    pub tx: u32,
}

impl Default for RingSizes {
    fn default() -> Self {
        RingSizes { fill: 2048, comp: 2048, rx: 2048, tx: 2048 }
    }
}

impl RingSizes {
    /// Rings sized for bursts around an RX ring of `rx` and a TX ring of `tx`
    /// entries (powers of two): the fill ring twice the RX ring (xdpsock's
    /// rule, fill >= device RX ring + AF_XDP RX ring: a burst can fill the RX
    /// ring while as many frames again wait in the fill ring for the next
    /// one), the completion ring as large as the TX ring.
    pub fn for_bursts(rx: u32, tx: u32) -> RingSizes {
        RingSizes { fill: rx.saturating_mul(2), comp: tx, rx, tx }
    }

    /// UMEM frames these rings need so that the fill ring can be full while
    /// the RX ring is full, a TX ring's worth of frames is in flight and the
    /// application holds `held` more (a receive batch, frames being built):
    /// `fill + rx + tx + held`. With fewer, the fill ring runs short exactly
    /// when a burst has filled the RX ring.
    pub fn frames_needed(&self, held: u32) -> u32 {
        self.fill.saturating_add(self.rx).saturating_add(self.tx).saturating_add(held)
    }

    /// Bytes the four rings map (descriptors only: fill and completion hold
    /// 8-byte addresses, RX and TX 16-byte descriptors).
    pub fn ring_bytes(&self) -> u64 {
        8 * (u64::from(self.fill) + u64::from(self.comp)) + 16 * (u64::from(self.rx) + u64::from(self.tx))
    }
}

/// The TX reserve of a port: frames kept off the fill ring so that TX never
/// starves. A TX ring's worth, but never more than half the UMEM (a small
/// UMEM still receives). Frames already in flight for TX count towards it
/// ([`fill_spare`]).
pub fn tx_reserve(rings: &RingSizes, frames: u32) -> u32 {
    rings.tx.min(frames / 2)
}

/// How many free frames a refill may hand to the fill ring: those above
/// what the TX reserve still lacks. `tx_in_flight` frames handed to TX
/// (not yet completed) already count towards the reserve, so a busy TX side
/// does not take frames away from the fill ring twice.
pub fn fill_spare(free: u32, tx_reserve: u32, tx_in_flight: u32) -> u32 {
    free.saturating_sub(tx_reserve.saturating_sub(tx_in_flight))
}

/// The four rings of one socket, mapped; returned by [`XskSocket::setup`].
///
/// Opaque outside the crate (only a [`crate::port::Port`] drives rings);
/// dropping it unmaps them.
pub struct Rings {
    pub(crate) fill: Producer<u64>,
    pub(crate) comp: Consumer<u64>,
    pub(crate) rx: Consumer<XdpDesc>,
    pub(crate) tx: Producer<XdpDesc>,
}

/// An AF_XDP socket (closed on drop). The crate takes it through
/// [`new`](Self::new), [`setup`](Self::setup) (UMEM and rings), the socket options, and
/// a copy-mode bind; outside the crate it serves to probe the kernel's
/// `SOL_XDP` options on an unbound socket.
#[derive(Debug)]
pub struct XskSocket {
    fd: OwnedFd,
}

impl XskSocket {
    /// Creates an AF_XDP socket (`SOCK_RAW | SOCK_CLOEXEC`).
    ///
    /// # Errors
    /// [`SocketError::Create`]: no privileges, or no AF_XDP in this kernel.
    pub fn new() -> Result<XskSocket, SocketError> {
        // SAFETY: plain syscall; the returned fd is checked and then owned.
        let fd = unsafe { libc::socket(AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(SocketError::Create(io::Error::last_os_error()));
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        Ok(XskSocket { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Registers `umem` and creates and maps the four rings.
    ///
    /// The kernel keeps a reference to the UMEM memory: `umem` must outlive
    /// the socket (a port owns both).
    ///
    /// # Errors
    /// [`SocketError::Setup`] for a ring size that is not a power of two or a
    /// refused ring option or mapping; [`SocketError::UmemReg`] if the UMEM
    /// cannot be registered (pinned-memory limit, bad frame size).
    pub fn setup(&self, umem: &Umem, sizes: RingSizes) -> Result<Rings, SocketError> {
        self.setup_with(umem, sizes, false).map(|(r, _)| r)
    }

    /// As [`setup`](Self::setup); with `tx_metadata`, the UMEM is registered
    /// with [`TX_METADATA_LEN`] bytes of TX metadata in front of every TX
    /// frame's data (`XDP_UMEM_TX_METADATA_LEN`, Linux 6.8+), which TX
    /// checksum offload needs. Returns whether the kernel took it: one that
    /// refuses the flag (`EINVAL`) gets the UMEM registered without.
    pub(crate) fn setup_with(&self, umem: &Umem, sizes: RingSizes, tx_metadata: bool) -> Result<(Rings, bool), SocketError> {
        for (n, name) in [(sizes.fill, "fill"), (sizes.comp, "completion"), (sizes.rx, "rx"), (sizes.tx, "tx")] {
            if !n.is_power_of_two() || n < 2 {
                return Err(SocketError::Setup {
                    what: name,
                    source: io::Error::new(io::ErrorKind::InvalidInput, format!("ring size {n} is not a power of two")),
                });
            }
        }
        let reg = XdpUmemReg {
            addr: umem.area_ptr() as u64,
            len: umem.area_len() as u64,
            chunk_size: umem.frame_size(),
            headroom: umem.config().headroom,
            flags: 0,
            tx_metadata_len: 0,
        };
        let mut with_md = false;
        if tx_metadata {
            let mut md = reg;
            md.flags = XDP_UMEM_TX_METADATA_LEN;
            md.tx_metadata_len = TX_METADATA_LEN;
            // A kernel before 6.8 refuses the flag; any other error the
            // plain registration below reports.
            with_md = setsockopt(self.fd.as_fd(), SOL_XDP, XDP_UMEM_REG, &md).is_ok();
        }
        let registered = if with_md { Ok(()) } else { setsockopt(self.fd.as_fd(), SOL_XDP, XDP_UMEM_REG, &reg) };
        registered.map_err(|e| SocketError::UmemReg {
            bytes: umem.area_len(),
            // The kernel answers ENOBUFS when the pages exceed RLIMIT_MEMLOCK (no CAP_IPC_LOCK).
            hint: if matches!(e.raw_os_error(), Some(libc::ENOMEM | libc::EPERM | libc::ENOBUFS)) {
                "the UMEM is pinned memory: it needs CAP_IPC_LOCK or a memlock limit (RLIMIT_MEMLOCK: ulimit -l, \
                 systemd LimitMEMLOCK=) that holds it"
            } else {
                "check frame size (2048 or 4096) and that the area is page aligned"
            },
            source: e,
        })?;
        let opt = |what, o, n: u32| setsockopt(self.fd.as_fd(), SOL_XDP, o, &n).map_err(|source| SocketError::Setup { what, source });
        opt("setting the fill ring size", XDP_UMEM_FILL_RING, sizes.fill)?;
        opt("setting the completion ring size", XDP_UMEM_COMPLETION_RING, sizes.comp)?;
        opt("setting the rx ring size", XDP_RX_RING, sizes.rx)?;
        opt("setting the tx ring size", XDP_TX_RING, sizes.tx)?;
        let (off, _) = getsockopt::<XdpMmapOffsets>(self.fd.as_fd(), SOL_XDP, XDP_MMAP_OFFSETS)
            .map_err(|source| SocketError::Setup { what: "reading ring offsets", source })?;
        let map = |what, o: &XdpRingOffset, n: u32, elem: usize, pgoff| {
            Mmap::ring(self.fd.as_fd(), o.desc as usize + n as usize * elem, pgoff)
                .map_err(|source| SocketError::Setup { what, source })
        };
        let fill = map("mapping the fill ring", &off.fr, sizes.fill, 8, XDP_UMEM_PGOFF_FILL_RING)?;
        let comp = map("mapping the completion ring", &off.cr, sizes.comp, 8, XDP_UMEM_PGOFF_COMPLETION_RING)?;
        let rx = map("mapping the rx ring", &off.rx, sizes.rx, 16, XDP_PGOFF_RX_RING)?;
        let tx = map("mapping the tx ring", &off.tx, sizes.tx, 16, XDP_PGOFF_TX_RING)?;
        let rings = Rings {
            fill: Producer::new(fill, &off.fr, sizes.fill),
            comp: Consumer::new(comp, &off.cr, sizes.comp),
            rx: Consumer::new(rx, &off.rx, sizes.rx),
            tx: Producer::new(tx, &off.tx, sizes.tx),
        };
        Ok((rings, with_md))
    }

    /// Binds in copy mode with need_wakeup. Never zero-copy. A queue that is busy is retried
    /// for up to [`BIND_BUSY_WAIT`], see below.
    pub(crate) fn bind(&self, ifname: &str, ifindex: u32, queue: u32) -> Result<(), SocketError> {
        let sa = SockaddrXdp {
            sxdp_family: AF_XDP as u16,
            sxdp_flags: XDP_COPY | XDP_USE_NEED_WAKEUP,
            sxdp_ifindex: ifindex,
            sxdp_queue_id: queue,
            sxdp_shared_umem_fd: 0,
        };
        // A socket closed moments ago still holds the queue: the kernel releases its buffer
        // pool from a workqueue that takes rtnl_lock (`xp_put_pool` -> `xp_release_deferred`),
        // so a restart right after an exit, with other work holding rtnl, can find the queue
        // busy for a while. Only a holder that stays past BIND_BUSY_WAIT is another socket.
        let start = std::time::Instant::now();
        let e = loop {
            // SAFETY: `sa` is a valid sockaddr_xdp and we pass its exact size.
            let r = unsafe {
                libc::bind(
                    self.fd.as_raw_fd(),
                    (&sa as *const SockaddrXdp).cast(),
                    size_of::<SockaddrXdp>() as libc::socklen_t,
                )
            };
            if r == 0 {
                if start.elapsed() > BIND_RETRY_STEP {
                    tracing::debug!(ifname, queue, waited = ?start.elapsed(), "bound once the queue's previous socket was released");
                }
                return Ok(());
            }
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EBUSY) || start.elapsed() >= BIND_BUSY_WAIT {
                break e;
            }
            std::thread::sleep(BIND_RETRY_STEP);
        };
        let hint = match e.raw_os_error() {
            Some(libc::EINVAL) => format!("does {ifname} have a queue {queue}? (ethtool -l {ifname})"),
            Some(libc::EBUSY) => format!(
                "another AF_XDP socket is bound to {ifname} queue {queue} (still, after {} ms)",
                BIND_BUSY_WAIT.as_millis()
            ),
            Some(libc::ENODEV) => format!("interface {ifname} vanished"),
            _ => "see dmesg".to_string(),
        };
        Err(SocketError::Bind { ifname: ifname.to_string(), queue, source: e, hint })
    }

    pub(crate) fn statistics(&self) -> io::Result<XdpStatistics> {
        getsockopt::<XdpStatistics>(self.fd.as_fd(), SOL_XDP, XDP_STATISTICS).map(|(s, _)| s)
    }

    /// True if the kernel bound this socket zero-copy (it must not: we ask for copy).
    pub(crate) fn is_zerocopy(&self) -> io::Result<bool> {
        getsockopt::<XdpOptions>(self.fd.as_fd(), SOL_XDP, XDP_OPTIONS).map(|(o, _)| o.flags & XDP_OPTIONS_ZEROCOPY != 0)
    }

    /// Sets a `u32` `SOL_XDP` option, e.g. [`XDP_MAX_TX_SKB_BUDGET`] or
    /// [`XDP_GENERIC_XMIT_BATCH`]. The port sets them after
    /// [`setup`](Self::setup) (both are bounded by the TX ring) and before
    /// binding.
    ///
    /// # Errors
    /// The OS error: `ENOPROTOOPT` when the kernel does not know the option,
    /// another errno for a value it refuses.
    pub fn set_xdp_u32(&self, opt: i32, v: u32) -> io::Result<()> {
        setsockopt(self.fd.as_fd(), SOL_XDP, opt, &v)
    }

    /// Reads a `u32` `SOL_XDP` option back ([`XDP_GENERIC_XMIT_BATCH`] has a
    /// getsockopt; [`XDP_MAX_TX_SKB_BUDGET`] has none and fails).
    ///
    /// # Errors
    /// The OS error, e.g. `ENOPROTOOPT`.
    pub fn get_xdp_u32(&self, opt: i32) -> io::Result<u32> {
        getsockopt::<u32>(self.fd.as_fd(), SOL_XDP, opt).map(|(v, _)| v)
    }

    /// Sets an int `SOL_SOCKET` option (`SO_BUSY_POLL`, `SO_PREFER_BUSY_POLL`, ...).
    pub fn set_sock_int(&self, opt: i32, v: i32) -> io::Result<()> {
        setsockopt(self.fd.as_fd(), libc::SOL_SOCKET, opt, &v)
    }

    /// Tells the kernel to transmit what is in the TX ring (copy mode sends
    /// in the context of this call, up to the TX budget).
    #[inline]
    pub(crate) fn kick_tx(&self) -> io::Result<()> {
        // SAFETY: a zero-length sendto with no address touches no user memory.
        let r = unsafe { libc::sendto(self.fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT, std::ptr::null(), 0) };
        if r >= 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Waits with poll(2) until this socket's RX ring has frames, `extra`
    /// is readable, or `timeout_ms` passes (-1: no limit). Returns
    /// (socket readable, `extra` readable). In copy mode with need_wakeup
    /// the kernel's `xsk_poll` also transmits what is in the TX ring before
    /// it sleeps: the wait doubles as the TX kick.
    pub(crate) fn wait_readable(
        &self,
        extra: Option<BorrowedFd<'_>>,
        timeout_ms: i32,
    ) -> io::Result<(bool, bool)> {
        let mut fds = [
            libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: extra.map_or(-1, |f| f.as_raw_fd()), events: libc::POLLIN, revents: 0 },
        ];
        let n = if extra.is_some() { 2 } else { 1 };
        // SAFETY: `fds` is a live array of two pollfd and `n` is at most its length.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), n, timeout_ms) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((fds[0].revents != 0, fds[1].revents != 0))
    }

    /// Wakes the RX side (fill-ring need_wakeup, or busy polling).
    #[inline]
    pub(crate) fn kick_rx(&self) -> io::Result<()> {
        // SAFETY: a zero-length recvfrom with no buffer writes no user memory.
        let r = unsafe {
            libc::recvfrom(self.fd.as_raw_fd(), std::ptr::null_mut(), 0, libc::MSG_DONTWAIT, std::ptr::null_mut(), std::ptr::null_mut())
        };
        if r >= 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

impl AsFd for XskSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for XskSocket {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod sizing_tests {
    use super::{fill_spare, tx_reserve, RingSizes};

    #[test]
    fn bursts_get_a_fill_ring_twice_the_rx_ring_and_frames_for_every_ring() {
        let r = RingSizes::for_bursts(4096, 2048);
        assert_eq!(r, RingSizes { fill: 8192, comp: 2048, rx: 4096, tx: 2048 });
        assert_eq!(r.frames_needed(256), 8192 + 4096 + 2048 + 256);
        assert_eq!(r.ring_bytes(), 8 * (8192 + 2048) + 16 * (4096 + 2048));
        assert_eq!(RingSizes::for_bursts(u32::MAX, 1).fill, u32::MAX);
        assert_eq!(tx_reserve(&r, 14592), 2048);
        // A small UMEM keeps half its frames for receiving.
        assert_eq!(tx_reserve(&r, 1024), 512);
    }

    #[test]
    fn frames_in_flight_for_tx_count_towards_the_reserve() {
        assert_eq!(fill_spare(10_000, 2048, 0), 10_000 - 2048);
        assert_eq!(fill_spare(10_000, 2048, 1000), 10_000 - 1048);
        assert_eq!(fill_spare(10_000, 2048, 2048), 10_000);
        assert_eq!(fill_spare(10_000, 2048, 5000), 10_000);
        assert_eq!(fill_spare(100, 2048, 0), 0);
    }

    /// A port's frames in a burst, as a model: a stalled stack while `burst`
    /// frames arrive, a TX ring's worth of frames in flight (the SYN-ACKs of
    /// the connections before) and a receive batch in the stack's hands.
    /// Returns the frames the kernel had to drop because the fill ring was
    /// empty (not because the RX ring was full).
    fn fill_empty_drops(rings: RingSizes, frames: u32, held: u32, burst: u32, old_refill: bool) -> u32 {
        let reserve = tx_reserve(&rings, frames);
        let (mut free, mut fill, mut rx, mut tx) = (frames, 0u32, 0u32, 0u32);
        let refill = |free: &mut u32, fill: &mut u32, tx: u32| {
            let spare = if old_refill { free.saturating_sub(reserve) } else { fill_spare(*free, reserve, tx) };
            let n = spare.min(rings.fill - *fill);
            *free -= n;
            *fill += n;
        };
        // TX has a ring's worth in flight, the stack holds a batch; the
        // fill ring is topped up as every receive call does.
        let sent = rings.tx.min(free);
        free -= sent;
        tx += sent;
        let h = held.min(free);
        free -= h;
        refill(&mut free, &mut fill, tx);
        let mut dropped_empty = 0;
        for _ in 0..burst {
            if rx == rings.rx {
                continue; // RX ring full: not the fill ring's fault
            }
            if fill == 0 {
                dropped_empty += 1;
                continue;
            }
            fill -= 1;
            rx += 1;
        }
        dropped_empty
    }

    #[test]
    fn a_burst_that_fits_the_rx_ring_never_meets_an_empty_fill_ring() {
        for rx in [256u32, 4096, 16384] {
            let rings = RingSizes::for_bursts(rx, rx);
            let frames = rings.frames_needed(256);
            assert_eq!(fill_empty_drops(rings, frames, 256, rx, false), 0, "rx {rx}");
            assert_eq!(fill_empty_drops(rings, frames, 256, 3 * rx, false), 0, "rx {rx}");
        }
        // A naive sizing (rings all r, frames 2r, the whole reserve kept
        // whatever TX has in flight): the same burst finds the fill ring
        // empty long before the RX ring is full.
        let old = RingSizes { fill: 16384, comp: 16384, rx: 16384, tx: 16384 };
        let lost = fill_empty_drops(old, 2 * 16384, 256, 16384, true);
        assert!(lost > 0, "the naive sizing loses frames ({lost})");
        // The refill's rule alone (frames in flight count towards the
        // reserve) helps the naive sizing, but does not make it whole.
        assert!(fill_empty_drops(old, 2 * 16384, 256, 16384, false) < lost);
    }
}
