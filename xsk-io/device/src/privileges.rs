//! What a port needs of the process, checked before anything changes, and
//! what it still needs once it is open.
//!
//! Opening a port needs these capabilities (root has them all):
//!
//! | capability | for |
//! |---|---|
//! | `CAP_NET_RAW` | creating the AF_XDP socket |
//! | `CAP_NET_ADMIN` | loading an XDP program, attaching it, device changes (ethtool) |
//! | `CAP_BPF` | loading the steering program and creating its maps |
//! | `CAP_PERFMON` | the verifier accepts the program's packet pointer arithmetic only with it |
//! | `CAP_IPC_LOCK` | pinning the UMEM beyond `RLIMIT_MEMLOCK` (or a limit that holds it) |
//!
//! (`CAP_SYS_ADMIN` stands in for `CAP_BPF` and `CAP_PERFMON`.) Plus write
//! access to the state directory ([`crate::state::state_dir`]).
//!
//! Once every port is open, only [`kept_after_setup`] is needed:
//! `CAP_NET_ADMIN`, to put the device settings back at exit (and `CAP_BPF`
//! before Linux 6.5). The socket, the
//! UMEM, the program and its maps are held by descriptors, which need no
//! capability to use. [`drop_after_setup`] drops the rest.

use std::collections::HashSet;

use caps::CapSet;
pub use caps::Capability;

/// One capability a port needs, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Need {
    /// The capability.
    pub cap: Capability,
    /// What it is for.
    pub why: &'static str,
}

/// Every capability opening a port needs, in the order the steps use them.
pub const NEEDED: [Need; 5] = [
    Need { cap: Capability::CAP_NET_RAW, why: "to create the AF_XDP socket" },
    Need { cap: Capability::CAP_NET_ADMIN, why: "to load and attach the XDP program and change device settings" },
    Need { cap: Capability::CAP_BPF, why: "to load the XDP steering program and create its maps" },
    Need { cap: Capability::CAP_PERFMON, why: "for the verifier to accept the steering program's packet pointer arithmetic" },
    Need { cap: Capability::CAP_IPC_LOCK, why: "to pin the UMEM beyond the memlock limit" },
];

/// What a running port still needs: `CAP_NET_ADMIN`, to put the device
/// settings back when the last port is dropped; and on kernels before 6.5
/// `CAP_BPF`, whose `bpf()` system call checks it for every map update (the
/// stack adds and removes steered ports while it runs) where unprivileged BPF
/// is disabled. Later kernels check only the map's descriptor.
pub fn kept_after_setup() -> Vec<Capability> {
    let mut v = vec![Capability::CAP_NET_ADMIN];
    if xsk_io::sys::kernel_version().is_none_or(|k| k < (6, 5)) {
        v.push(Capability::CAP_BPF);
    }
    v
}

/// The capability names for a systemd unit's `AmbientCapabilities=` and
/// `CapabilityBoundingSet=`, space-separated.
pub fn needed_list() -> String {
    NEEDED.iter().map(|n| n.cap.to_string()).collect::<Vec<_>>().join(" ")
}

/// A privilege or limit the process lacks, named with its fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Missing {
    /// The capability (`"CAP_PERFMON"`) or limit (`"RLIMIT_MEMLOCK"`).
    pub what: String,
    /// Why it is needed and how to provide it.
    pub fix: String,
}

impl std::fmt::Display for Missing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.what, self.fix)
    }
}

/// The process's effective capabilities (empty if they cannot be read).
fn effective() -> HashSet<Capability> {
    caps::read(None, CapSet::Effective).unwrap_or_default()
}

fn has(eff: &HashSet<Capability>, cap: Capability) -> bool {
    eff.contains(&cap)
        || (matches!(cap, Capability::CAP_BPF | Capability::CAP_PERFMON) && eff.contains(&Capability::CAP_SYS_ADMIN))
}

/// The soft `RLIMIT_MEMLOCK` in bytes (`None`: unlimited or unreadable).
pub fn memlock_limit() -> Option<u64> {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes only into `r`.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) } != 0 || r.rlim_cur == libc::RLIM_INFINITY {
        return None;
    }
    Some(r.rlim_cur)
}

/// The capabilities among `which` that the process lacks (effective set).
pub fn missing_caps(which: &[Capability]) -> Vec<Need> {
    let eff = effective();
    NEEDED.iter().filter(|n| which.contains(&n.cap) && !has(&eff, n.cap)).copied().collect()
}

/// Everything opening ports with `pinned` bytes of UMEM in all needs and
/// the process lacks: capabilities, and the memlock limit when there is no
/// `CAP_IPC_LOCK` (then a limit that holds the UMEM is enough).
pub fn missing(pinned: u64) -> Vec<Missing> {
    let eff = effective();
    let mut out = Vec::new();
    for n in NEEDED {
        if has(&eff, n.cap) {
            continue;
        }
        if n.cap == Capability::CAP_IPC_LOCK {
            match memlock_limit() {
                Some(limit) if limit < pinned => out.push(Missing {
                    what: format!("{} or a memlock limit of {} MiB", n.cap, pinned.div_ceil(1 << 20)),
                    fix: format!(
                        "the UMEM pins {} MiB and the memlock limit (RLIMIT_MEMLOCK) is {} KiB; grant CAP_IPC_LOCK, \
                         or raise the limit (systemd LimitMEMLOCK=infinity, ulimit -l unlimited), or use fewer UMEM frames",
                        pinned.div_ceil(1 << 20),
                        limit >> 10
                    ),
                }),
                _ => {}
            }
            continue;
        }
        out.push(Missing { what: n.cap.to_string(), fix: format!("needed {}; grant it or run as root", n.why) });
    }
    out
}

/// A line naming what is missing and how to grant all of it, for an error.
pub fn describe(missing: &[Missing]) -> String {
    let list = missing.iter().map(|m| m.to_string()).collect::<Vec<_>>().join("; ");
    format!(
        "missing {list}. The AF_XDP backend needs {} (systemd: AmbientCapabilities= and CapabilityBoundingSet= with \
         them; a shell: setpriv --inh-caps --ambient-caps, or root)",
        needed_list()
    )
}

/// Why dropping capabilities or switching user failed.
#[derive(Debug, thiserror::Error)]
pub enum PrivilegeError {
    /// Reading or setting a capability set failed.
    #[error("{what}: {msg}")]
    Caps {
        /// The step.
        what: &'static str,
        /// The library's error.
        msg: String,
    },
    /// A uid/gid switch failed.
    #[error("{what}: {source} (switching user needs CAP_SETUID and CAP_SETGID: start as root)")]
    Switch {
        /// The step.
        what: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
}

fn caps_err(what: &'static str) -> impl Fn(caps::errors::CapsError) -> PrivilegeError {
    move |e| PrivilegeError::Caps { what, msg: e.to_string() }
}

/// What [`drop_after_setup`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dropped {
    /// The capabilities the thread keeps (permitted and effective).
    pub kept: Vec<Capability>,
    /// The capabilities it gave up.
    pub dropped: Vec<Capability>,
    /// The uid/gid it switched to, if asked.
    pub user: Option<(u32, u32)>,
}

/// Once every port is open: switches to `user` (uid, gid; supplementary
/// groups cleared) if given, and keeps only [`kept_after_setup`] and `keep`
/// of the capabilities the process has (permitted, effective, inheritable;
/// ambient cleared; the bounding set reduced where `CAP_SETPCAP` allows).
///
/// Capabilities are per thread in Linux: call this before spawning threads
/// (those spawned after inherit the reduced sets; the uid switch reaches every
/// thread). The thread that drops the last port must be one that kept
/// `CAP_NET_ADMIN`, or the device settings are not put back.
pub fn drop_after_setup(user: Option<(u32, u32)>, keep: &[Capability]) -> Result<Dropped, PrivilegeError> {
    let before = caps::read(None, CapSet::Permitted).map_err(caps_err("reading the permitted capabilities"))?;
    let want: HashSet<Capability> =
        kept_after_setup().iter().chain(keep).copied().filter(|c| before.contains(c)).collect();
    let can_bound = before.contains(&Capability::CAP_SETPCAP);
    // Before the user switch, which clears the effective set (CAP_SETPCAP with it).
    if can_bound {
        for c in caps::all() {
            if !want.contains(&c) {
                // A capability the kernel does not know fails here: nothing to drop.
                let _ = caps::drop(None, CapSet::Bounding, c);
            }
        }
    }
    if let Some((uid, gid)) = user {
        // Keep the permitted set across the uid change (the effective set is cleared by it
        // and raised again below).
        caps::securebits::set_keepcaps(true).map_err(caps_err("keeping capabilities across the user switch"))?;
        let os = |what, r: libc::c_int| if r == 0 { Ok(()) } else { Err(PrivilegeError::Switch { what, source: std::io::Error::last_os_error() }) };
        // SAFETY: plain system calls with no pointers but setgroups' empty list. glibc
        // applies setresgid/setresuid to every thread of the process.
        os("clearing the supplementary groups", unsafe { libc::setgroups(0, std::ptr::null()) })?;
        // SAFETY: as above.
        os("setresgid", unsafe { libc::setresgid(gid, gid, gid) })?;
        // SAFETY: as above.
        os("setresuid", unsafe { libc::setresuid(uid, uid, uid) })?;
        caps::securebits::set_keepcaps(false).map_err(caps_err("clearing keep-caps"))?;
    }
    caps::clear(None, CapSet::Ambient).map_err(caps_err("clearing the ambient capabilities"))?;
    let inh = caps::read(None, CapSet::Inheritable).map_err(caps_err("reading the inheritable capabilities"))?;
    caps::set(None, CapSet::Inheritable, &inh.intersection(&want).copied().collect())
        .map_err(caps_err("reducing the inheritable capabilities"))?;
    caps::set(None, CapSet::Effective, &want).map_err(caps_err("reducing the effective capabilities"))?;
    caps::set(None, CapSet::Permitted, &want).map_err(caps_err("reducing the permitted capabilities"))?;
    let mut kept: Vec<_> = want.into_iter().collect();
    kept.sort_by_key(|c| c.index());
    let mut dropped: Vec<_> = before.into_iter().filter(|c| !kept.contains(c)).collect();
    dropped.sort_by_key(|c| c.index());
    Ok(Dropped { kept, dropped, user })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_set() {
        assert_eq!(needed_list(), "CAP_NET_RAW CAP_NET_ADMIN CAP_BPF CAP_PERFMON CAP_IPC_LOCK");
    }

    #[test]
    fn memlock_is_named_with_both_sizes() {
        let m = Missing { what: "CAP_IPC_LOCK or a memlock limit of 65 MiB".into(), fix: "x".into() };
        assert!(describe(&[m]).contains("CAP_IPC_LOCK or a memlock limit of 65 MiB (x)"));
    }
}
