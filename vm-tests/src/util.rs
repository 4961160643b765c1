//! Small helpers: running commands with their stderr in the error, timeouts on children,
//! SIGINT/SIGTERM as a flag that long waits poll, and ELF checks.

use std::borrow::BorrowMut;
use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// The command line of `cmd`, for messages.
pub fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Runs `cmd` to completion (stdin null); its stdout on success, an error naming the command
/// and carrying its stderr otherwise.
pub fn run(mut cmd: impl BorrowMut<Command>) -> Result<String> {
    let cmd = cmd.borrow_mut();
    let out = output(&mut *cmd)?;
    if !out.status.success() {
        bail!(
            "`{}` failed ({}): {}",
            describe(cmd),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `cmd` to completion (stdin null) and returns its output whatever the exit status.
pub fn output(mut cmd: impl BorrowMut<Command>) -> Result<Output> {
    let cmd = cmd.borrow_mut();
    cmd.stdin(Stdio::null());
    cmd.output()
        .with_context(|| format!("could not run `{}`", describe(cmd)))
}

/// `Command::new(prog).args(args)`.
pub fn cmd<I, S>(prog: &str, args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut c = Command::new(prog);
    c.args(args);
    c
}

static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static SIGNALS: Once = Once::new();

extern "C" fn on_signal(_sig: libc::c_int) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// SIGINT/SIGTERM set a flag ([`interrupted`]) instead of killing the process, so the waits
/// of the harness return an error and the guards kill QEMU and delete the namespaces.
pub fn install_signal_handlers() {
    SIGNALS.call_once(|| {
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: a zeroed sigaction is a valid start; the handler only stores an atomic.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                sa.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
    });
}

/// True once SIGINT or SIGTERM arrived.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// Errors out if a signal arrived.
pub fn check_interrupted() -> Result<()> {
    if interrupted() {
        bail!("interrupted by a signal");
    }
    Ok(())
}

/// Waits for `child` at most `timeout`; kills it (SIGKILL) when the time is up or a signal
/// arrived. Returns `None` if it had to be killed.
pub fn wait_timeout(child: &mut Child, timeout: Duration) -> Result<Option<ExitStatus>> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(st) = child.try_wait().context("waiting for a child process")? {
            return Ok(Some(st));
        }
        if Instant::now() >= deadline || interrupted() {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `cmd` with stdout and stderr captured, killing it after `timeout`.
/// Returns (status or None if killed, stdout, stderr).
pub fn run_timeout(
    cmd: &mut Command,
    timeout: Duration,
) -> Result<(Option<ExitStatus>, String, String)> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .with_context(|| format!("could not run `{}`", describe(cmd)))?;
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let t_out = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let status = wait_timeout(&mut child, timeout)?;
    let out = t_out.join().unwrap_or_default();
    let err = t_err.join().unwrap_or_default();
    Ok((
        status,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    ))
}

/// Looks `name` up in PATH and the sbin directories (root's tools live there).
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let extra = [
        "/usr/local/sbin",
        "/usr/local/bin",
        "/usr/sbin",
        "/usr/bin",
        "/sbin",
        "/bin",
    ];
    std::env::split_paths(&path)
        .chain(extra.iter().map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// What an ELF file is, as far as the initramfs cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElfKind {
    /// Has a PT_INTERP: needs the dynamic loader and shared libraries.
    Dynamic,
    /// No PT_INTERP (static, or static-pie).
    Static,
    NotElf,
}

/// Reads the program headers of `path` (64-bit little-endian ELF) and tells whether it needs
/// a dynamic loader.
pub fn elf_kind(path: &Path) -> Result<ElfKind> {
    let data = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    if data.len() < 64 || &data[..4] != b"\x7fELF" || data[4] != 2 || data[5] != 1 {
        return Ok(ElfKind::NotElf);
    }
    let u16_at = |o: usize| u16::from_le_bytes([data[o], data[o + 1]]) as usize;
    let u32_at = |o: usize| u32::from_le_bytes(data[o..o + 4].try_into().unwrap());
    let phoff = u64::from_le_bytes(data[32..40].try_into().unwrap()) as usize;
    let phentsize = u16_at(54);
    let phnum = u16_at(56);
    for i in 0..phnum {
        let o = phoff + i * phentsize;
        if o + 4 > data.len() {
            break;
        }
        if u32_at(o) == 3 {
            // PT_INTERP
            return Ok(ElfKind::Dynamic);
        }
    }
    Ok(ElfKind::Static)
}

/// Base-36 digits of `n` (short unique names).
pub fn base36(mut n: u64) -> String {
    const D: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    if n == 0 {
        return "0".into();
    }
    let mut v = Vec::new();
    while n > 0 {
        v.push(D[(n % 36) as usize]);
        n /= 36;
    }
    v.reverse();
    String::from_utf8(v).unwrap()
}

/// Parses base-36 digits.
pub fn parse_base36(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 12 {
        return None;
    }
    s.chars()
        .try_fold(0u64, |acc, c| Some(acc * 36 + c.to_digit(36)? as u64))
}

/// Whether a process with this pid exists.
pub fn pid_alive(pid: i32) -> bool {
    if pid <= 0 {
        return true;
    }
    // SAFETY: signal 0 only checks for existence.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Median of `v` (mean of the two middle values for an even count); NaN when empty.
pub fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// Xorshift64* pseudo-random numbers (payloads, no external crate).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let r = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&r[..chunk.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base36_round_trip() {
        for n in [0u64, 1, 35, 36, 12345, 4_194_304] {
            assert_eq!(parse_base36(&base36(n)), Some(n));
        }
        assert_eq!(parse_base36(""), None);
        assert_eq!(parse_base36("x-y"), None);
    }

    #[test]
    fn median_odd_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn elf_kind_of_self_and_text() {
        let me = std::env::current_exe().unwrap();
        assert_ne!(elf_kind(&me).unwrap(), ElfKind::NotElf);
        let dir = std::env::temp_dir().join(format!("vmt-elf-{}", std::process::id()));
        std::fs::write(&dir, b"#!/bin/sh\n").unwrap();
        assert_eq!(elf_kind(&dir).unwrap(), ElfKind::NotElf);
        let _ = std::fs::remove_file(&dir);
    }
}
