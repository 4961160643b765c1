//! The AF_XDP socket: creation, UMEM registration, ring setup, copy-mode
//! bind, and the kernel knobs (probed once, reported).
//!
//! A [`crate::port::Port`] is built from these pieces by
//! [`crate::iface::Iface`]; what is public here is what a user needs to name
//! ([`RingSizes`], [`SocketError`]) and enough of [`XskSocket`] to probe which
//! `SOL_XDP` options the running kernel has, without binding anything.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::mmap::Mmap;
use crate::ring::{Consumer, Producer};
use crate::sys::*;
use crate::umem::Umem;

/// Why creating, setting up or binding an AF_XDP socket failed. Each variant
/// carries the OS error and, where one is likely, what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    /// `socket(AF_XDP)` failed: missing privileges (`EPERM`) or a kernel
    /// without `CONFIG_XDP_SOCKETS` (`EAFNOSUPPORT`).
    #[error("creating an AF_XDP socket failed: {0} (needs root or CAP_NET_RAW + CAP_BPF; kernel needs CONFIG_XDP_SOCKETS)")]
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
#[derive(Clone, Copy, Debug, serde::Serialize)]
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
/// [`new`](Self::new), [`setup`](Self::setup) (UMEM and rings), the knobs, and
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
            hint: if e.raw_os_error() == Some(libc::ENOMEM) || e.raw_os_error() == Some(libc::EPERM) {
                "the UMEM is pinned memory: it needs CAP_IPC_LOCK or a larger RLIMIT_MEMLOCK (ulimit -l)"
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

    /// Binds in copy mode with need_wakeup. Never zero-copy.
    pub(crate) fn bind(&self, ifname: &str, ifindex: u32, queue: u32) -> Result<(), SocketError> {
        let sa = SockaddrXdp {
            sxdp_family: AF_XDP as u16,
            sxdp_flags: XDP_COPY | XDP_USE_NEED_WAKEUP,
            sxdp_ifindex: ifindex,
            sxdp_queue_id: queue,
            sxdp_shared_umem_fd: 0,
        };
        // SAFETY: `sa` is a valid sockaddr_xdp and we pass its exact size.
        let r = unsafe {
            libc::bind(
                self.fd.as_raw_fd(),
                (&sa as *const SockaddrXdp).cast(),
                size_of::<SockaddrXdp>() as libc::socklen_t,
            )
        };
        if r == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        let hint = match e.raw_os_error() {
            Some(libc::EINVAL) => format!("does {ifname} have a queue {queue}? (ethtool -l {ifname})"),
            Some(libc::EBUSY) => format!("another AF_XDP socket is bound to {ifname} queue {queue}"),
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

    /// Sets an int SOL_SOCKET option (busy polling).
    pub(crate) fn set_sock_int(&self, opt: i32, v: i32) -> io::Result<()> {
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

    /// Waits with poll(2) until this socket's RX ring has frames, `also`
    /// is readable, or `timeout_ms` passes (-1: no limit). Returns
    /// (socket readable, `also` readable). In copy mode with need_wakeup
    /// the kernel's `xsk_poll` also transmits what is in the TX ring before
    /// it sleeps: the wait doubles as the TX kick.
    pub(crate) fn wait_readable(&self, also: Option<BorrowedFd<'_>>, timeout_ms: i32) -> io::Result<(bool, bool)> {
        let mut fds = [
            libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: also.map_or(-1, |f| f.as_raw_fd()), events: libc::POLLIN, revents: 0 },
        ];
        let n = if also.is_some() { 2 } else { 1 };
        // SAFETY: `fds` is a live array of two pollfd and `n` is at most its
        // length.
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
