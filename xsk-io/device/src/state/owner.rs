//! The owner of an interface: the lock that makes one process its owner,
//! the record it keeps, and the clean end or the restore after a crash.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::step::Step;

use super::apply::{apply_record, read_sysctl, restore_sysctls, sysctl_path, write_sysctl};
use super::error::StateError;
use super::files::{paths, process_start, read_record, write_atomic};
use super::record::{DeviceState, Record};

/// The right to change one interface, and the record of its original state.
/// Dropping it releases the lock and keeps the record (so a crash and a
/// drop look alike); [`Owner::finish`] is the clean end.
#[derive(Debug)]
pub struct Owner {
    lock: File,
    lock_path: PathBuf,
    path: PathBuf,
    record: Record,
    /// Whether the record is on disk.
    written: bool,
}

/// What [`Owner::acquire`] and [`restore`] did with a previous owner's record.
#[derive(Debug, Default)]
pub struct Recovered {
    /// The dead owner's pid, if there was a record.
    pub pid: Option<u32>,
    /// What restoring the record did (empty if there was none, or the
    /// device already matched it).
    pub steps: Vec<Step>,
}

impl Owner {
    /// Takes the interface (in the calling thread's network namespace). A
    /// record left by a dead owner is applied first and removed if that
    /// worked. Fails with [`StateError::InUse`] if another owner lives.
    ///
    /// # Errors
    /// [`StateError::InUse`]; [`StateError::BadName`]; [`StateError::Io`] if
    /// the state directory cannot be written or the dead owner's record
    /// could not be fully restored (it is kept for `xsk-bench restore`);
    /// [`StateError::Parse`] for a corrupt record.
    pub fn acquire(ifname: &str) -> Result<(Owner, Recovered), StateError> {
        let (lock_path, path) = paths(ifname)?;
        let dir = lock_path.parent().expect("paths are in a directory");
        fs::create_dir_all(dir).map_err(|e| StateError::io(dir, e))?;
        let lock = loop {
            let lock = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&lock_path)
                .map_err(|e| StateError::io(&lock_path, e))?;
            // SAFETY: flock on a descriptor we own; no memory is passed.
            if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
                    return Err(StateError::io(&lock_path, e));
                }
                return Err(StateError::InUse { ifname: ifname.to_string(), owner: describe_owner(&lock_path, &path), path });
            }
            // A clean owner unlinks the lock file while holding it: if ours is
            // no longer the file at the path, we locked a dead inode; again.
            let same = match (lock.metadata(), fs::metadata(&lock_path)) {
                (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
                _ => false,
            };
            if same {
                break lock;
            }
        };
        // The pid in the lock file names the owner also while it records nothing.
        let _ = lock.set_len(0);
        let _ = (&lock).write_all(format!("{}\n", std::process::id()).as_bytes());
        let mut recovered = Recovered::default();
        if let Some(old) = read_record(&path)? {
            // We hold the lock, so its writer is gone (flock dies with the process).
            recovered.pid = Some(old.pid);
            recovered.steps = apply_record(&old);
            if recovered.steps.iter().any(Step::is_failed) {
                // Keep it for `xsk-bench restore` after the cause is fixed.
                return Err(StateError::Io {
                    path: path.clone(),
                    source: io::Error::other(format!(
                        "restoring what pid {} left changed failed: {}",
                        old.pid,
                        recovered.steps.iter().filter(|s| s.is_failed()).map(|s| s.to_string()).collect::<Vec<_>>().join("; ")
                    )),
                    fix: format!("fix the cause, then run `xsk-bench restore {ifname}`"),
                });
            }
            fs::remove_file(&path).map_err(|e| StateError::io(&path, e))?;
        }
        let pid = std::process::id();
        let record = Record {
            pid,
            pid_start: process_start(pid).unwrap_or(0),
            ifname: ifname.to_string(),
            ifindex: xsk_io::sys::if_nametoindex(ifname).unwrap_or(0),
            ..Default::default()
        };
        Ok((Owner { lock, lock_path, path, record, written: false }, recovered))
    }

    /// What is recorded so far (also on disk once anything was recorded).
    pub fn record(&self) -> &Record {
        &self.record
    }

    /// Where the record is (or will be) written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Adds a device's original state (merged into what is recorded for it:
    /// the first value recorded for a setting is the original) and writes the
    /// record. Call before changing the device.
    pub fn record_device(&mut self, d: DeviceState) -> Result<(), StateError> {
        match self.record.devices.iter_mut().find(|x| x.ifname == d.ifname) {
            Some(x) => {
                x.mtu = x.mtu.or(d.mtu);
                x.channels = x.channels.or(d.channels);
                for (n, on) in d.features {
                    if !x.features.iter().any(|(m, _)| *m == n) {
                        x.features.push((n, on));
                    }
                }
            }
            None => self.record.devices.push(d),
        }
        self.write()
    }

    /// Sets a sysctl (a path below `/proc/sys`, e.g.
    /// `net/ipv4/ip_local_reserved_ports`) after recording its original
    /// value; it is put back by [`finish`](Self::finish), or after a crash by
    /// the next owner or `xsk-bench restore`. Returns the original value.
    pub fn set_sysctl(&mut self, name: &str, value: &str) -> Result<String, StateError> {
        let path = sysctl_path(name);
        let original = read_sysctl(name).map_err(|e| StateError::io(&path, e))?;
        if !self.record.sysctls.iter().any(|(k, _)| k == name) {
            self.record.sysctls.push((name.to_string(), original.clone()));
            self.write()?;
        }
        write_sysctl(name, value).map_err(|e| StateError::io(&path, e))?;
        Ok(original)
    }

    fn write(&mut self) -> Result<(), StateError> {
        write_atomic(&self.path, &self.record.to_text())?;
        self.written = true;
        Ok(())
    }

    /// The clean end: puts the sysctls back (the device was restored by its
    /// undo log) and removes the record if all went well. The lock goes with `self`.
    pub fn finish(self) -> Vec<Step> {
        let steps = restore_sysctls(&self.record.sysctls);
        if !steps.iter().any(Step::is_failed) {
            if self.written {
                if let Err(e) = fs::remove_file(&self.path) {
                    tracing::warn!("removing {}: {e}", self.path.display());
                }
            }
            // Unlinked while locked: a waiter that opened it sees a stale inode and retries.
            let _ = fs::remove_file(&self.lock_path);
        }
        drop(self.lock);
        steps
    }
}

fn describe_owner(lock_path: &Path, path: &Path) -> String {
    let me = std::process::id();
    let pid = read_record(path).ok().flatten().map(|r| r.pid).or_else(|| {
        fs::read_to_string(lock_path).ok().and_then(|s| s.trim().parse::<u32>().ok())
    });
    match pid {
        Some(p) if p == me => format!("this process, pid {p}"),
        Some(p) => format!("pid {p}"),
        None => "pid unknown".into(),
    }
}

/// Puts `ifname` back as recorded by a dead owner (the `restore` command).
/// `Ok(Recovered { pid: None, .. })`: there was nothing to restore.
pub fn restore(ifname: &str) -> Result<Recovered, StateError> {
    let (owner, recovered) = Owner::acquire(ifname)?;
    owner.finish();
    Ok(recovered)
}
