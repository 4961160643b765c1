//! Running `ip` and commands in namespaces: the command line and stderr go
//! into the error.

use std::io::Write;
use std::process::{Command, Stdio};

use super::error::LabError;

pub(super) fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Run a command to completion, feeding `stdin`; stdout on success.
pub(super) fn run_command(mut cmd: Command, stdin: Option<&str>) -> Result<String, LabError> {
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

pub(super) fn ip(args: &[&str]) -> Result<String, LabError> {
    let mut cmd = Command::new("ip");
    cmd.args(args);
    run_command(cmd, None)
}

/// `ip [-n ns] [-force] -batch -` with one command per line.
pub(super) fn ip_batch(netns: Option<&str>, force: bool, lines: &[String]) -> Result<String, LabError> {
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
