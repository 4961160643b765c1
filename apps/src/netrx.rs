//! Who runs whose network receive: NET_RX softirq time by the process it ran in.
//!
//! Without `CONFIG_IRQ_TIME_ACCOUNTING` (this machine, and Debian's kernels) a softirq is
//! charged to the task it interrupted, and on a veth pair the sender's own `sendto` runs the
//! receiver's NET_RX softirq: the peer's IP and TCP receive and the wake-up of its reader (for
//! the AF_XDP stack: the XDP program and the copy into the UMEM). A server's process CPU then
//! holds its client's receive path and not its own, which flatters kernel TCP at light load (its
//! whole receive runs in softirq) against the stack (whose TCP runs in its process either way).
//!
//! [`NetRx`] times every NET_RX softirq with a raw tracepoint program (`bpf/netrx.bpf.c`) and sums
//! it by context: the server's process, the client's, anywhere else. [`own_rx`] moves each
//! side's receive back to it: server CPU - NET_RX run in the server + NET_RX run in the client.
//! That is exact when the two processes are the only senders on the path (the lab's veth pair,
//! one client process); NET_RX run elsewhere (ksoftirqd, an idle CPU's interrupt) is reported
//! and charged to nobody.
//!
//! The same program counts the system calls each of the two processes enters (a raw
//! tracepoint on `sys_enter`), for system calls per request on either side, whatever the
//! backend: the figure that tells epoll, io_uring and the AF_XDP stack's batching apart.

use std::io::Write;
use std::ops::Sub;
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use anyhow::Context;
use libbpf_rs::{Link, MapCore, MapFlags, MapHandle, Object, ObjectBuilder};

/// The compiled program, 8-byte aligned for libelf.
#[repr(C, align(8))]
struct Aligned<B: ?Sized>(B);
static NETRX_OBJ: &Aligned<[u8]> = &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/netrx.bpf.o")));

/// NET_RX softirq time, summed over CPUs, by the context it ran in; and the system calls
/// of the two processes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetRxTimes {
    pub in_server: Duration,
    pub in_client: Duration,
    pub elsewhere: Duration,
    /// System calls the server's process entered.
    pub server_syscalls: u64,
    /// System calls the client's process entered.
    pub client_syscalls: u64,
}

impl Sub for NetRxTimes {
    type Output = NetRxTimes;
    fn sub(self, rhs: NetRxTimes) -> NetRxTimes {
        NetRxTimes {
            in_server: self.in_server.saturating_sub(rhs.in_server),
            in_client: self.in_client.saturating_sub(rhs.in_client),
            elsewhere: self.elsewhere.saturating_sub(rhs.elsewhere),
            server_syscalls: self.server_syscalls.saturating_sub(rhs.server_syscalls),
            client_syscalls: self.client_syscalls.saturating_sub(rhs.client_syscalls),
        }
    }
}

/// Server CPU with each side charged its own receive path: `server_cpu` minus the NET_RX work
/// that ran in the server (its client's receive) plus the NET_RX work that ran in the client
/// (the server's receive), over the same window.
pub fn own_rx(server_cpu: Duration, netrx: NetRxTimes) -> Duration {
    server_cpu.saturating_sub(netrx.in_server) + netrx.in_client
}

/// The attached accountant; detached when dropped (bpf_links).
pub struct NetRx {
    acc: MapHandle,
    calls: MapHandle,
    _links: [Link; 3],
    _obj: Object,
}

impl NetRx {
    /// Load and attach the program, counting NET_RX time in `server`'s and `client`'s
    /// processes (tgids). Needs CAP_BPF and CAP_PERFMON (root).
    pub fn attach(server: u32, client: u32) -> Result<NetRx, libbpf_rs::Error> {
        // libbpf prints its progress on stderr by default: to tracing, as xsk-io does.
        xsk_device::steer::route_libbpf_logs();
        let obj = ObjectBuilder::default()
            .name("netrx")
            .and_then(|b| b.open_memory(&NETRX_OBJ.0))
            .and_then(|open| open.load())?;
        let map = |name: &str| -> Result<MapHandle, libbpf_rs::Error> {
            let m = obj.maps().find(|m| m.name() == name).ok_or_else(|| missing(name))?;
            MapHandle::try_from(&m)
        };
        let targets = map("targets")?;
        targets.update(&0u32.to_ne_bytes(), &server.to_ne_bytes(), MapFlags::ANY)?;
        targets.update(&1u32.to_ne_bytes(), &client.to_ne_bytes(), MapFlags::ANY)?;
        let acc = map("acc")?;
        let calls = map("calls")?;
        let prog = |name: &str| -> Result<Link, libbpf_rs::Error> {
            obj.progs_mut().find(|p| p.name() == name).ok_or_else(|| missing(name))?.attach()
        };
        // Entry after exit: an exit seen before its entry is skipped by the program.
        let exit = prog("netrx_exit")?;
        let entry = prog("netrx_entry")?;
        let sys = prog("count_syscalls")?;
        Ok(NetRx { acc, calls, _links: [entry, exit, sys], _obj: obj })
    }

    /// The totals since the program was attached.
    pub fn read(&self) -> Result<NetRxTimes, libbpf_rs::Error> {
        let sum = |m: &MapHandle, i: u32| -> Result<u64, libbpf_rs::Error> {
            let per_cpu = m.lookup_percpu(&i.to_ne_bytes(), MapFlags::ANY)?.unwrap_or_default();
            Ok(per_cpu.iter().map(|v| ns(v)).sum())
        };
        let slot = |i: u32| sum(&self.acc, i).map(Duration::from_nanos);
        Ok(NetRxTimes {
            in_server: slot(0)?,
            in_client: slot(1)?,
            elsewhere: slot(2)?,
            server_syscalls: sum(&self.calls, 0)?,
            client_syscalls: sum(&self.calls, 1)?,
        })
    }
}

/// Why [`watch`] gave no totals.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The command never ran: it could not be started, or the accountant could not be
    /// attached or read before its gate opened (no root, no BPF), and it was stopped there.
    #[error("{0:#}")]
    NotRun(anyhow::Error),
    /// The command ran (or may have): opening its gate, waiting for it or reading the
    /// totals after it failed.
    #[error("{0:#}")]
    Ran(anyhow::Error),
}

/// Runs `cmd` (its program, arguments, environment and directory) and times the NET_RX work
/// that ran in `server`'s process and in the command's meanwhile: the command is held at a
/// gate (`sh -c 'read && exec'`, so the pid counted is the command's from its first
/// instruction; `ip netns exec NS prog` keeps it through its own exec) until the accountant
/// is attached. `capture`: the command's stdout and stderr come back in the output, else they
/// are inherited. Its stdin is the closed gate. Needs root. A caller may run the command
/// again without the accountant after [`WatchError::NotRun`], not after `Ran`.
pub fn watch(server: u32, cmd: &Command, capture: bool) -> Result<(Output, NetRxTimes), WatchError> {
    let mut gated = Command::new("sh");
    gated.arg("-c").arg("read _gate && exec \"$@\"").arg("sh").arg(cmd.get_program()).args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => gated.env(k, v),
            None => gated.env_remove(k),
        };
    }
    if let Some(dir) = cmd.get_current_dir() {
        gated.current_dir(dir);
    }
    gated.stdin(Stdio::piped());
    if capture {
        gated.stdout(Stdio::piped()).stderr(Stdio::piped());
    }
    let mut child = gated
        .spawn()
        .with_context(|| format!("starting {:?}", cmd.get_program()))
        .map_err(WatchError::NotRun)?;
    let gate = child.stdin.take();
    let stop = |child: &mut std::process::Child| {
        let _ = child.kill();
        let _ = child.wait();
    };
    let started = NetRx::attach(server, child.id()).context("attaching the NET_RX accountant (needs root)").and_then(|a| {
        let before = a.read().context("reading the accountant")?;
        Ok((a, before))
    });
    let (acct, before) = match started {
        Ok(s) => s,
        Err(e) => {
            // A gate never opened leaves the shell at EOF: `read` fails and it exits.
            drop(gate);
            stop(&mut child);
            return Err(WatchError::NotRun(e));
        }
    };
    let opened = gate.context("the command's stdin").and_then(|mut g| g.write_all(b"\n").context("opening the gate"));
    if let Err(e) = opened {
        stop(&mut child);
        return Err(WatchError::Ran(e));
    }
    let out = child.wait_with_output().context("waiting for the command").map_err(WatchError::Ran)?;
    let d = acct.read().context("reading the accountant").map_err(WatchError::Ran)?;
    Ok((out, d - before))
}

/// The process's accountant, once [`install`]ed: rr-bench reads it with the server's CPU time.
static INSTALLED: OnceLock<Mutex<NetRx>> = OnceLock::new();

/// Attach the accountant for this process (the client) and `server`, for [`installed`] to read.
/// A second call keeps the first accountant.
pub fn install(server: u32) -> Result<(), libbpf_rs::Error> {
    if INSTALLED.get().is_none() {
        let acct = NetRx::attach(server, std::process::id())?;
        let _ = INSTALLED.set(Mutex::new(acct));
    }
    Ok(())
}

/// The totals of the [`install`]ed accountant, if there is one and it can be read.
pub fn installed() -> Option<NetRxTimes> {
    INSTALLED.get()?.lock().ok()?.read().ok()
}

fn ns(value: &[u8]) -> u64 {
    value.get(..8).and_then(|b| b.try_into().ok()).map(u64::from_ne_bytes).unwrap_or(0)
}

fn missing(what: &str) -> libbpf_rs::Error {
    libbpf_rs::Error::from(std::io::Error::new(std::io::ErrorKind::NotFound, format!("netrx.bpf.o has no {what}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    #[test]
    fn own_rx_swaps_the_receive_paths() {
        // 15 us of process CPU, of which 5 us ran the client's receive; the client's process
        // ran 8 us of the server's receive.
        let d = NetRxTimes { in_server: 5 * US, in_client: 8 * US, elsewhere: US, ..Default::default() };
        assert_eq!(own_rx(15 * US, d), 18 * US);
        // No NET_RX work in either process: unchanged.
        assert_eq!(own_rx(15 * US, NetRxTimes::default()), 15 * US);
    }

    #[test]
    fn differences_never_go_negative() {
        let a = NetRxTimes { in_server: 5 * US, in_client: 8 * US, elsewhere: US, server_syscalls: 10, client_syscalls: 4 };
        let b = NetRxTimes { in_server: 7 * US, in_client: 3 * US, elsewhere: Duration::ZERO, server_syscalls: 25, client_syscalls: 4 };
        assert_eq!(
            b - a,
            NetRxTimes {
                in_server: 2 * US,
                in_client: Duration::ZERO,
                elsewhere: Duration::ZERO,
                server_syscalls: 15,
                client_syscalls: 0
            }
        );
        assert_eq!(own_rx(US, NetRxTimes { in_server: 2 * US, ..Default::default() }), Duration::ZERO);
    }

    #[test]
    fn per_cpu_values_are_native_u64() {
        assert_eq!(ns(&42u64.to_ne_bytes()), 42);
        assert_eq!(ns(&[1, 2]), 0, "a short value is no value");
    }
}
