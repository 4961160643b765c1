//! Crash-safe device state: what the port is about to change on an interface
//! (offloads, channels, MTU, sysctls) is written to a record under `/run`
//! before anything changes, so that a process killed by SIGKILL, the OOM
//! killer, a second Ctrl-C or a panic that aborts leaves a way back.
//!
//! Per interface (and network namespace) there are two files in
//! [`state_dir`]: `<ifname>.net<inode>.lock`, held with `flock` by the owner
//! for its whole life (the kernel drops the lock when the process dies, however
//! it dies), and `<ifname>.net<inode>.state`, the record, replaced atomically
//! (write to a temporary file, rename). The next owner that gets the lock and
//! finds a record restores it before looking at the device; `xsk-bench restore
//! IF` does only that. A second owner while the first lives gets
//! [`StateError::InUse`] and changes nothing.
//!
//! A clean exit restores through [`crate::tune::Tuning`] (the undo log) and
//! then removes the record; the record itself is applied only after a crash,
//! and then only where the device differs from it.

use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write as _};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::tune::ethtool::{self, Channels};
use crate::tune::step::{Outcome, Step};

/// Overrides the directory of the records (default `/run/xsk-io`).
pub const STATE_DIR_ENV: &str = "XSK_IO_STATE_DIR";
const DEFAULT_DIR: &str = "/run/xsk-io";
const MAGIC: &str = "xsk-io-state 1";

/// Where the records live: `$XSK_IO_STATE_DIR`, else `/run/xsk-io`.
pub fn state_dir() -> PathBuf {
    std::env::var_os(STATE_DIR_ENV).map_or_else(|| PathBuf::from(DEFAULT_DIR), PathBuf::from)
}

/// Why an interface cannot be owned, or its record not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// Another live process (or this one, through another [`Owner`]) owns the
    /// interface; nothing was touched.
    #[error(
        "{ifname} is in use by another xsk-io port ({owner}); refusing to touch it \
         (its original state is recorded in {}; stop that process first: once it is gone, \
         the next start or `xsk-bench restore {ifname}` puts the device back)",
        path.display()
    )]
    InUse {
        /// The interface.
        ifname: String,
        /// Who owns it, e.g. `"pid 1234"` or `"this process, pid 1234"`.
        owner: String,
        /// The owner's record.
        path: PathBuf,
    },
    /// Reading, writing or removing a lock or record file failed, or
    /// restoring a dead owner's record failed (the record is kept).
    #[error("state record {}: {source} (fix: {fix})", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
        /// What to do (permissions, `XSK_IO_STATE_DIR`, `xsk-bench restore`).
        fix: String,
    },
    /// A record that is not in the expected format; nothing was restored.
    #[error("state record {}: line {line}: {msg} (fix: check the file, or delete it to forget the recorded state)", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// The 1-based line (0: the file as a whole).
        line: usize,
        /// What is wrong.
        msg: String,
    },
    /// A name that cannot be an interface name or would escape the state
    /// directory (empty, too long, `/`, leading `.`, whitespace).
    #[error("bad interface name {0:?}")]
    BadName(String),
}

impl StateError {
    fn io(path: &Path, source: io::Error) -> StateError {
        let fix = match source.raw_os_error() {
            Some(libc::EACCES) | Some(libc::EPERM) | Some(libc::EROFS) => {
                format!("needs write access to {} (run as root, or set {STATE_DIR_ENV})", state_dir().display())
            }
            _ => "see the error".to_string(),
        };
        StateError::Io { path: path.to_path_buf(), source, fix }
    }
}

/// The original state of one device, as far as the port may change it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceState {
    /// The device (the interface itself, or its veth peer).
    pub ifname: String,
    /// MTU in bytes before.
    pub mtu: Option<u32>,
    /// Channel counts before (only when the port changes them).
    pub channels: Option<Channels>,
    /// `requested` bits of the features the port changes.
    pub features: Vec<(String, bool)>,
}

/// Everything one owner may change, recorded before the first change.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// The owner's pid.
    pub pid: u32,
    /// Start time of `pid` (clock ticks since boot), so a reused pid is not
    /// mistaken for the owner.
    pub pid_start: u64,
    /// The interface owned.
    pub ifname: String,
    /// The interface's index when recorded: a device re-created under the same
    /// name is not the one that was changed, and is left alone.
    pub ifindex: u32,
    /// Original state of every device the owner changes, in recording order.
    pub devices: Vec<DeviceState>,
    /// `/proc/sys` paths below `/proc/sys/` (e.g. `net/ipv4/ip_local_reserved_ports`)
    /// and their original values.
    pub sysctls: Vec<(String, String)>,
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            match it.next() {
                Some('n') => out.push('\n'),
                Some(o) => out.push(o),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

impl Record {
    /// The record as text: one fact per line, for people as much as for the parser.
    pub(crate) fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "{MAGIC}");
        let _ = writeln!(s, "# original device state, restored by the next xsk-io start or `xsk-bench restore {}`", self.ifname);
        let _ = writeln!(s, "owner {} {}", self.pid, self.pid_start);
        let _ = writeln!(s, "interface {} {}", self.ifname, self.ifindex);
        for d in &self.devices {
            let _ = writeln!(s, "device {}", d.ifname);
            if let Some(m) = d.mtu {
                let _ = writeln!(s, "mtu {m}");
            }
            if let Some(c) = d.channels {
                let _ = writeln!(s, "channels rx {} tx {} other {} combined {}", c.rx, c.tx, c.other, c.combined);
            }
            for (n, on) in &d.features {
                let _ = writeln!(s, "feature {n} {}", if *on { "on" } else { "off" });
            }
        }
        for (k, v) in &self.sysctls {
            let _ = writeln!(s, "sysctl {k} {}", escape(v));
        }
        s
    }

    pub(crate) fn parse(text: &str, path: &Path) -> Result<Record, StateError> {
        let err = |line: usize, msg: String| StateError::Parse { path: path.to_path_buf(), line, msg };
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, l)) if l == MAGIC => {}
            _ => return Err(err(1, format!("does not start with {MAGIC:?}"))),
        }
        let mut r = Record::default();
        for (i, line) in lines {
            let n = i + 1;
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let (key, rest) = line.split_once(' ').unwrap_or((line, ""));
            let words: Vec<&str> = rest.split_whitespace().collect();
            let num = |w: Option<&&str>| -> Result<u64, StateError> {
                w.and_then(|w| w.parse().ok()).ok_or_else(|| err(n, format!("expected a number in {line:?}")))
            };
            fn device(r: &mut Record, e: impl FnOnce() -> StateError) -> Result<&mut DeviceState, StateError> {
                r.devices.last_mut().ok_or_else(e)
            }
            let no_dev = || err(n, format!("{key} before any device line"));
            match key {
                "owner" => {
                    r.pid = num(words.first())? as u32;
                    r.pid_start = num(words.get(1))?;
                }
                "interface" => {
                    r.ifname = words.first().ok_or_else(|| err(n, "interface without a name".into()))?.to_string();
                    r.ifindex = num(words.get(1))? as u32;
                }
                "device" => {
                    let name = words.first().ok_or_else(|| err(n, "device without a name".into()))?;
                    r.devices.push(DeviceState { ifname: name.to_string(), ..Default::default() });
                }
                "mtu" => device(&mut r, no_dev)?.mtu = Some(num(words.first())? as u32),
                "channels" => {
                    let get = |k: &str| -> Result<u32, StateError> {
                        let i = words.iter().position(|w| *w == k).ok_or_else(|| err(n, format!("channels without {k}")))?;
                        Ok(num(words.get(i + 1))? as u32)
                    };
                    let c = Channels { rx: get("rx")?, tx: get("tx")?, other: get("other")?, combined: get("combined")?, ..Default::default() };
                    device(&mut r, no_dev)?.channels = Some(c);
                }
                "feature" => {
                    let (Some(name), Some(v)) = (words.first(), words.get(1)) else {
                        return Err(err(n, format!("expected `feature NAME on|off`, got {line:?}")));
                    };
                    let on = match *v {
                        "on" => true,
                        "off" => false,
                        _ => return Err(err(n, format!("expected on or off, got {v:?}"))),
                    };
                    device(&mut r, no_dev)?.features.push((name.to_string(), on));
                }
                "sysctl" => {
                    let (k, v) = rest.split_once(' ').unwrap_or((rest, ""));
                    if k.is_empty() {
                        return Err(err(n, "sysctl without a name".into()));
                    }
                    r.sysctls.push((k.to_string(), unescape(v)));
                }
                other => return Err(err(n, format!("unknown key {other:?}"))),
            }
        }
        if r.ifname.is_empty() {
            return Err(err(0, "no interface line".into()));
        }
        Ok(r)
    }
}

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

fn check_name(ifname: &str) -> Result<(), StateError> {
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
fn write_atomic(path: &Path, text: &str) -> Result<(), StateError> {
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

fn ok_step(what: String, from: String, to: String) -> Step {
    Step { what, outcome: Outcome::Changed { from, to } }
}

fn failed_step(what: String, error: String, fix: String) -> Step {
    Step { what, outcome: Outcome::Failed { error, fix } }
}

fn onoff(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// Puts one device back where it differs from `d`: features, then channels, then MTU.
fn restore_device(d: &DeviceState) -> Vec<Step> {
    let mut steps = Vec::new();
    let ifname = &d.ifname;
    if !d.features.is_empty() {
        let what = format!("{ifname}: features");
        match ethtool::features(ifname) {
            Ok(table) => {
                let differ: Vec<(&str, bool)> = d
                    .features
                    .iter()
                    .filter(|(n, on)| table.state(n).is_some_and(|s| s.requested != *on))
                    .map(|(n, on)| (n.as_str(), *on))
                    .collect();
                if !differ.is_empty() {
                    let list = differ.iter().map(|(n, on)| format!("{n} {}", onoff(*on))).collect::<Vec<_>>().join(" ");
                    steps.push(match ethtool::set_features(ifname, &table, &differ) {
                        Ok(_) => ok_step(what, "changed".into(), list),
                        Err(e) => failed_step(what, format!("ETHTOOL_SFEATURES: {e}"), format!("run: ethtool -K {ifname} {list}")),
                    });
                }
            }
            // Without the string set only rx-gro can have been changed (legacy ETHTOOL_SGRO).
            Err(_) => {
                for (n, on) in d.features.iter().filter(|(n, _)| n == "rx-gro") {
                    if ethtool::gro(ifname).ok() != Some(*on) {
                        steps.push(match ethtool::set_gro(ifname, *on) {
                            Ok(()) => ok_step(format!("{ifname}: {n}"), onoff(!on).into(), onoff(*on).into()),
                            Err(e) => failed_step(format!("{ifname}: {n}"), format!("ETHTOOL_SGRO: {e}"), format!("run: ethtool -K {ifname} gro {}", onoff(*on))),
                        });
                    }
                }
            }
        }
    }
    if let Some(want) = d.channels {
        let what = format!("{ifname}: channels");
        match ethtool::channels(ifname) {
            Ok(now) if (now.rx, now.tx, now.other, now.combined) == (want.rx, want.tx, want.other, want.combined) => {}
            Ok(now) => {
                let set = Channels { rx: want.rx, tx: want.tx, other: want.other, combined: want.combined, ..now };
                let show = |c: &Channels| format!("rx {} tx {} combined {}", c.rx, c.tx, c.combined);
                steps.push(match ethtool::set_channels(ifname, &set) {
                    Ok(()) => ok_step(what, show(&now), show(&set)),
                    Err(e) => failed_step(what, format!("ETHTOOL_SCHANNELS: {e}"), format!("run: ethtool -L {ifname} {}", show(&set))),
                });
            }
            Err(e) => steps.push(failed_step(what, format!("ETHTOOL_GCHANNELS: {e}"), format!("run: ethtool -l {ifname}"))),
        }
    }
    if let Some(want) = d.mtu {
        match crate::ifaddr::mtu(ifname) {
            Ok(now) if now == want => {}
            Ok(now) => steps.push(match crate::ifaddr::set_mtu(ifname, want) {
                Ok(()) => ok_step(format!("{ifname}: mtu"), now.to_string(), want.to_string()),
                Err(e) => failed_step(format!("{ifname}: mtu"), format!("SIOCSIFMTU: {e}"), format!("run: ip link set dev {ifname} mtu {want}")),
            }),
            Err(e) => steps.push(failed_step(format!("{ifname}: mtu"), e.to_string(), format!("run: ip link show {ifname}"))),
        }
    }
    steps
}

fn sysctl_path(name: &str) -> PathBuf {
    Path::new("/proc/sys").join(name.trim_start_matches('/'))
}

/// Reads a sysctl (`net/ipv4/ip_local_reserved_ports`), without the trailing newline.
pub fn read_sysctl(name: &str) -> io::Result<String> {
    let v = fs::read_to_string(sysctl_path(name))?;
    Ok(v.strip_suffix('\n').unwrap_or(&v).to_string())
}

fn write_sysctl(name: &str, value: &str) -> io::Result<()> {
    // An empty write is refused by some handlers (e.g. port ranges): a newline is "empty" to all.
    let v = if value.is_empty() { "\n".to_string() } else { value.to_string() };
    fs::write(sysctl_path(name), v)
}

fn restore_sysctls(sysctls: &[(String, String)]) -> Vec<Step> {
    let mut steps = Vec::new();
    // Newest first, like every undo.
    for (k, v) in sysctls.iter().rev() {
        let now = read_sysctl(k).unwrap_or_default();
        if now == *v {
            continue;
        }
        steps.push(match write_sysctl(k, v) {
            Ok(()) => ok_step(format!("sysctl {k}"), now, v.clone()),
            Err(e) => failed_step(format!("sysctl {k}"), e.to_string(), format!("run: sysctl -w {}={v:?}", k.replace('/', "."))),
        });
    }
    steps
}

/// Applies a record (after a crash): every device where it differs, then the sysctls.
pub(crate) fn apply_record(r: &Record) -> Vec<Step> {
    let mut steps = Vec::new();
    let index_now = crate::sys::if_nametoindex(&r.ifname).ok();
    if index_now != Some(r.ifindex) {
        steps.push(Step {
            what: format!("{}: device state", r.ifname),
            outcome: Outcome::Skipped(format!(
                "the recorded device (ifindex {}) is gone{}",
                r.ifindex,
                index_now.map_or(String::new(), |i| format!("; {} is now ifindex {i}, a different device", r.ifname))
            )),
        });
    } else {
        for d in &r.devices {
            steps.extend(restore_device(d));
        }
    }
    steps.extend(restore_sysctls(&r.sysctls));
    steps
}

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
            ifindex: crate::sys::if_nametoindex(ifname).unwrap_or(0),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Record {
        Record {
            pid: 4242,
            pid_start: 99,
            ifname: "tv0".into(),
            ifindex: 7,
            devices: vec![
                DeviceState {
                    ifname: "tv0".into(),
                    mtu: Some(1500),
                    channels: Some(Channels { rx: 2, tx: 2, ..Default::default() }),
                    features: vec![("rx-gro".into(), true)],
                },
                DeviceState { ifname: "tv1".into(), mtu: None, channels: None, features: vec![("tx-tcp-segmentation".into(), true), ("tx-udp-segmentation".into(), false)] },
            ],
            sysctls: vec![("net/ipv4/ip_local_port_range".into(), "32768\t60999".into()), ("x/y".into(), "a\\b\nc".into()), ("x/e".into(), "".into())],
        }
    }

    #[test]
    fn record_text_round_trips() {
        let r = sample();
        let t = r.to_text();
        assert!(t.starts_with(MAGIC), "{t}");
        assert!(t.contains("channels rx 2 tx 2 other 0 combined 0\n"), "{t}");
        assert_eq!(Record::parse(&t, Path::new("x")).unwrap(), r);
    }

    #[test]
    fn bad_records_are_refused_with_the_line() {
        let p = Path::new("/run/xsk-io/tv0.state");
        let e = Record::parse("hello", p).unwrap_err().to_string();
        assert!(e.contains("line 1") && e.contains("does not start with"), "{e}");
        let e = Record::parse(&format!("{MAGIC}\ninterface tv0 3\nmtu 1500\n"), p).unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("before any device"), "{e}");
        let e = Record::parse(&format!("{MAGIC}\ninterface tv0 3\ndevice tv0\nfeature rx-gro maybe\n"), p).unwrap_err().to_string();
        assert!(e.contains("line 4"), "{e}");
        let e = Record::parse(&format!("{MAGIC}\nowner 1 2\n"), p).unwrap_err().to_string();
        assert!(e.contains("no interface line"), "{e}");
    }

    #[test]
    fn own_process_is_alive_and_a_wrong_start_time_is_not() {
        let me = std::process::id();
        let start = process_start(me).expect("/proc/self/stat");
        assert!(owner_alive(me, start));
        assert!(!owner_alive(me, start + 1), "a reused pid must not pass for the owner");
        assert!(!owner_alive(0, 0));
    }

    #[test]
    fn names_that_would_escape_the_directory_are_refused() {
        for bad in ["", "../etc", "a/b", ".hidden", "a b", "0123456789abcdef"] {
            assert!(matches!(check_name(bad), Err(StateError::BadName(_))), "{bad:?}");
        }
        check_name("eth0").unwrap();
    }

    /// Lock, record, second owner refused, crash (drop without finish) leaves
    /// the record, next owner picks it up. Runs as any user in a temp dir;
    /// the interface does not exist, so the device part is skipped.
    #[test]
    fn second_owner_is_refused_and_a_crash_leaves_the_record() {
        let dir = std::env::temp_dir().join(format!("xsk-io-state-test-{}", std::process::id()));
        // Process-global, but this is the only test that uses the state directory.
        std::env::set_var(STATE_DIR_ENV, &dir);
        let name = "xsknotthere0";
        let (mut a, rec) = Owner::acquire(name).unwrap();
        assert!(rec.pid.is_none());
        a.record_device(DeviceState { ifname: name.into(), mtu: Some(1500), ..Default::default() }).unwrap();
        let e = Owner::acquire(name).unwrap_err();
        assert!(matches!(e, StateError::InUse { .. }), "{e}");
        assert!(e.to_string().contains("this process"), "{e}");
        let on_disk = read_record(a.path()).unwrap().unwrap();
        assert_eq!(on_disk, *a.record());
        let path = a.path().to_path_buf();
        drop(a); // a crash, as far as the files know
        assert!(path.exists(), "the record survives its owner");
        let (b, rec) = Owner::acquire(name).unwrap();
        assert_eq!(rec.pid, Some(std::process::id()));
        assert!(rec.steps.iter().any(|s| matches!(&s.outcome, Outcome::Skipped(w) if w.contains("gone"))), "{:?}", rec.steps);
        assert!(!path.exists(), "applied records are removed");
        assert!(b.finish().is_empty());
        let _ = fs::remove_dir_all(&dir);
    }
}
