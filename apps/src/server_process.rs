//! A server the tools run as a child process in a lab namespace (rr-server, or redis-server
//! for rr-demo's Redis cases): started under `ip netns exec`, which execs it, so the child's
//! pid is the server's own (for its CPU time and /proc files); its output in log files; ready
//! when it says so; stopped with SIGINT, as a user would; killed if still running when dropped,
//! so an error path never leaves one behind.

use std::ffi::OsStr;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use xsk_lab::signals;
use xsk_lab::lab::Netns;

/// Why a server did not start, get ready or stop. The messages carry the end of its output,
/// which usually says why.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("creating {}: {source}", path.display())]
    Log { path: PathBuf, source: std::io::Error },
    #[error("starting {name}: {source}")]
    Start { name: String, source: std::io::Error },
    #[error("checking on {name}: {source}")]
    Wait { name: String, source: std::io::Error },
    #[error("{name} exited before it was ready ({status}); {output}")]
    ExitedEarly { name: String, status: ExitStatus, output: String },
    #[error("{name} was not ready within {timeout:?}; {output}")]
    NotReady { name: String, timeout: Duration, output: String },
    #[error("interrupted")]
    Interrupted,
    #[error("{name} did not exit within {timeout:?} of SIGINT (killed); {output}")]
    NoExit { name: String, timeout: Duration, output: String },
}

/// Lines of output an error message carries.
const ERROR_LINES: usize = 15;

/// A running server child; see the module doc.
pub struct ServerProcess {
    name: String,
    child: Child,
    out: PathBuf,
    /// Where stderr goes when it has a file of its own (else it shares `out`).
    err: Option<PathBuf>,
}

impl ServerProcess {
    /// `ip netns exec NS PROGRAM`: the command to add the server's arguments to and pass to
    /// [`ServerProcess::spawn`].
    pub fn command(ns: &Netns, program: impl AsRef<OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &ns.name]).arg(program);
        c
    }

    /// Starts `cmd` with no input, its stdout in `out` and its stderr in `err` (or in `out` as
    /// well). `name` is what messages call it, e.g. `rr-server (xsk)`.
    pub fn spawn(name: impl Into<String>, mut cmd: Command, out: &Path, err: Option<&Path>) -> Result<Self, ServerError> {
        let create = |p: &Path| File::create(p).map_err(|source| ServerError::Log { path: p.to_path_buf(), source });
        let stdout = create(out)?;
        let stderr = match err {
            Some(e) => create(e)?,
            None => stdout.try_clone().map_err(|source| ServerError::Log { path: out.to_path_buf(), source })?,
        };
        let name = name.into();
        let child = cmd
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .map_err(|source| ServerError::Start { name: name.clone(), source })?;
        Ok(ServerProcess { name, child, out: out.to_path_buf(), err: err.map(Path::to_path_buf) })
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Everything it wrote so far: stdout, then stderr if that has a file of its own.
    pub fn output(&self) -> String {
        let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
        let mut s = read(&self.out);
        if let Some(e) = &self.err {
            s += &read(e);
        }
        s
    }

    /// The last `n` lines of its output, indented, for error messages.
    pub fn output_tail(&self, n: usize) -> String {
        let text = self.output();
        let lines: Vec<&str> = text.lines().collect();
        let mut s = format!("last lines of {}:", self.out.display());
        for l in &lines[lines.len().saturating_sub(n)..] {
            s += "\n    ";
            s += l;
        }
        s
    }

    /// Waits until `ready` says so (polled every 20 ms), failing early if the server exits or
    /// the lab is interrupted (Ctrl-C).
    pub fn wait_until(&mut self, timeout: Duration, mut ready: impl FnMut() -> bool) -> Result<(), ServerError> {
        let deadline = Instant::now() + timeout;
        loop {
            if ready() {
                return Ok(());
            }
            if let Some(status) = self.try_wait()? {
                return Err(ServerError::ExitedEarly { name: self.name.clone(), status, output: self.output_tail(ERROR_LINES) });
            }
            if signals::interrupted() {
                return Err(ServerError::Interrupted);
            }
            if Instant::now() > deadline {
                return Err(ServerError::NotReady { name: self.name.clone(), timeout, output: self.output_tail(ERROR_LINES) });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// [`ServerProcess::wait_until`] the server has written `file` (rr-server's `--ready-file`).
    pub fn wait_ready_file(&mut self, file: &Path, timeout: Duration) -> Result<(), ServerError> {
        self.wait_until(timeout, || file.exists())
    }

    /// SIGINT (if it still runs), then its exit status within `timeout`; after that it is
    /// killed and this is an error.
    pub fn stop(&mut self, timeout: Duration) -> Result<ExitStatus, ServerError> {
        if self.try_wait()?.is_none() {
            if let Ok(pid) = i32::try_from(self.child.id()) {
                // SAFETY: kill(2) on our own child, which is not reaped yet.
                unsafe { libc::kill(pid, libc::SIGINT) };
            }
        }
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                self.kill();
                return Err(ServerError::NoExit { name: self.name.clone(), timeout, output: self.output_tail(ERROR_LINES) });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn try_wait(&mut self) -> Result<Option<ExitStatus>, ServerError> {
        self.child.try_wait().map_err(|source| ServerError::Wait { name: self.name.clone(), source })
    }

    fn kill(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("server-process-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn ready_then_stopped_by_sigint() {
        let d = scratch("ready");
        let ready = d.join("ready");
        let script = format!("trap 'echo bye; exit 0' INT; echo up; touch {}; while :; do sleep 0.05; done", ready.display());
        let mut s = ServerProcess::spawn("sh", sh(&script), &d.join("out"), Some(&d.join("err"))).unwrap();
        s.wait_ready_file(&ready, Duration::from_secs(10)).unwrap();
        let st = s.stop(Duration::from_secs(10)).unwrap();
        assert!(st.success(), "{st}");
        assert_eq!(s.output(), "up\nbye\n");
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn an_early_exit_is_reported_with_its_output() {
        let d = scratch("early");
        let mut s = ServerProcess::spawn("sh", sh("echo no such interface >&2; exit 3"), &d.join("log"), None).unwrap();
        let e = s.wait_until(Duration::from_secs(10), || false).unwrap_err();
        assert!(matches!(e, ServerError::ExitedEarly { .. }), "{e}");
        assert!(e.to_string().contains("no such interface"), "{e}");
        std::fs::remove_dir_all(d).unwrap();
    }

    #[test]
    fn one_that_ignores_sigint_is_killed() {
        let d = scratch("stubborn");
        let mut s = ServerProcess::spawn("sh", sh("trap '' INT; exec sleep 30"), &d.join("log"), None).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let e = s.stop(Duration::from_millis(300)).unwrap_err();
        assert!(matches!(e, ServerError::NoExit { .. }), "{e}");
        assert!(s.child.try_wait().unwrap().is_some(), "killed and reaped");
        std::fs::remove_dir_all(d).unwrap();
    }
}
