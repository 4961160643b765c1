//! Network lab for tests and benchmarks: two network namespaces joined by one
//! veth pair, driven through `ip` (iproute2).
//!
//! ```text
//!   netns ns_a                          netns ns_b
//!   lo (up)                             lo (up)
//!   if_a  addr_a/24  <==== veth ====>   if_b  addr_b/24
//! ```
//!
//! Everything lives inside the two namespaces: the veth pair is created
//! directly inside them (`ip -n A link add ... peer ... netns B`), so the root
//! namespace's interfaces are never touched. Addresses come from the
//! benchmarking range 198.18.0.0/15.
//!
//! Names are `{prefix}-{pid base36}-{counter base36}{a|b}` (at most 15
//! characters, IFNAMSIZ - 1), used for both the namespace and the veth end in
//! it, so they are unique per process and per lab, and [`sweep_stale`] can tell
//! which process made a namespace.
//!
//! Teardown: [`Lab`]'s `Drop` kills any process still inside either namespace
//! and deletes both namespaces (which destroys the veth). Live labs are also
//! kept in a process-wide registry that is cleaned by an `atexit` hook (so
//! `std::process::exit` does not leak them), by [`cleanup_registered`], and by
//! the second SIGINT/SIGTERM once [`install_signal_handlers`] is in place.
//! Labs of processes that died by SIGKILL are removed by [`sweep_stale`].
//! Requires root (CAP_SYS_ADMIN + CAP_NET_ADMIN).

use std::fmt;
use std::fs::File;
use std::io::{self, Write};
use std::marker::PhantomData;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, Once};
use std::thread;

/// Where `ip netns add` puts its bind mounts (iproute2's NETNS_RUN_DIR).
pub const NETNS_RUN_DIR: &str = "/run/netns";
/// Longest interface name the kernel accepts (IFNAMSIZ minus the NUL).
pub const MAX_IFNAME_LEN: usize = 15;
/// Longest [`LabConfig::prefix`]: leaves room for a pid up to 2^22 and at
/// least 36^3 labs per process.
pub const MAX_PREFIX_LEN: usize = 4;

/// Errors from building or using a lab. Command failures carry the command
/// line and its stderr.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A [`LabConfig`] or name out of range, or no free lab name.
    #[error("invalid lab configuration: {0}")]
    Config(String),
    /// A command (`ip`, or one run in a namespace) could not be started or
    /// fed its input.
    #[error("could not run `{cmd}`: {source}")]
    Spawn {
        /// The command line.
        cmd: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A command ran and exited unsuccessfully.
    #[error("`{cmd}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        cmd: String,
        /// Its exit status.
        status: ExitStatus,
        /// Its stderr, trimmed.
        stderr: String,
    },
    /// Entering or using a namespace from this process failed (`setns`,
    /// remounting `/sys`, a sysctl, `if_nametoindex`).
    #[error("{op} for network namespace {ns:?}: {source}")]
    Netns {
        /// The operation.
        op: &'static str,
        /// The namespace.
        ns: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The helper thread of [`Netns::run_in`] could not be started.
    #[error("could not start a thread: {0}")]
    Thread(#[source] io::Error),
    /// An XDP program for the lab ([`Lab::peer_xdp_pass`]) could not be attached.
    #[error("attaching an XDP program to {ifname}: {source}")]
    Xdp {
        /// The interface.
        ifname: String,
        /// Why.
        #[source]
        source: xsk_io::steer::SteerError,
    },
}

impl LabError {
    /// The stderr of a failed command, if this is one.
    pub fn stderr(&self) -> Option<&str> {
        match self {
            LabError::Command { stderr, .. } => Some(stderr),
            _ => None,
        }
    }
}

/// Which end of the pair a name belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Side {
    /// `ns_a` / `if_a` (name ends in `a`).
    A,
    /// `ns_b` / `if_b` (name ends in `b`).
    B,
}

impl Side {
    fn letter(self) -> char {
        match self {
            Side::A => 'a',
            Side::B => 'b',
        }
    }
}

/// How to build a [`Lab`]. Use `..LabConfig::default()` for fields you don't care about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabConfig {
    /// Short tag, 1..=4 chars of `[a-z0-9]`, e.g. `"xb"`.
    pub prefix: String,
    /// MTU of both veth ends (68..=65535).
    pub mtu: u32,
    /// `Some(x)`: the lab uses 198.18.x.0/24. `None`: a /24 inside
    /// 198.18.0.0/15 derived from the pid and a per-process counter.
    pub subnet_index: Option<u8>,
    /// numtxqueues/numrxqueues of both veth ends (1..=4096); `None` is the
    /// kernel default, 1.
    pub peer_queues: Option<u32>,
    /// Disable IPv6 in both namespaces before the veth exists, so the kernel
    /// emits no router solicitations, MLD or DAD frames on the link (they
    /// would otherwise show up on an AF_XDP socket). Default `true`.
    pub disable_ipv6: bool,
}

impl Default for LabConfig {
    fn default() -> Self {
        LabConfig {
            prefix: "xl".to_string(),
            mtu: 1500,
            subnet_index: None,
            peer_queues: None,
            disable_ipv6: true,
        }
    }
}

impl LabConfig {
    /// Defaults with the given prefix.
    pub fn new(prefix: &str) -> Self {
        LabConfig {
            prefix: prefix.to_string(),
            ..LabConfig::default()
        }
    }

    fn validate(&self) -> Result<(), LabError> {
        validate_prefix(&self.prefix)?;
        if !(68..=65535).contains(&self.mtu) {
            return Err(LabError::Config(format!("mtu {} outside 68..=65535", self.mtu)));
        }
        if let Some(q) = self.peer_queues {
            if !(1..=4096).contains(&q) {
                return Err(LabError::Config(format!("peer_queues {q} outside 1..=4096")));
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Names
// ---------------------------------------------------------------------------

fn validate_prefix(prefix: &str) -> Result<(), LabError> {
    let ok_chars = prefix.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    if prefix.is_empty() || prefix.len() > MAX_PREFIX_LEN || !ok_chars {
        return Err(LabError::Config(format!(
            "prefix {prefix:?} must be 1..={MAX_PREFIX_LEN} characters of [a-z0-9]"
        )));
    }
    Ok(())
}

fn base36(mut n: u64) -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut out = Vec::new();
    loop {
        out.push(DIGITS[(n % 36) as usize]);
        n /= 36;
        if n == 0 {
            break;
        }
    }
    out.reverse();
    String::from_utf8(out).expect("ascii digits")
}

fn parse_base36(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 12 {
        return None;
    }
    let mut n: u64 = 0;
    for c in s.chars() {
        let d = c.to_digit(36)?;
        if c.is_ascii_uppercase() {
            return None;
        }
        n = n * 36 + u64::from(d);
    }
    Some(n)
}

/// How many distinct counters fit in a name with this prefix length and pid.
fn counter_capacity(prefix_len: usize, pid: u32) -> u64 {
    // prefix '-' pid '-' counter side
    let fixed = prefix_len + 1 + base36(u64::from(pid)).len() + 1 + 1;
    let digits = MAX_IFNAME_LEN.saturating_sub(fixed).min(8) as u32;
    36u64.pow(digits)
}

/// The namespace (and interface) name of one side of a lab:
/// `{prefix}-{pid base36}-{counter base36}{a|b}`, at most 15 characters.
pub fn lab_name(prefix: &str, pid: u32, counter: u64, side: Side) -> Result<String, LabError> {
    validate_prefix(prefix)?;
    if pid == 0 {
        return Err(LabError::Config("pid 0 in a lab name".into()));
    }
    let name = format!("{prefix}-{}-{}{}", base36(u64::from(pid)), base36(counter), side.letter());
    if name.len() > MAX_IFNAME_LEN {
        return Err(LabError::Config(format!(
            "lab name {name:?} is longer than {MAX_IFNAME_LEN} characters"
        )));
    }
    Ok(name)
}

/// A lab name taken apart by [`parse_lab_name`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LabName {
    /// The pid of the process that made the lab.
    pub pid: u32,
    /// That process's lab counter.
    pub counter: u64,
    /// Which end.
    pub side: Side,
}

/// Parse a name made by [`lab_name`] with exactly this prefix; `None` for
/// anything else (other prefixes, foreign namespaces, pid 0).
pub fn parse_lab_name(prefix: &str, name: &str) -> Option<LabName> {
    let rest = name.strip_prefix(prefix)?.strip_prefix('-')?;
    let (pid, rest) = rest.split_once('-')?;
    let pid = u32::try_from(parse_base36(pid)?).ok().filter(|&p| p != 0 && p <= i32::MAX as u32)?;
    let side = match rest.chars().last()? {
        'a' => Side::A,
        'b' => Side::B,
        _ => return None,
    };
    let counter = parse_base36(&rest[..rest.len() - 1])?;
    Some(LabName { pid, counter, side })
}

// ---------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------

fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Run a command to completion, feeding `stdin`; stdout on success.
fn run_command(mut cmd: Command, stdin: Option<&str>) -> Result<String, LabError> {
    let mut desc = describe(&cmd);
    if let Some(input) = stdin {
        desc.push_str(&format!(" <<< {:?}", input));
    }
    tracing::debug!(cmd = %desc, "lab");
    cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let spawn_err = |source| LabError::Spawn { cmd: desc.clone(), source };
    let mut child = cmd.spawn().map_err(spawn_err)?;
    if let Some(input) = stdin {
        // Batches are a few hundred bytes: far below a pipe buffer, no deadlock.
        let mut pipe = child.stdin.take().expect("stdin was piped");
        if let Err(e) = pipe.write_all(input.as_bytes()) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(spawn_err(e));
        }
    }
    let out = child.wait_with_output().map_err(spawn_err)?;
    if !out.status.success() {
        return Err(LabError::Command {
            cmd: desc,
            status: out.status,
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn ip(args: &[&str]) -> Result<String, LabError> {
    let mut cmd = Command::new("ip");
    cmd.args(args);
    run_command(cmd, None)
}

/// `ip [-n ns] [-force] -batch -` with one command per line.
fn ip_batch(netns: Option<&str>, force: bool, lines: &[String]) -> Result<String, LabError> {
    let mut cmd = Command::new("ip");
    if let Some(ns) = netns {
        cmd.args(["-n", ns]);
    }
    if force {
        cmd.arg("-force");
    }
    cmd.args(["-batch", "-"]);
    let mut input = lines.join("\n");
    input.push('\n');
    run_command(cmd, Some(&input))
}

// ---------------------------------------------------------------------------
// Namespaces
// ---------------------------------------------------------------------------

/// A named network namespace (`/run/netns/NAME`). This is a plain handle: it
/// does not delete the namespace on drop ([`Lab`] does).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Netns {
    /// The name under `/run/netns` (as `ip netns` shows it).
    pub name: String,
}

impl fmt::Display for Netns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)
    }
}

impl Netns {
    /// `/run/netns/NAME`.
    pub fn path(&self) -> PathBuf {
        PathBuf::from(NETNS_RUN_DIR).join(&self.name)
    }

    /// `ip netns exec NAME args...` with stdin null and stdout, stderr piped:
    /// adjust stdio before spawning if needed.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name]).args(args);
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        cmd
    }

    /// Run `args` inside the namespace to completion; its stdout on success,
    /// an error with the command line and stderr otherwise.
    pub fn run(&self, args: &[&str]) -> Result<String, LabError> {
        run_command(self.command(args), None)
    }

    /// Start `args` inside the namespace (stdin null; stdout and stderr
    /// piped: read them or use `wait_with_output`, since a child that fills a
    /// pipe blocks; use [`Netns::command`] for other stdio). The child is not
    /// killed when the `Child` is dropped, but it is when the [`Lab`] is.
    pub fn spawn(&self, args: &[&str]) -> Result<Child, LabError> {
        let mut cmd = self.command(args);
        let desc = describe(&cmd);
        tracing::debug!(cmd = %desc, "lab spawn");
        cmd.spawn().map_err(|source| LabError::Spawn { cmd: desc, source })
    }

    /// Move the calling thread into this namespace; the guard moves it back
    /// when dropped (on the same thread: the guard is `!Send`).
    ///
    /// Like `ip netns exec`, the thread also gets a private mount namespace
    /// with a fresh `/sys`, so `/sys/class/net` shows this namespace's
    /// devices (the tuning reads them); the guard restores both. Sockets,
    /// ioctls, netlink, and `/proc/sys/net` (opened after entering) follow
    /// the thread.
    ///
    /// # Errors
    /// [`LabError::Netns`] if the namespace cannot be opened or entered, or
    /// `/sys` cannot be remounted (needs `CAP_SYS_ADMIN`).
    pub fn enter(&self) -> Result<NetnsGuard, LabError> {
        let err = |op, source| LabError::Netns { op, ns: self.name.clone(), source };
        // `/proc/thread-self`, not `/proc/self`: the latter is the main thread,
        // which may be in another namespace than the calling thread.
        let original = File::open("/proc/thread-self/ns/net").map_err(|e| err("open /proc/thread-self/ns/net", e))?;
        let original_mnt = File::open("/proc/thread-self/ns/mnt").map_err(|e| err("open /proc/thread-self/ns/mnt", e))?;
        let target = File::open(self.path()).map_err(|e| err("open", e))?;
        setns_net(&target).map_err(|e| err("setns", e))?;
        let mut guard = NetnsGuard { original, original_mnt: None, name: self.name.clone(), _not_send: PhantomData };
        // sysfs shows the namespace it was mounted in, not the thread's: like
        // `ip netns exec`, give this thread a private mount namespace with a
        // fresh /sys, so /sys/class/net matches the interfaces it sees.
        guard.original_mnt = Some(original_mnt);
        private_sysfs().map_err(|e| err("remount /sys for the namespace", e))?;
        Ok(guard)
    }

    /// Run `f` on a fresh thread inside this namespace and return its result.
    /// Sockets created by `f` stay in this namespace wherever they are used
    /// afterwards. A panic in `f` is resumed on the calling thread.
    pub fn run_in<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> Result<T, LabError> {
        let ns = self.clone();
        let handle = thread::Builder::new()
            .name(format!("netns {}", self.name))
            .spawn(move || -> Result<T, LabError> {
                let _guard = ns.enter()?;
                Ok(f())
            })
            .map_err(LabError::Thread)?;
        match handle.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }

    /// Interface index of `ifname` inside this namespace.
    pub fn ifindex(&self, ifname: &str) -> Result<u32, LabError> {
        let (ns, name) = (self.name.clone(), ifname.to_string());
        self.run_in(move || {
            xsk_io::sys::if_nametoindex(&name).map_err(|source| LabError::Netns { op: "if_nametoindex", ns, source })
        })?
    }

    /// Whether `/run/netns/NAME` exists.
    pub fn exists(&self) -> bool {
        self.path().exists()
    }
}

/// Unshares this thread's filesystem context and mount namespace and mounts
/// a sysfs of the current network namespace on /sys, without propagating
/// anything to the host's mounts.
fn private_sysfs() -> io::Result<()> {
    let check = |rc: libc::c_int| if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) };
    // SAFETY: unshare only affects the calling thread (CLONE_FS copies its
    // fs_struct first, which the kernel allows in a multi-threaded process).
    check(unsafe { libc::unshare(libc::CLONE_FS | libc::CLONE_NEWNS) })?;
    let root = c"/";
    let sys = c"/sys";
    let fstype = c"sysfs";
    // SAFETY: all pointers are valid NUL-terminated strings (or NULL where
    // mount(2) allows it) for the duration of each call; the mounts change
    // only this thread's private mount namespace.
    unsafe {
        check(libc::mount(std::ptr::null(), root.as_ptr(), std::ptr::null(), libc::MS_SLAVE | libc::MS_REC, std::ptr::null()))?;
        check(libc::umount2(sys.as_ptr(), libc::MNT_DETACH))?;
        check(libc::mount(fstype.as_ptr(), sys.as_ptr(), fstype.as_ptr(), 0, std::ptr::null()))?;
    }
    Ok(())
}

fn setns_net(fd: &File) -> io::Result<()> {
    // SAFETY: `fd` is an open namespace file descriptor borrowed for the call;
    // setns only changes the calling thread's network namespace.
    let rc = unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Returned by [`Netns::enter`]: moves the thread back to its original
/// network namespace on drop. Not `Send`: it must be dropped on the thread
/// that entered.
#[must_use = "dropping the guard immediately leaves the namespace again"]
pub struct NetnsGuard {
    original: File,
    /// The mount namespace to return to, once /sys was remounted.
    original_mnt: Option<File>,
    name: String,
    _not_send: PhantomData<*const ()>,
}

impl fmt::Debug for NetnsGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NetnsGuard").field("netns", &self.name).finish()
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        if let Some(mnt) = &self.original_mnt {
            // SAFETY: `mnt` is an open mount-namespace fd; this thread's
            // fs_struct is unshared (see private_sysfs), as setns requires.
            if unsafe { libc::setns(mnt.as_raw_fd(), libc::CLONE_NEWNS) } != 0 {
                tracing::error!(netns = %self.name, error = %io::Error::last_os_error(), "could not leave the private mount namespace");
            }
        }
        if let Err(e) = setns_net(&self.original) {
            // The thread would silently stay in the lab namespace: never let
            // that pass unnoticed.
            tracing::error!(netns = %self.name, error = %e, "could not leave network namespace");
            if !thread::panicking() {
                panic!("could not leave network namespace {}: {e}", self.name);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Registry and teardown
// ---------------------------------------------------------------------------

static REGISTRY: Mutex<Vec<String>> = Mutex::new(Vec::new());
static ATEXIT: Once = Once::new();

fn registry() -> MutexGuard<'static, Vec<String>> {
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

extern "C" fn cleanup_at_exit() {
    // Must not block: another thread may hold the lock while the process exits.
    let names = match REGISTRY.try_lock() {
        Ok(mut r) => std::mem::take(&mut *r),
        Err(std::sync::TryLockError::Poisoned(p)) => std::mem::take(&mut *p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => return,
    };
    if !names.is_empty() {
        destroy_namespaces(&names);
    }
}

fn register(name: &str) {
    ATEXIT.call_once(|| {
        // SAFETY: registers a plain `extern "C" fn()` with no captured state.
        let rc = unsafe { libc::atexit(cleanup_at_exit) };
        if rc != 0 {
            tracing::warn!("atexit registration failed; labs leak on process::exit");
        }
    });
    registry().push(name.to_string());
}

/// Remove from the registry; false if it was not there (already cleaned).
fn unregister(name: &str) -> bool {
    let mut r = registry();
    match r.iter().position(|n| n == name) {
        Some(i) => {
            r.swap_remove(i);
            true
        }
        None => false,
    }
}

/// Delete every lab namespace this process still has (best effort) and
/// return how many were deleted. Use before `std::process::exit` paths that
/// skip `Drop`; later drops of those labs are then no-ops. Process-wide: it
/// also removes labs that other threads (other tests) are still using.
pub fn cleanup_registered() -> usize {
    let names = std::mem::take(&mut *registry());
    destroy_namespaces(&names)
}

/// (st_dev, st_ino) identifying a network namespace.
fn ns_id(path: &std::path::Path) -> Option<(u64, u64)> {
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// Pids (other than ours) whose main thread is in one of these namespaces,
/// like `ip netns pids`.
fn pids_in(ids: &[(u64, u64)]) -> Vec<i32> {
    let own = std::process::id() as i32;
    let Ok(dir) = std::fs::read_dir("/proc") else { return Vec::new() };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| pid != own)
        .filter(|pid| ns_id(&PathBuf::from(format!("/proc/{pid}/ns/net"))).is_some_and(|id| ids.contains(&id)))
        .collect()
}

/// Kill processes inside the namespaces, then `ip netns del` them. Returns
/// how many namespaces are gone afterwards.
fn destroy_namespaces(names: &[String]) -> usize {
    let present: Vec<&String> = names.iter().filter(|n| Netns { name: n.to_string() }.exists()).collect();
    if present.is_empty() {
        return 0;
    }
    let ids: Vec<(u64, u64)> = present.iter().filter_map(|n| ns_id(&Netns { name: n.to_string() }.path())).collect();
    for pid in pids_in(&ids) {
        tracing::debug!(pid, "lab: killing process left in a lab namespace");
        // SAFETY: plain syscall; the pid is in one of our lab namespaces.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    // Device-state records of killed ports in these namespaces die with them.
    for &(_, ino) in &ids {
        xsk_io::state::forget_netns(ino);
    }
    let lines: Vec<String> = present.iter().map(|n| format!("netns del {n}")).collect();
    if let Err(e) = ip_batch(None, true, &lines) {
        tracing::warn!(error = %e, "lab: deleting namespaces failed");
    }
    present.iter().filter(|n| !Netns { name: n.to_string() }.exists()).count()
}

/// Remove labs left behind by dead processes: namespaces named by
/// [`lab_name`] with exactly this prefix whose pid is no longer alive
/// (processes still inside them are killed). Returns how many namespaces were
/// removed. Labs of live processes, including this one, are left alone.
pub fn sweep_stale(prefix: &str) -> usize {
    if validate_prefix(prefix).is_err() {
        tracing::warn!(prefix, "sweep_stale: invalid prefix");
        return 0;
    }
    let Ok(dir) = std::fs::read_dir(NETNS_RUN_DIR) else { return 0 };
    let stale: Vec<String> = dir
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| parse_lab_name(prefix, name).is_some_and(|n| !pid_alive(n.pid)))
        .collect();
    if stale.is_empty() {
        return 0;
    }
    tracing::info!(?stale, "sweeping stale lab namespaces");
    destroy_namespaces(&stale)
}

/// Whether a process with this pid exists (zombies count as alive).
fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else { return false };
    if pid <= 0 {
        return true; // never treat "all processes"/"process group" as dead
    }
    // SAFETY: signal 0 only checks for existence and permission.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

// ---------------------------------------------------------------------------
// Lab
// ---------------------------------------------------------------------------

static NEXT_LAB: AtomicU64 = AtomicU64::new(0);

/// Two network namespaces joined by one veth pair; torn down on drop.
#[derive(Debug)]
pub struct Lab {
    /// The first namespace.
    pub ns_a: Netns,
    /// The second namespace.
    pub ns_b: Netns,
    /// veth end inside `ns_a`, up, with `addr_a`.
    pub if_a: String,
    /// veth end inside `ns_b`, up, with `addr_b`.
    pub if_b: String,
    /// Address of `if_a`, in 198.18.0.0/15.
    pub addr_a: Ipv4Addr,
    /// Address of `if_b`, in the same /24.
    pub addr_b: Ipv4Addr,
    /// Prefix length of both addresses (24).
    pub prefix_len: u8,
    /// MAC address of `if_a`.
    pub mac_a: [u8; 6],
    /// MAC address of `if_b`.
    pub mac_b: [u8; 6],
    /// MTU of both ends, in bytes.
    pub mtu: u32,
}

/// Deletes namespaces created so far if `Lab::new` fails or panics midway.
struct Partial(Vec<String>);

impl Drop for Partial {
    fn drop(&mut self) {
        let owned: Vec<String> = self.0.iter().filter(|n| unregister(n)).cloned().collect();
        if !owned.is_empty() {
            destroy_namespaces(&owned);
        }
    }
}

fn mac_string(mac: &[u8; 6]) -> String {
    mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

fn netns_add(partial: &mut Partial, name: &str) -> Result<bool, LabError> {
    match ip(&["netns", "add", name]) {
        Ok(_) => {
            register(name);
            partial.0.push(name.to_string());
            Ok(true)
        }
        // A namespace of a dead process that had our pid, or a counter wrap.
        Err(e) if e.stderr().is_some_and(|s| s.contains("File exists")) => Ok(false),
        Err(e) => Err(e),
    }
}

fn disable_ipv6(ns: &Netns) -> Result<(), LabError> {
    let name = ns.name.clone();
    ns.run_in(move || {
        for key in ["all", "default"] {
            let path = format!("/proc/sys/net/ipv6/conf/{key}/disable_ipv6");
            match std::fs::write(&path, "1") {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()), // no IPv6 in this kernel
                Err(source) => return Err(LabError::Netns { op: "disable IPv6", ns: name, source }),
            }
        }
        Ok(())
    })?
}

impl Lab {
    /// Create both namespaces, the veth pair between them (directly inside the
    /// namespaces), addresses, and bring `lo` and the veth ends up. On error
    /// everything created so far is deleted.
    pub fn new(cfg: &LabConfig) -> Result<Lab, LabError> {
        cfg.validate()?;
        let pid = std::process::id();
        let capacity = counter_capacity(cfg.prefix.len(), pid);
        let mut partial = Partial(Vec::new());

        // Pick a counter whose names are free.
        let mut attempt = 0;
        let (counter, name_a, name_b) = loop {
            attempt += 1;
            if attempt > 64 {
                return Err(LabError::Config(format!(
                    "no free lab name for prefix {:?} after 64 attempts",
                    cfg.prefix
                )));
            }
            let counter = NEXT_LAB.fetch_add(1, Ordering::Relaxed) % capacity;
            let name_a = lab_name(&cfg.prefix, pid, counter, Side::A)?;
            let name_b = lab_name(&cfg.prefix, pid, counter, Side::B)?;
            if !netns_add(&mut partial, &name_a)? {
                continue;
            }
            if !netns_add(&mut partial, &name_b)? {
                let a = partial.0.pop().expect("just added");
                unregister(&a);
                destroy_namespaces(&[a]);
                continue;
            }
            break (counter, name_a, name_b);
        };
        let ns_a = Netns { name: name_a.clone() };
        let ns_b = Netns { name: name_b.clone() };

        if cfg.disable_ipv6 {
            disable_ipv6(&ns_a)?;
            disable_ipv6(&ns_b)?;
        }

        let index = match cfg.subnet_index {
            Some(x) => u16::from(x),
            None => ((pid as u64 * 61 + counter) % 512) as u16,
        };
        let (o2, o3) = (18 + (index >> 8) as u8, (index & 0xff) as u8);
        let addr_a = Ipv4Addr::new(198, o2, o3, 1);
        let addr_b = Ipv4Addr::new(198, o2, o3, 2);
        let prefix_len = 24;
        let p = pid.to_be_bytes();
        let mac_a = [0x02, p[1], p[2], p[3], counter as u8, 0x0a];
        let mac_b = [0x02, p[1], p[2], p[3], counter as u8, 0x0b];

        let mtu = cfg.mtu.to_string();
        let queues = cfg.peer_queues.map(|q| q.to_string());
        let (mac_a_s, mac_b_s) = (mac_string(&mac_a), mac_string(&mac_b));
        let end_args = |ifname: &str, mac: &str| -> Vec<String> {
            let mut v = vec!["name".into(), ifname.into(), "address".into(), mac.into(), "mtu".into(), mtu.clone()];
            if let Some(q) = &queues {
                v.extend(["numtxqueues".into(), q.clone(), "numrxqueues".into(), q.clone()]);
            }
            v
        };
        let mut args: Vec<String> = vec!["-n".into(), name_a.clone(), "link".into(), "add".into()];
        args.extend(end_args(&name_a, &mac_a_s));
        args.extend(["type".into(), "veth".into(), "peer".into()]);
        args.extend(end_args(&name_b, &mac_b_s));
        args.extend(["netns".into(), name_b.clone()]);
        ip(&args.iter().map(String::as_str).collect::<Vec<_>>())?;

        for (ns, ifname, addr) in [(&name_a, &name_a, addr_a), (&name_b, &name_b, addr_b)] {
            ip_batch(
                Some(ns),
                false,
                &[
                    "link set lo up".to_string(),
                    format!("addr add {addr}/{prefix_len} dev {ifname}"),
                    format!("link set {ifname} up"),
                ],
            )?;
        }

        partial.0.clear(); // the Lab owns the namespaces now
        Ok(Lab {
            ns_a,
            ns_b,
            if_a: name_a,
            if_b: name_b,
            addr_a,
            addr_b,
            prefix_len,
            mac_a,
            mac_b,
            mtu: cfg.mtu,
        })
    }

    /// Attaches an XDP program that passes every frame (the steering program
    /// with nothing to steer) to `if_b`, natively: a veth sends native
    /// XDP_TX and redirects into its peer only while the peer runs such a
    /// program (its NAPI is not scheduled for them otherwise), so this is
    /// how a lab lets the XDP program on `if_a` answer SYNs itself. Detached
    /// when the returned value is dropped (or the lab removed).
    pub fn peer_xdp_pass(&self) -> Result<xsk_io::steer::Steer, LabError> {
        let ifname = self.if_b.clone();
        let name = ifname.clone();
        self.ns_b
            .run_in(move || xsk_io::steer::Steer::attach(&name, xsk_io::AttachMode::Drv))?
            .map_err(|source| LabError::Xdp { ifname, source })
    }

    /// Permanent neighbour entries on both ends, so no ARP is needed.
    pub fn add_static_neighbours(&self) -> Result<(), LabError> {
        let entry = |addr: Ipv4Addr, mac: &[u8; 6], dev: &str| {
            vec![format!("neigh replace {addr} lladdr {} dev {dev} nud permanent", mac_string(mac))]
        };
        ip_batch(Some(&self.ns_a.name), false, &entry(self.addr_b, &self.mac_b, &self.if_a))?;
        ip_batch(Some(&self.ns_b.name), false, &entry(self.addr_a, &self.mac_a, &self.if_b))?;
        Ok(())
    }

    /// `ethtool -K IF tx off` on both ends (disables TX checksum offload and
    /// with it TSO). Kernel-sent frames on veth otherwise carry
    /// CHECKSUM_PARTIAL, i.e. an unfinished L4 checksum, which an AF_XDP
    /// receiver sees as-is. Needs `ethtool`.
    pub fn disable_tx_offloads(&self) -> Result<(), LabError> {
        self.ns_a.run(&["ethtool", "-K", &self.if_a, "tx", "off"])?;
        self.ns_b.run(&["ethtool", "-K", &self.if_b, "tx", "off"])?;
        Ok(())
    }

    /// The namespace names, for checks such as `ip netns list`.
    pub fn netns_names(&self) -> [&str; 2] {
        [&self.ns_a.name, &self.ns_b.name]
    }
}

impl fmt::Display for Lab {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "netns {} dev {} {}/{} {} <-> netns {} dev {} {}/{} {} (mtu {})",
            self.ns_a.name,
            self.if_a,
            self.addr_a,
            self.prefix_len,
            mac_string(&self.mac_a),
            self.ns_b.name,
            self.if_b,
            self.addr_b,
            self.prefix_len,
            mac_string(&self.mac_b),
            self.mtu
        )
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let owned: Vec<String> = [&self.ns_a.name, &self.ns_b.name]
            .into_iter()
            .filter(|n| unregister(n))
            .cloned()
            .collect();
        if owned.is_empty() {
            return; // already removed by cleanup_registered / signal path
        }
        let removed = destroy_namespaces(&owned);
        if removed != owned.len() {
            tracing::warn!(?owned, removed, "lab teardown left namespaces behind");
        }
    }
}

// Signals: see crate::signals (re-exported here for the binaries that use both).
pub use crate::signals::{install_signal_handlers, interrupted};

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn base36_round_trip() {
        for n in [0u64, 1, 35, 36, 4194304, 36u64.pow(6) - 1, u32::MAX as u64] {
            assert_eq!(parse_base36(&base36(n)), Some(n), "{n}");
        }
        assert_eq!(base36(4194304), "2hwcg");
        assert_eq!(parse_base36(""), None);
        assert_eq!(parse_base36("A"), None);
        assert_eq!(parse_base36("-1"), None);
    }

    #[test]
    fn names_fit_ifnamsiz_at_worst_case() {
        let pid_max = 4_194_304; // PID_MAX_LIMIT on 64-bit
        for prefix in ["x", "xb", "lab", "abcd"] {
            for pid in [1, 999, 32768, pid_max] {
                let cap = counter_capacity(prefix.len(), pid);
                assert!(cap >= 36u64.pow(3), "{prefix} {pid}: {cap}");
                for counter in [0, 1, cap / 2, cap - 1] {
                    for side in [Side::A, Side::B] {
                        let name = lab_name(prefix, pid, counter, side).unwrap();
                        assert!(name.len() <= MAX_IFNAME_LEN, "{name}");
                        assert_eq!(parse_lab_name(prefix, &name), Some(LabName { pid, counter, side }));
                    }
                }
                assert!(lab_name(prefix, pid, cap, Side::A).is_err() || cap == 36u64.pow(8));
            }
        }
    }

    #[test]
    fn names_unique_per_pid_counter_side() {
        let mut seen = HashSet::new();
        for pid in [7, 36, 1296, 4_194_304] {
            for counter in 0..500 {
                for side in [Side::A, Side::B] {
                    assert!(seen.insert(lab_name("xb", pid, counter, side).unwrap()));
                }
            }
        }
    }

    #[test]
    fn invalid_prefixes_rejected() {
        for p in ["", "abcde", "x-b", "XB", "x b", "x/"] {
            assert!(lab_name(p, 1, 0, Side::A).is_err(), "{p:?}");
            assert!(LabConfig::new(p).validate().is_err(), "{p:?}");
        }
        assert!(LabConfig::default().validate().is_ok());
        assert!(LabConfig { mtu: 67, ..LabConfig::default() }.validate().is_err());
        assert!(LabConfig { peer_queues: Some(0), ..LabConfig::default() }.validate().is_err());
    }

    #[test]
    fn parse_rejects_foreign_names() {
        assert_eq!(parse_lab_name("xb", "xb-1k-0a").map(|n| n.pid), Some(36 + 20));
        // Another prefix that merely starts with ours.
        assert_eq!(parse_lab_name("xb", "xbq-1k-0a"), None);
        assert_eq!(parse_lab_name("xb", "xb-1k-0c"), None);
        assert_eq!(parse_lab_name("xb", "xb-1k-a"), None); // no counter
        assert_eq!(parse_lab_name("xb", "xb-0-0a"), None); // pid 0
        assert_eq!(parse_lab_name("xb", "xb--0a"), None);
        assert_eq!(parse_lab_name("xb", "xb-1k-0a-x"), None);
        assert_eq!(parse_lab_name("xb", "xb-zzzzzzz-0a"), None); // > i32::MAX
        assert_eq!(parse_lab_name("xb", "docker"), None);
        assert_eq!(parse_lab_name("xb", "xb-1K-0a"), None);
    }

    #[test]
    fn partial_lab_is_torn_down() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipping partial_lab_is_torn_down: needs root");
            return;
        }
        let name = lab_name("lu", std::process::id(), 1_000_000 + u64::from(std::process::id() % 1000), Side::A).unwrap();
        {
            let mut partial = Partial(Vec::new());
            assert!(netns_add(&mut partial, &name).unwrap());
            assert!(Netns { name: name.clone() }.exists());
            // Same name again: reported as taken, not as an error.
            assert!(!netns_add(&mut Partial(Vec::new()), &name).unwrap());
        } // dropped as on an error return in Lab::new
        assert!(!Netns { name: name.clone() }.exists());
        assert!(!registry().contains(&name));
    }

    #[test]
    fn pid_liveness() {
        assert!(pid_alive(std::process::id()));
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        // Reaped: gone unless the pid was reused in the meantime (very unlikely).
        assert!(!pid_alive(pid));
    }
}
