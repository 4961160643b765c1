//! Helpers shared by the apps' root integration tests: scratch folders and processes run under
//! `ip netns exec`. Each test binary uses a part of them.
#![allow(dead_code)]

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use xsk_lab::lab::Netns;

/// Scratch folder for ready files, JSON and logs of one test, unique to this process.
pub fn scratch(suite: &str, name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("apps-{suite}-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A binary running under `ip netns exec` (which execs it: the child pid is the binary's),
/// with stdout/stderr in files. Killed on drop if still running.
pub struct Proc {
    pub child: Child,
    out: PathBuf,
    err: PathBuf,
}

impl Proc {
    pub fn spawn(ns: &Netns, exe: &str, args: &[&str], dir: &Path, name: &str, stdin: Stdio) -> Proc {
        let (out, err) = (dir.join(format!("{name}.out")), dir.join(format!("{name}.err")));
        let child = Command::new("ip")
            .args(["netns", "exec", &ns.name, exe])
            .args(args)
            .stdin(stdin)
            .stdout(File::create(&out).unwrap())
            .stderr(File::create(&err).unwrap())
            .spawn()
            .expect("spawn under ip netns exec");
        Proc { child, out, err }
    }

    /// A file next to its output files (in the folder given to `spawn`).
    pub fn sibling(&self, name: &str) -> PathBuf {
        self.out.with_file_name(name)
    }

    pub fn stdout(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    pub fn output(&self) -> String {
        format!("--- stdout\n{}--- stderr\n{}", self.stdout(), std::fs::read_to_string(&self.err).unwrap_or_default())
    }

    /// Waits for `path` to appear; panics if the process exits first or the time runs out.
    pub fn wait_file(&mut self, path: &Path, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while !path.exists() {
            if let Some(st) = self.child.try_wait().unwrap() {
                panic!("exited ({st}) before writing {}:\n{}", path.display(), self.output());
            }
            assert!(Instant::now() < deadline, "no {} within {timeout:?}:\n{}", path.display(), self.output());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits for the exit; kills the process and panics after `timeout`.
    pub fn wait(&mut self, timeout: Duration) -> ExitStatus {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("did not exit within {timeout:?}:\n{}", self.output());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends `sig` and waits for the exit.
    pub fn signal(&mut self, sig: libc::c_int, timeout: Duration) -> ExitStatus {
        // SAFETY: plain syscall on our own, not yet reaped child.
        unsafe { libc::kill(self.child.id() as i32, sig) };
        self.wait(timeout)
    }

    /// Runs to completion and returns stdout; panics on a non-zero exit.
    pub fn finish(mut self, timeout: Duration) -> String {
        let st = self.wait(timeout);
        assert!(st.success(), "exit {st}:\n{}", self.output());
        self.stdout()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
