//! The kernel's busy polling for [`KernelTransport`](super::KernelTransport): per-socket
//! options and the per-epoll parameters (`EPIOCSPARAMS`), what was applied, and the fallback.
//!
//! Two places take the same three settings (poll time, NAPI budget, prefer busy polling):
//! - each socket: `SO_BUSY_POLL`, `SO_BUSY_POLL_BUDGET`, `SO_PREFER_BUSY_POLL`. They drive the
//!   single busy-poll pass a non-blocking `recv` makes on an empty queue. Raising any of them
//!   above the socket's current value needs CAP_NET_ADMIN (the kernel answers EPERM).
//! - the epoll instance: `struct epoll_params` through the `EPIOCSPARAMS` ioctl (Linux 6.9+).
//!   This is what makes `epoll_wait` itself busy-poll the sockets' NAPI instance, and the only
//!   way to give `epoll_wait` `prefer_busy_poll`, which IRQ suspension needs
//!   (Documentation/networking/napi.rst, "IRQ suspension", step 3). It needs no privilege
//!   unless the budget exceeds `NAPI_POLL_WEIGHT` (64).
//!
//! Policy: the ioctl is tried once, when the transport is made. If the kernel refuses it
//! (ENOTTY: no such ioctl before 6.9; EPERM: budget above 64 without CAP_NET_ADMIN; EINVAL: a
//! value out of range) the transport falls back to the socket options alone and warns once per
//! process. Socket options are then the only busy polling left, so a socket option the kernel
//! refuses is an error (as with the plain
//! [`KernelConfig::busy_poll`](super::KernelConfig::busy_poll)). While the epoll parameters are in force, a refused socket option is recorded
//! in the report, warned about once, and not tried again (an unprivileged process gets epoll
//! busy polling but not the socket options). An option the kernel does not know
//! (ENOPROTOOPT, before 5.11) is recorded and skipped either way.

use std::fmt;
use std::io;
use std::mem;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::sockets::set_int_opt;

/// `SO_BUSY_POLL` from asm-generic/socket.h (x86_64, aarch64, riscv). `libc` does not export
/// it for linux-gnu.
pub(super) const SO_BUSY_POLL: libc::c_int = 46;
/// `SO_PREFER_BUSY_POLL` from asm-generic/socket.h (Linux 5.11+).
pub(super) const SO_PREFER_BUSY_POLL: libc::c_int = 69;
/// `SO_BUSY_POLL_BUDGET` from asm-generic/socket.h (Linux 5.11+).
pub(super) const SO_BUSY_POLL_BUDGET: libc::c_int = 70;

/// `BUSY_POLL_BUDGET` in include/net/busy_poll.h: the NAPI budget of a busy-poll pass when none
/// is set.
pub const DEFAULT_BUSY_POLL_BUDGET: u16 = 8;
/// `NAPI_POLL_WEIGHT`: an epoll budget above it needs CAP_NET_ADMIN.
pub const UNPRIVILEGED_MAX_BUDGET: u16 = 64;

/// The kernel's busy polling for every socket and the epoll instance of a
/// [`KernelTransport`](super::KernelTransport) (see
/// [`KernelConfig::with_busy`](super::KernelConfig::with_busy)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelBusyPoll {
    /// How long one busy-poll pass may spin, in microseconds (`SO_BUSY_POLL`,
    /// `epoll_params.busy_poll_usecs`). 0: a single pass, no spinning.
    pub usecs: u32,
    /// NAPI budget of a busy-poll pass (`SO_BUSY_POLL_BUDGET`, `epoll_params.busy_poll_budget`);
    /// 0 leaves the kernel's default, [`DEFAULT_BUSY_POLL_BUDGET`].
    pub budget: u16,
    /// `SO_PREFER_BUSY_POLL` and `epoll_params.prefer_busy_poll`: the application pledges to
    /// poll, so the kernel keeps the device's IRQs masked while it does (with the interface's
    /// `napi_defer_hard_irqs` and `gro_flush_timeout` set; see [`crate::napi`]).
    pub prefer: bool,
}

impl KernelBusyPoll {
    /// Busy polling for `usecs` with the kernel's default budget, without preferring it:
    /// what `SO_BUSY_POLL` alone gives, plus the same on the epoll instance.
    pub const fn new(usecs: u32) -> Self {
        KernelBusyPoll { usecs, budget: DEFAULT_BUSY_POLL_BUDGET, prefer: false }
    }

    /// The epoll side of IRQ suspension as the kernel's own test of it drives epoll
    /// (tools/testing/selftests/net/busy_poll_test.sh, by the mechanism's authors:
    /// `BUSY_POLL_USECS=0`, `BUSY_POLL_BUDGET=16`, `PREFER_BUSY_POLL=1`). With
    /// `prefer_busy_poll` set, `epoll_wait` makes one busy-poll pass even with 0 µs (Linux
    /// 6.13+). Pair it with [`crate::napi::NapiSettings::irq_suspension`] on the interface.
    pub const fn irq_suspension() -> Self {
        KernelBusyPoll { usecs: 0, budget: 16, prefer: true }
    }

    /// With `budget` set to `v`.
    pub const fn with_budget(mut self, v: u16) -> Self {
        self.budget = v;
        self
    }

    /// With `prefer` set to `v`.
    pub const fn with_prefer(mut self, v: bool) -> Self {
        self.prefer = v;
        self
    }

    fn epoll_params(&self) -> EpollParams {
        EpollParams {
            busy_poll_usecs: self.usecs,
            busy_poll_budget: self.budget,
            prefer_busy_poll: self.prefer as u8,
            pad: 0,
        }
    }
}

impl fmt::Display for KernelBusyPoll {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} us, budget {}, prefer {}", self.usecs, self.budget, if self.prefer { "on" } else { "off" })
    }
}

/// `struct epoll_params` of include/uapi/linux/eventpoll.h (Linux 6.9+), as
/// Documentation/networking/napi.rst tells user programs to define it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EpollParams {
    /// Busy-poll time of `epoll_wait`, in microseconds (at most `i32::MAX`).
    pub busy_poll_usecs: u32,
    /// NAPI budget of a pass (0: the kernel's default, 8).
    pub busy_poll_budget: u16,
    /// 0 or 1.
    pub prefer_busy_poll: u8,
    /// Pads the struct to 64 bits; must be zero.
    pub pad: u8,
}

/// `_IOC` of include/uapi/asm-generic/ioctl.h, with the direction bits and widths of the
/// architectures that do not use the generic ones (asm/ioctl.h of powerpc, mips, sparc).
const fn ioc(dir: u32, ty: u32, nr: u32, size: usize) -> u32 {
    #[cfg(any(target_arch = "powerpc", target_arch = "powerpc64", target_arch = "mips", target_arch = "mips64", target_arch = "sparc", target_arch = "sparc64"))]
    const SIZE_BITS: u32 = 13;
    #[cfg(not(any(target_arch = "powerpc", target_arch = "powerpc64", target_arch = "mips", target_arch = "mips64", target_arch = "sparc", target_arch = "sparc64")))]
    const SIZE_BITS: u32 = 14;
    (dir << (16 + SIZE_BITS)) | ((size as u32) << 16) | (ty << 8) | nr
}

#[cfg(any(target_arch = "powerpc", target_arch = "powerpc64", target_arch = "mips", target_arch = "mips64", target_arch = "sparc", target_arch = "sparc64"))]
const IOC_WRITE: u32 = 4;
#[cfg(any(target_arch = "powerpc", target_arch = "powerpc64", target_arch = "mips", target_arch = "mips64", target_arch = "sparc", target_arch = "sparc64"))]
const IOC_READ: u32 = 2;
#[cfg(not(any(target_arch = "powerpc", target_arch = "powerpc64", target_arch = "mips", target_arch = "mips64", target_arch = "sparc", target_arch = "sparc64")))]
const IOC_WRITE: u32 = 1;
#[cfg(not(any(target_arch = "powerpc", target_arch = "powerpc64", target_arch = "mips", target_arch = "mips64", target_arch = "sparc", target_arch = "sparc64")))]
const IOC_READ: u32 = 2;

/// `EPOLL_IOC_TYPE` of include/uapi/linux/eventpoll.h.
const EPOLL_IOC_TYPE: u32 = 0x8A;
/// `_IOW(EPOLL_IOC_TYPE, 0x01, struct epoll_params)`.
pub(super) const EPIOCSPARAMS: u32 = ioc(IOC_WRITE, EPOLL_IOC_TYPE, 0x01, mem::size_of::<EpollParams>());
/// `_IOR(EPOLL_IOC_TYPE, 0x02, struct epoll_params)`.
pub(super) const EPIOCGPARAMS: u32 = ioc(IOC_READ, EPOLL_IOC_TYPE, 0x02, mem::size_of::<EpollParams>());

/// `EPIOCSPARAMS` on `epfd`.
pub(super) fn set_epoll_params(epfd: RawFd, p: &EpollParams) -> io::Result<()> {
    // SAFETY: the ioctl reads size_of::<EpollParams>() bytes (the size encoded in the request)
    // from `p`, a live #[repr(C)] struct of that size; the kernel checks the fd's type.
    let rc = unsafe { libc::ioctl(epfd, EPIOCSPARAMS as _, p as *const EpollParams) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `EPIOCGPARAMS` on `epfd`.
pub(super) fn get_epoll_params(epfd: RawFd) -> io::Result<EpollParams> {
    let mut p = EpollParams::default();
    // SAFETY: the ioctl writes size_of::<EpollParams>() bytes (the size encoded in the request)
    // into `p`, a live, exclusively borrowed #[repr(C)] struct of that size.
    let rc = unsafe { libc::ioctl(epfd, EPIOCGPARAMS as _, &mut p as *mut EpollParams) };
    if rc == 0 {
        Ok(p)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// What became of the per-epoll parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EpollBusy {
    /// No busy setting with epoll parameters was asked for (none, or the plain
    /// [`KernelConfig::busy_poll`](super::KernelConfig::busy_poll)).
    NotRequested,
    /// `EPIOCSPARAMS` took them; the values are read back with `EPIOCGPARAMS`.
    Applied(EpollParams),
    /// The kernel refused `EPIOCSPARAMS` with this errno; the sockets' options are the busy
    /// polling left. [`EpollBusy::reason`] says why.
    Fallback {
        /// The errno of the ioctl.
        errno: i32,
    },
}

impl EpollBusy {
    /// For [`EpollBusy::Fallback`]: what the errno means here and what to do about it.
    pub fn reason(&self) -> Option<&'static str> {
        let EpollBusy::Fallback { errno } = *self else { return None };
        Some(match errno {
            libc::ENOTTY => "the kernel has no EPIOCSPARAMS (it needs Linux 6.9+)",
            libc::EPERM => "a budget above 64 needs CAP_NET_ADMIN: run as root or lower the budget",
            libc::EINVAL => "a value out of range (busy_poll_usecs above i32::MAX)",
            _ => "the kernel refused EPIOCSPARAMS",
        })
    }
}

/// What became of the per-socket options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SocketBusy {
    /// No busy polling asked for.
    NotRequested,
    /// Asked for; no socket made yet.
    Pending,
    /// Every option is set on every socket so far.
    Applied,
    /// The kernel refused `option` with `errno` (EPERM: raising it needs CAP_NET_ADMIN;
    /// ENOPROTOOPT: it does not know it). Later sockets do not get it; they get the other options.
    Refused {
        /// The option's name, e.g. `"SO_PREFER_BUSY_POLL"`.
        option: &'static str,
        /// The errno of setsockopt.
        errno: i32,
    },
}

/// What busy polling a [`KernelTransport`](super::KernelTransport) has:
/// [`KernelTransport::busy_report`](super::KernelTransport::busy_report). Its `Display` is one
/// line for a tool to print.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BusyReport {
    /// The full setting asked for ([`KernelConfig::busy`](super::KernelConfig::busy)).
    pub requested: Option<KernelBusyPoll>,
    /// The plain `SO_BUSY_POLL` asked for ([`KernelConfig::busy_poll`](super::KernelConfig::busy_poll)),
    /// when `requested` is `None`.
    pub plain_usecs: Option<u32>,
    /// The epoll instance's parameters.
    pub epoll: EpollBusy,
    /// The sockets' options.
    pub sockets: SocketBusy,
}

impl fmt::Display for BusyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.requested, self.plain_usecs) {
            (Some(b), _) => write!(f, "busy poll {b}")?,
            (None, Some(us)) => write!(f, "busy poll {us} us (SO_BUSY_POLL only)")?,
            (None, None) => return f.write_str("busy poll off"),
        }
        match self.epoll {
            EpollBusy::NotRequested => {}
            EpollBusy::Applied(p) => write!(
                f,
                "; epoll: EPIOCSPARAMS {} us, budget {}, prefer {}",
                p.busy_poll_usecs, p.busy_poll_budget, p.prefer_busy_poll
            )?,
            EpollBusy::Fallback { errno } => write!(
                f,
                "; epoll: not applied ({}: {}), socket options only",
                io::Error::from_raw_os_error(errno),
                self.epoll.reason().unwrap_or_default()
            )?,
        }
        match self.sockets {
            SocketBusy::NotRequested => Ok(()),
            SocketBusy::Pending => f.write_str("; sockets: none yet"),
            SocketBusy::Applied => f.write_str("; sockets: options set"),
            SocketBusy::Refused { option, errno } => {
                write!(f, "; sockets: {option} refused ({}), the others set", io::Error::from_raw_os_error(errno))
            }
        }
    }
}

static WARNED_EPOLL: AtomicBool = AtomicBool::new(false);
static WARNED_SOCKET: AtomicBool = AtomicBool::new(false);

/// One warning per process for each kind (many transports, one per thread, share a cause).
fn warn_once(flag: &AtomicBool, f: impl FnOnce()) {
    if !flag.swap(true, Ordering::Relaxed) {
        f();
    }
}

/// A transport's busy polling: the report and the socket options still to set.
#[derive(Debug)]
pub(super) struct BusyState {
    report: BusyReport,
    /// (level SOL_SOCKET) option, value, name: set on every new socket.
    opts: Vec<(libc::c_int, libc::c_int, &'static str)>,
}

impl BusyState {
    /// Applies the epoll parameters to `epfd` (if `busy` asks for them) and prepares the
    /// socket options.
    pub(super) fn new(epfd: RawFd, busy: Option<KernelBusyPoll>, plain_usecs: Option<u32>) -> Self {
        let usecs = |us: u32| us.min(i32::MAX as u32) as libc::c_int;
        let Some(b) = busy else {
            let opts = plain_usecs.map(|us| vec![(SO_BUSY_POLL, usecs(us), "SO_BUSY_POLL")]).unwrap_or_default();
            let sockets = if plain_usecs.is_some() { SocketBusy::Pending } else { SocketBusy::NotRequested };
            let report = BusyReport { requested: None, plain_usecs, epoll: EpollBusy::NotRequested, sockets };
            return BusyState { report, opts };
        };
        let epoll = apply_epoll(epfd, &b.epoll_params());
        if let EpollBusy::Fallback { errno } = epoll {
            let reason = epoll.reason().unwrap_or_default();
            warn_once(&WARNED_EPOLL, || {
                tracing::warn!(
                    error = %io::Error::from_raw_os_error(errno),
                    reason,
                    "epoll busy-poll parameters (EPIOCSPARAMS) not applied: busy polling through the socket options only"
                )
            });
        }
        let opts = vec![
            (SO_BUSY_POLL, usecs(b.usecs), "SO_BUSY_POLL"),
            (SO_BUSY_POLL_BUDGET, libc::c_int::from(b.budget), "SO_BUSY_POLL_BUDGET"),
            (SO_PREFER_BUSY_POLL, libc::c_int::from(b.prefer), "SO_PREFER_BUSY_POLL"),
        ];
        let report = BusyReport { requested: Some(b), plain_usecs, epoll, sockets: SocketBusy::Pending };
        BusyState { report, opts }
    }

    pub(super) fn report(&self) -> &BusyReport {
        &self.report
    }

    /// Sets the busy options on a new socket. An error is fatal only while the socket options
    /// are the only busy polling (see the module docs).
    pub(super) fn configure(&mut self, fd: RawFd) -> io::Result<()> {
        if self.opts.is_empty() {
            return Ok(());
        }
        let epoll_on = matches!(self.report.epoll, EpollBusy::Applied(_));
        let mut i = 0;
        while i < self.opts.len() {
            let (name, value, label) = self.opts[i];
            match set_int_opt(fd, libc::SOL_SOCKET, name, value) {
                Ok(()) => i += 1,
                Err(e) => {
                    let errno = e.raw_os_error().unwrap_or(0);
                    let unknown = errno == libc::ENOPROTOOPT && name != SO_BUSY_POLL;
                    if !epoll_on && !unknown {
                        if errno == libc::EPERM {
                            warn_once(&WARNED_SOCKET, || {
                                tracing::warn!(option = label, "raising a busy-poll socket option needs CAP_NET_ADMIN: run as root, or use epoll parameters (Linux 6.9+, budget at most 64)")
                            });
                        }
                        return Err(e);
                    }
                    warn_once(&WARNED_SOCKET, || {
                        tracing::warn!(option = label, error = %e, "busy-poll socket option refused; not set on further sockets")
                    });
                    self.report.sockets = SocketBusy::Refused { option: label, errno };
                    self.opts.remove(i);
                }
            }
        }
        if self.report.sockets == SocketBusy::Pending {
            self.report.sockets = SocketBusy::Applied;
        }
        Ok(())
    }
}

/// `EPIOCSPARAMS`, then `EPIOCGPARAMS` to report what the kernel holds.
pub(super) fn apply_epoll(epfd: RawFd, p: &EpollParams) -> EpollBusy {
    match set_epoll_params(epfd, p) {
        Ok(()) => EpollBusy::Applied(get_epoll_params(epfd).unwrap_or(*p)),
        Err(e) => EpollBusy::Fallback { errno: e.raw_os_error().unwrap_or(libc::EINVAL) },
    }
}
