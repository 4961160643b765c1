//! The labs this process has, so that they are removed also on
//! `process::exit` and a second signal, and removing the labs of processes
//! that died.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, Once};

use super::command::ip_batch;
use super::names::{parse_lab_name, validate_prefix};
use super::netns::{Netns, NETNS_RUN_DIR};

static REGISTRY: Mutex<Vec<String>> = Mutex::new(Vec::new());
static ATEXIT: Once = Once::new();

pub(super) fn registry() -> MutexGuard<'static, Vec<String>> {
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

pub(super) fn register(name: &str) {
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
pub(super) fn unregister(name: &str) -> bool {
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
pub(super) fn destroy_namespaces(names: &[String]) -> usize {
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
        xsk_device::state::forget_netns(ino);
    }
    let lines: Vec<String> = present.iter().map(|n| format!("netns del {n}")).collect();
    if let Err(e) = ip_batch(None, true, &lines) {
        tracing::warn!(error = %e, "lab: deleting namespaces failed");
    }
    present.iter().filter(|n| !Netns { name: n.to_string() }.exists()).count()
}

/// Remove labs left behind by dead processes: namespaces named by
/// [`lab_name`](super::lab_name) with exactly this prefix whose pid is no longer alive
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
pub(super) fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else { return false };
    if pid <= 0 {
        return true; // never treat "all processes"/"process group" as dead
    }
    // SAFETY: signal 0 only checks for existence and permission.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}
