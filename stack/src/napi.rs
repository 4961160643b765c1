//! An interface's NAPI settings for IRQ suspension: read, set, reported, and restored.
//!
//! IRQ suspension (Linux 6.13+, Documentation/networking/napi.rst, "IRQ suspension") keeps a
//! device's interrupts masked while an application's `epoll_wait` keeps finding events, and
//! hands back to deferred interrupts when it finds none. It takes three things on the device
//! and one on the epoll instance:
//!
//! 1. `irq-suspend-timeout` per NAPI instance, the longest the application may keep IRQs
//!    suspended (a safety net should it stall). It has no sysfs file: only generic netlink,
//!    family "netdev", `napi-set` (this module's `genl` file).
//! 2. `napi_defer_hard_irqs` and `gro_flush_timeout` (sysfs, `/sys/class/net/IF/`), which
//!    defer IRQs after busy polling found nothing; napi.rst: "their use is strongly
//!    recommended", or "setting irq-suspend-timeout might not have any discernible effect".
//! 3. `prefer_busy_poll` on the epoll instance ([`crate::kernel::KernelBusyPoll::irq_suspension`]).
//!
//! [`NapiTuning::apply`] sets 1 and 2 on an interface, reports what it set and what the kernel
//! or device lacks (found out, not assumed: a missing sysfs file, a netlink family or command
//! the kernel does not have, a device without NAPI instances such as a veth with neither GRO
//! nor XDP), and puts the original values back when dropped. [`NapiState::read`] only reads.
//!
//! Writing the sysfs files sets every NAPI instance of the device (since 6.13 they are
//! per-instance); restoring writes the device's original value back the same way.
//! Everything needs CAP_NET_ADMIN in the interface's network namespace; reading does not.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

mod genl;
mod sysfs;
use genl::{Attr, GenlSocket, NlError};
use sysfs::IfDir;

/// The netdev family's `NETDEV_CMD_NAPI_GET` (include/uapi/linux/netdev.h).
const NETDEV_CMD_NAPI_GET: u8 = 11;
/// `NETDEV_CMD_NAPI_SET` (Linux 6.13+).
const NETDEV_CMD_NAPI_SET: u8 = 14;
const NETDEV_A_NAPI_IFINDEX: u16 = 1;
const NETDEV_A_NAPI_ID: u16 = 2;
const NETDEV_A_NAPI_DEFER_HARD_IRQS: u16 = 5;
const NETDEV_A_NAPI_GRO_FLUSH_TIMEOUT: u16 = 6;
const NETDEV_A_NAPI_IRQ_SUSPEND_TIMEOUT: u16 = 7;
const NETDEV_FAMILY_VERSION: u8 = 1;

const DEFER_HARD_IRQS: &str = "napi_defer_hard_irqs";
const GRO_FLUSH_TIMEOUT: &str = "gro_flush_timeout";

/// What to set on an interface; `None` leaves a setting alone. [`Default`] is
/// [`NapiSettings::irq_suspension`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NapiSettings {
    /// `napi_defer_hard_irqs`: empty polls before NAPI gives up and re-enables hard IRQs.
    pub defer_hard_irqs: Option<u32>,
    /// `gro_flush_timeout` in nanoseconds: the watchdog timer that reschedules NAPI while
    /// IRQs are deferred.
    pub gro_flush_timeout_ns: Option<u64>,
    /// `irq-suspend-timeout` in nanoseconds, on every NAPI instance of the interface.
    pub irq_suspend_timeout_ns: Option<u64>,
}

impl NapiSettings {
    /// IRQ suspension as its authors run it. napi.rst gives the rules (gro_flush_timeout and
    /// napi_defer_hard_irqs "can be set to low values", irq-suspend-timeout "much larger than
    /// gro_flush_timeout", covering one userland processing cycle); the numbers are the
    /// kernel's own test of the mechanism, tools/testing/selftests/net/busy_poll_test.sh:
    /// `NAPI_DEFER_HARD_IRQS=100`, `GRO_FLUSH_TIMEOUT=50000` (50 µs),
    /// `SUSPEND_TIMEOUT=20000000` (20 ms).
    pub const fn irq_suspension() -> Self {
        NapiSettings {
            defer_hard_irqs: Some(100),
            gro_flush_timeout_ns: Some(50_000),
            irq_suspend_timeout_ns: Some(20_000_000),
        }
    }

    /// Only the sysfs settings of [`Self::irq_suspension`] (IRQ deferral, for kernels or
    /// devices without per-NAPI suspension).
    pub const fn deferral_only() -> Self {
        NapiSettings { irq_suspend_timeout_ns: None, ..Self::irq_suspension() }
    }
}

impl Default for NapiSettings {
    fn default() -> Self {
        Self::irq_suspension()
    }
}

/// What became of one sysfs setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SettingChange {
    /// Not asked for.
    NotRequested,
    /// Written; `now` is read back after the write.
    Applied {
        /// The value before (restored on drop).
        was: u64,
        /// The value after.
        now: u64,
    },
    /// The interface has no such file: the kernel lacks the setting.
    Unsupported,
}

/// One NAPI instance's `irq-suspend-timeout`, before and after.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NapiInstance {
    /// The NAPI id.
    pub id: u32,
    /// Before (restored on drop).
    pub was: u64,
    /// Read back after setting it.
    pub now: u64,
}

/// What became of `irq-suspend-timeout`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IrqSuspend {
    /// Not asked for.
    NotRequested,
    /// Set on every NAPI instance of the interface.
    Applied(Vec<NapiInstance>),
    /// The kernel has it, but the interface has no NAPI instance to set it on (e.g. a veth
    /// with neither GRO nor an XDP program: `ethtool -K IF gro on` gives it one).
    NoNapiInstance,
    /// The kernel lacks it; the text says what was missing.
    Unsupported(&'static str),
}

/// What [`NapiTuning::apply`] did. `Display`: one line for a tool to print.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NapiReport {
    /// The interface.
    pub iface: String,
    /// Its index.
    pub ifindex: u32,
    /// `napi_defer_hard_irqs`.
    pub defer_hard_irqs: SettingChange,
    /// `gro_flush_timeout`, nanoseconds.
    pub gro_flush_timeout_ns: SettingChange,
    /// `irq-suspend-timeout`, nanoseconds.
    pub irq_suspend_timeout_ns: IrqSuspend,
}

impl fmt::Display for NapiReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let knob = |f: &mut fmt::Formatter<'_>, name: &str, k: &SettingChange, unit: &str| match k {
            SettingChange::NotRequested => write!(f, "{name} unchanged"),
            SettingChange::Applied { was, now } => write!(f, "{name} {was} -> {now}{unit}"),
            SettingChange::Unsupported => write!(f, "{name} not in this kernel"),
        };
        write!(f, "{} (ifindex {}): ", self.iface, self.ifindex)?;
        knob(f, DEFER_HARD_IRQS, &self.defer_hard_irqs, "")?;
        f.write_str(", ")?;
        knob(f, GRO_FLUSH_TIMEOUT, &self.gro_flush_timeout_ns, " ns")?;
        f.write_str(", irq_suspend_timeout ")?;
        match &self.irq_suspend_timeout_ns {
            IrqSuspend::NotRequested => f.write_str("unchanged"),
            IrqSuspend::Applied(v) => {
                let list: Vec<String> = v.iter().map(|n| format!("napi {} {} -> {} ns", n.id, n.was, n.now)).collect();
                f.write_str(&list.join(", "))
            }
            IrqSuspend::NoNapiInstance => f.write_str("not set: the interface has no NAPI instance"),
            IrqSuspend::Unsupported(why) => write!(f, "not set: {why}"),
        }
    }
}

/// One NAPI instance as netlink `napi-get` reports it (`None`: not in the reply).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NapiInstanceState {
    /// The NAPI id.
    pub id: u32,
    /// `defer-hard-irqs` (Linux 6.13+).
    pub defer_hard_irqs: Option<u64>,
    /// `gro-flush-timeout`, ns (Linux 6.13+).
    pub gro_flush_timeout_ns: Option<u64>,
    /// `irq-suspend-timeout`, ns (Linux 6.13+).
    pub irq_suspend_timeout_ns: Option<u64>,
}

/// An interface's NAPI instances, or why they cannot be listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NapiInstances {
    /// `napi-get` answered (possibly with none).
    Listed(Vec<NapiInstanceState>),
    /// The kernel cannot list them; the text says what was missing.
    Unsupported(&'static str),
}

/// An interface's NAPI settings as they are now: [`NapiState::read`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NapiState {
    /// The interface.
    pub iface: String,
    /// Its index.
    pub ifindex: u32,
    /// `napi_defer_hard_irqs` (`None`: no such file).
    pub defer_hard_irqs: Option<u64>,
    /// `gro_flush_timeout`, ns (`None`: no such file).
    pub gro_flush_timeout_ns: Option<u64>,
    /// The per-instance settings.
    pub instances: NapiInstances,
}

impl NapiState {
    /// The settings of `iface` in this thread's network namespace (through `/sys`).
    pub fn read(iface: &str) -> Result<NapiState, NapiError> {
        Self::read_in("/sys", iface)
    }

    /// [`Self::read`] with sysfs at `sysfs_root`. The netlink part asks the running kernel
    /// about the ifindex found there.
    pub fn read_in(sysfs_root: impl AsRef<Path>, iface: &str) -> Result<NapiState, NapiError> {
        let dir = IfDir::open(sysfs_root.as_ref(), iface)?;
        let ifindex = dir.ifindex()?;
        let instances = match Netdev::open(iface)? {
            Err(why) => NapiInstances::Unsupported(why),
            Ok(mut nd) => NapiInstances::Listed(nd.list(ifindex)?),
        };
        Ok(NapiState {
            iface: iface.to_string(),
            ifindex,
            defer_hard_irqs: dir.read(DEFER_HARD_IRQS)?,
            gro_flush_timeout_ns: dir.read(GRO_FLUSH_TIMEOUT)?,
            instances,
        })
    }
}

/// Why NAPI settings could not be read or set. Each says what to do about it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NapiError {
    /// No such interface under the sysfs root.
    #[error(
        "no interface {iface:?} under {}/class/net: check the name with `ip link`; for an interface in \
         another network namespace, call from a thread inside it with that namespace's /sys mounted (as \
         `ip netns exec` does)",
        root.display()
    )]
    NoSuchInterface {
        /// The name asked for.
        iface: String,
        /// The sysfs root used.
        root: PathBuf,
    },
    /// The kernel refused a change for lack of privilege.
    #[error(
        "{what}: permission denied: NAPI settings need CAP_NET_ADMIN in the interface's network \
         namespace; run as root"
    )]
    PermissionDenied {
        /// The file or netlink command.
        what: String,
    },
    /// The kernel refused a value.
    #[error("{what}: the kernel refused {value} ({source}); use a smaller value (napi_defer_hard_irqs is at most 2147483647)")]
    InvalidValue {
        /// The file or netlink command.
        what: String,
        /// The value.
        value: u64,
        /// The kernel's answer.
        source: io::Error,
    },
    /// A sysfs file could not be read or written.
    #[error("{}: {source}; check that the interface still exists and the sysfs root is right", path.display())]
    Sysfs {
        /// The file.
        path: PathBuf,
        /// What failed.
        source: io::Error,
    },
    /// A sysfs file held no number.
    #[error("{}: expected a number, found {content:?}; is the sysfs root right?", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What it held.
        content: String,
    },
    /// A generic netlink request failed.
    #[error(
        "netlink {op} for {iface}: {source}; the kernel's netdev family (Linux 6.13+ for napi-set) \
         must answer in this thread's network namespace"
    )]
    Netlink {
        /// The command, e.g. `"napi-set"`.
        op: &'static str,
        /// The interface.
        iface: String,
        /// The kernel's answer (with its extended ack text, if any).
        source: io::Error,
    },
}

/// The netdev family over a generic netlink socket.
#[derive(Debug)]
struct Netdev {
    sock: GenlSocket,
    family: u16,
    can_set: bool,
    iface: String,
}

impl Netdev {
    /// `Ok(Err(why))`: the kernel cannot list NAPI instances.
    fn open(iface: &str) -> Result<Result<Netdev, &'static str>, NapiError> {
        let nl_err = |op, e: NlError| NapiError::Netlink { op, iface: iface.to_string(), source: e.into() };
        let mut sock = match GenlSocket::open() {
            Ok(s) => s,
            Err(e) if matches!(e.errno, libc::EPROTONOSUPPORT | libc::EAFNOSUPPORT) => {
                return Ok(Err("the kernel has no generic netlink"))
            }
            Err(e) => return Err(nl_err("socket", e)),
        };
        let Some(fam) = sock.family("netdev").map_err(|e| nl_err("getfamily", e))? else {
            return Ok(Err("the kernel has no netlink family \"netdev\" (Linux 6.5+)"));
        };
        if !fam.ops.contains(&u32::from(NETDEV_CMD_NAPI_GET)) {
            return Ok(Err("the netdev family has no napi-get (Linux 6.8+)"));
        }
        let can_set = fam.ops.contains(&u32::from(NETDEV_CMD_NAPI_SET));
        Ok(Ok(Netdev { sock, family: fam.id, can_set, iface: iface.to_string() }))
    }

    fn list(&mut self, ifindex: u32) -> Result<Vec<NapiInstanceState>, NapiError> {
        let req = [Attr::U32(NETDEV_A_NAPI_IFINDEX, ifindex)];
        let replies = self
            .sock
            .dump(self.family, NETDEV_CMD_NAPI_GET, NETDEV_FAMILY_VERSION, &req)
            .map_err(|e| NapiError::Netlink { op: "napi-get", iface: self.iface.clone(), source: e.into() })?;
        let mut out = Vec::new();
        for r in replies {
            let (mut id, mut ifi) = (None, None);
            let mut st = NapiInstanceState { id: 0, defer_hard_irqs: None, gro_flush_timeout_ns: None, irq_suspend_timeout_ns: None };
            for (ty, data) in genl::attrs(&r) {
                let v = genl::get_uint(data);
                match ty {
                    NETDEV_A_NAPI_ID => id = v,
                    NETDEV_A_NAPI_IFINDEX => ifi = v,
                    NETDEV_A_NAPI_DEFER_HARD_IRQS => st.defer_hard_irqs = v,
                    NETDEV_A_NAPI_GRO_FLUSH_TIMEOUT => st.gro_flush_timeout_ns = v,
                    NETDEV_A_NAPI_IRQ_SUSPEND_TIMEOUT => st.irq_suspend_timeout_ns = v,
                    _ => {}
                }
            }
            if let (Some(id), Some(i)) = (id, ifi) {
                if i == u64::from(ifindex) {
                    st.id = id as u32;
                    out.push(st);
                }
            }
        }
        out.sort_by_key(|s| s.id);
        Ok(out)
    }

    fn set_irq_suspend(&mut self, id: u32, ns: u64) -> Result<(), NapiError> {
        let req = [Attr::U32(NETDEV_A_NAPI_ID, id), Attr::Uint(NETDEV_A_NAPI_IRQ_SUSPEND_TIMEOUT, ns)];
        self.sock.request(self.family, NETDEV_CMD_NAPI_SET, NETDEV_FAMILY_VERSION, &req).map_err(|e| {
            let what = format!("netlink napi-set irq-suspend-timeout on {} napi {id}", self.iface);
            match e.errno {
                libc::EPERM | libc::EACCES => NapiError::PermissionDenied { what },
                libc::EINVAL | libc::ERANGE => NapiError::InvalidValue { what, value: ns, source: e.into() },
                _ => NapiError::Netlink { op: "napi-set", iface: self.iface.clone(), source: e.into() },
            }
        })
    }
}

/// NAPI settings applied to an interface; dropping it restores the originals.
///
/// ```no_run
/// use stack::napi::{NapiSettings, NapiTuning};
/// use stack::kernel::{KernelBusyPoll, KernelConfig, KernelTransport};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let tuning = NapiTuning::apply("eth1", &NapiSettings::irq_suspension())?;
/// println!("{}", tuning.report());
/// let cfg = KernelConfig::default().with_busy(Some(KernelBusyPoll::irq_suspension()));
/// let transport = KernelTransport::new(cfg)?;
/// println!("{}", transport.busy_report());
/// // ... serve; the settings go back when `tuning` is dropped.
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use = "dropping the tuning restores the original settings at once"]
pub struct NapiTuning {
    dir: IfDir,
    report: NapiReport,
    /// sysfs files to write back, in the order they were changed.
    sysfs_undo: Vec<(&'static str, u64)>,
    /// The netlink socket (bound to the interface's namespace) and the instances to put back.
    netdev: Option<Netdev>,
    napi_undo: Vec<(u32, u64)>,
}

impl NapiTuning {
    /// Applies `settings` to `iface` of this thread's network namespace (through `/sys` and
    /// netlink). On an error, whatever was already changed is put back.
    pub fn apply(iface: &str, settings: &NapiSettings) -> Result<NapiTuning, NapiError> {
        Self::apply_in("/sys", iface, settings)
    }

    /// [`Self::apply`] with sysfs at `sysfs_root` (tests point it at a directory of their own).
    /// `irq_suspend_timeout_ns` goes to the running kernel's netlink for the ifindex found
    /// there.
    pub fn apply_in(sysfs_root: impl AsRef<Path>, iface: &str, settings: &NapiSettings) -> Result<NapiTuning, NapiError> {
        let dir = IfDir::open(sysfs_root.as_ref(), iface)?;
        let ifindex = dir.ifindex()?;
        let mut t = NapiTuning {
            dir,
            report: NapiReport {
                iface: iface.to_string(),
                ifindex,
                defer_hard_irqs: SettingChange::NotRequested,
                gro_flush_timeout_ns: SettingChange::NotRequested,
                irq_suspend_timeout_ns: IrqSuspend::NotRequested,
            },
            sysfs_undo: Vec::new(),
            netdev: None,
            napi_undo: Vec::new(),
        };
        // From here an early return drops `t`, which restores what was changed.
        t.report.defer_hard_irqs = t.apply_knob(DEFER_HARD_IRQS, settings.defer_hard_irqs.map(u64::from))?;
        t.report.gro_flush_timeout_ns = t.apply_knob(GRO_FLUSH_TIMEOUT, settings.gro_flush_timeout_ns)?;
        if let Some(ns) = settings.irq_suspend_timeout_ns {
            t.report.irq_suspend_timeout_ns = t.apply_irq_suspend(ifindex, ns)?;
        }
        tracing::info!(report = %t.report, "NAPI settings applied");
        Ok(t)
    }

    /// What was applied, and what the kernel or device lacks.
    pub fn report(&self) -> &NapiReport {
        &self.report
    }

    /// Restores the original settings now, reporting the first failure (dropping the guard
    /// does the same and logs failures).
    pub fn restore(mut self) -> Result<(), NapiError> {
        self.restore_all()
    }

    fn apply_knob(&mut self, name: &'static str, value: Option<u64>) -> Result<SettingChange, NapiError> {
        let Some(value) = value else { return Ok(SettingChange::NotRequested) };
        let Some(was) = self.dir.read(name)? else { return Ok(SettingChange::Unsupported) };
        self.dir.write(name, value)?;
        self.sysfs_undo.push((name, was));
        let now = self.dir.read(name)?.unwrap_or(value);
        Ok(SettingChange::Applied { was, now })
    }

    fn apply_irq_suspend(&mut self, ifindex: u32, ns: u64) -> Result<IrqSuspend, NapiError> {
        let mut nd = match Netdev::open(&self.report.iface)? {
            Ok(nd) => nd,
            Err(why) => return Ok(IrqSuspend::Unsupported(why)),
        };
        if !nd.can_set {
            return Ok(IrqSuspend::Unsupported("the netdev family has no napi-set (Linux 6.13+)"));
        }
        let before = nd.list(ifindex)?;
        if before.is_empty() {
            return Ok(IrqSuspend::NoNapiInstance);
        }
        if before.iter().any(|s| s.irq_suspend_timeout_ns.is_none()) {
            return Ok(IrqSuspend::Unsupported("napi-get reports no irq-suspend-timeout (Linux 6.13+)"));
        }
        let nd = self.netdev.insert(nd);
        for s in &before {
            nd.set_irq_suspend(s.id, ns)?;
            self.napi_undo.push((s.id, s.irq_suspend_timeout_ns.unwrap_or(0)));
        }
        let after = nd.list(ifindex)?;
        let applied = before
            .iter()
            .map(|b| {
                let now = after.iter().find(|a| a.id == b.id).and_then(|a| a.irq_suspend_timeout_ns).unwrap_or(0);
                NapiInstance { id: b.id, was: b.irq_suspend_timeout_ns.unwrap_or(0), now }
            })
            .collect();
        Ok(IrqSuspend::Applied(applied))
    }

    /// Puts everything back, newest first; goes on past failures and returns the first.
    fn restore_all(&mut self) -> Result<(), NapiError> {
        let mut first = None;
        if let Some(nd) = &mut self.netdev {
            for (id, was) in self.napi_undo.drain(..).rev() {
                if let Err(e) = nd.set_irq_suspend(id, was) {
                    first.get_or_insert(e);
                }
            }
        }
        for (name, was) in self.sysfs_undo.drain(..).rev() {
            if let Err(e) = self.dir.write(name, was) {
                first.get_or_insert(e);
            }
        }
        match first {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }
}

impl Drop for NapiTuning {
    fn drop(&mut self) {
        if self.sysfs_undo.is_empty() && self.napi_undo.is_empty() {
            return;
        }
        match self.restore_all() {
            Ok(()) => tracing::info!(iface = %self.report.iface, "NAPI settings restored"),
            Err(e) => tracing::warn!(iface = %self.report.iface, error = %e, "could not restore NAPI settings"),
        }
    }
}

#[cfg(test)]
mod tests;
