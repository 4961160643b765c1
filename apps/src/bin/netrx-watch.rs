//! Runs a client command against a server process and reports who ran whose network receive
//! meanwhile (`apps::netrx`): for load generators other than rr-bench (h2load against the
//! tokio adapter's examples), so their server's CPU can be charged its own receive path on a
//! veth lab, as rr-bench's figures are.

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use anyhow::{Context, Result};
use apps::netrx;
use clap::Parser;

#[derive(Parser, Debug)]
#[command(
    name = "netrx-watch",
    version,
    about = "Run a client command and time the NET_RX softirq work that ran in the server's and in the client's process meanwhile",
    long_about = "On a veth pair the sender's own system call runs the receiver's NET_RX softirq, so a \
server's process CPU holds its client's receive path and not its own (apps::netrx). This runs COMMAND \
(held at a gate until the accountant is attached, so the client's pid is counted from its first \
instruction; `ip netns exec NS prog ...` keeps the pid through its exec), waits for it, and writes a \
JSON object to --out: NET_RX nanoseconds run in the server's process, in the client's and elsewhere, \
and the system calls each entered. Own-receive server CPU = server CPU - in_server_ns + in_client_ns. \
Exits with COMMAND's status. Needs root (BPF)."
)]
struct Cli {
    /// The server's process id (its tgid).
    #[arg(long)]
    server: u32,
    /// Where to write the JSON totals.
    #[arg(long)]
    out: PathBuf,
    /// The client command and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

fn main() -> ExitCode {
    match run(&Cli::parse()) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("netrx-watch: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: &Cli) -> Result<u8> {
    let (program, args) = cli.command.split_first().context("no command")?;
    let mut cmd = Command::new(program);
    cmd.args(args);
    let (out, d) = netrx::watch(cli.server, &cmd, false)?;
    let json = serde_json::json!({
        "in_server_ns": d.in_server.as_nanos() as u64,
        "in_client_ns": d.in_client.as_nanos() as u64,
        "elsewhere_ns": d.elsewhere.as_nanos() as u64,
        "server_syscalls": d.server_syscalls,
        "client_syscalls": d.client_syscalls,
    });
    std::fs::write(&cli.out, format!("{json}\n")).with_context(|| format!("writing {}", cli.out.display()))?;
    Ok(out.status.code().map_or(1, |c| c.clamp(0, 255) as u8))
}
