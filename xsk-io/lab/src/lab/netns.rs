//! A named network namespace: running commands in it, and moving a thread
//! into it (with a `/sys` that shows it) and back.

use std::fmt;
use std::fs::File;
use std::io;
use std::marker::PhantomData;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;

use super::command::{describe, run_command};
use super::error::LabError;

/// Where `ip netns add` puts its bind mounts (iproute2's NETNS_RUN_DIR).
pub const NETNS_RUN_DIR: &str = "/run/netns";

/// A named network namespace (`/run/netns/NAME`). This is a plain handle: it
/// does not delete the namespace on drop ([`Lab`](super::Lab) does).
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
    /// killed when the `Child` is dropped, but it is when the [`Lab`](super::Lab) is.
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
