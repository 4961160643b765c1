//! How the records and locks are named (per interface and network
//! namespace), the owner's process identity, and atomic writes.

use std::fs::{self, File};
use std::io::{self, Write as _};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::dir::state_dir;
use super::error::StateError;
use super::record::Record;

/// Start time of a process (field 22 of `/proc/PID/stat`), or None if it is gone.
pub(crate) fn process_start(pid: u32) -> Option<u64> {
    let s = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    let after = &s[s.rfind(')')? + 1..];
    after.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the process that wrote a record still runs.
#[cfg(test)]
pub(crate) fn owner_alive(pid: u32, start: u64) -> bool {
    pid != 0 && process_start(pid) == Some(start)
}

fn netns_inode() -> u64 {
    fs::metadata("/proc/thread-self/ns/net").map(|m| m.ino()).unwrap_or(0)
}

pub(super) fn check_name(ifname: &str) -> Result<(), StateError> {
    if ifname.is_empty() || ifname.len() >= libc::IFNAMSIZ || ifname.contains('/') || ifname.starts_with('.') || ifname.contains(char::is_whitespace) {
        return Err(StateError::BadName(ifname.to_string()));
    }
    Ok(())
}

/// Paths of the lock and the record of `ifname` in the calling thread's network namespace.
pub(crate) fn paths(ifname: &str) -> Result<(PathBuf, PathBuf), StateError> {
    check_name(ifname)?;
    let dir = state_dir();
    let stem = format!("{ifname}.net{}", netns_inode());
    Ok((dir.join(format!("{stem}.lock")), dir.join(format!("{stem}.state"))))
}

/// Removes the records and locks of every interface of a network namespace
/// (by inode) that is about to be deleted: nobody can restore its devices
/// after that, and nobody can open the same paths again. Returns how many files went.
///
/// For whoever deletes network namespaces in which ports may have run (the
/// `xsk-lab` crate's labs, after killing what ran inside): the inode is the
/// `st_ino` of the namespace (`/run/netns/NAME` or `/proc/PID/ns/net`). Public
/// so that the file naming stays this module's business.
pub fn forget_netns(ino: u64) -> usize {
    let suffix_lock = format!(".net{ino}.lock");
    let suffix_state = format!(".net{ino}.state");
    let Ok(dir) = fs::read_dir(state_dir()) else { return 0 };
    dir.flatten()
        .filter(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.ends_with(&suffix_lock) || n.ends_with(&suffix_state)
        })
        .filter(|e| fs::remove_file(e.path()).is_ok())
        .count()
}

/// Reads a record; `Ok(None)` if there is none.
pub(crate) fn read_record(path: &Path) -> Result<Option<Record>, StateError> {
    match fs::read_to_string(path) {
        Ok(t) => Record::parse(&t, path).map(Some),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StateError::io(path, e)),
    }
}

/// Writes `text` to `path` so that a reader sees the old or the new file, never a part.
pub(super) fn write_atomic(path: &Path, text: &str) -> Result<(), StateError> {
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let write = || -> io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = fs::remove_file(&tmp);
        StateError::io(path, e)
    })
}
