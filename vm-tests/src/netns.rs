//! The host side of a guest's network: a network namespace of our own with a tap device in
//! it (created there with `ip tuntap add` under `ip netns exec`), so QEMU, the tap and the
//! load generator never touch the machine's own interfaces. Addresses come from
//! 198.18.0.0/15 (RFC 2544 benchmarking range).
//!
//! Names are `vmt-{pid base36}-{n}`; dropping a [`HostNet`] kills what still runs inside and
//! deletes the namespace (the tap goes with it). [`sweep_stale`] removes namespaces of
//! harness processes that died without cleaning up (SIGKILL).

use std::fs::File;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{Context, Result};

use crate::util::{base36, cmd, parse_base36, pid_alive, run};

pub const PREFIX: &str = "vmt";
const NETNS_DIR: &str = "/run/netns";
static NEXT: AtomicU32 = AtomicU32::new(0);

/// The tap's name inside the namespace (each namespace has its own).
pub const TAP: &str = "vmtap0";

/// A host namespace with a tap for one guest.
#[derive(Debug)]
pub struct HostNet {
    pub ns: String,
    pub tap: String,
    /// Host end (the tap's address).
    pub host_addr: Ipv4Addr,
    /// The guest kernel's address on eth0.
    pub guest_addr: Ipv4Addr,
    /// A dedicated address for the userspace stack (not configured on any kernel).
    pub stack_addr: Ipv4Addr,
    pub prefix_len: u8,
    /// Queue pairs of the tap (`multi_queue` and QEMU `queues=N` when > 1).
    pub queues: u32,
    /// MTU set on the tap (None: the default 1500).
    pub mtu: Option<u32>,
}

impl HostNet {
    /// Creates `vmt-PID-N` with the tap `vmtap0` (up, 198.18.S.1/24, S = 10 + N % 200).
    pub fn create() -> Result<HostNet> {
        Self::create_with(true)
    }

    /// [`HostNet::create`] with a tap for `queues` queue pairs (`ip tuntap add ... multi_queue`
    /// when > 1; QEMU then gets `queues=N`) and, if given, that MTU on the tap.
    pub fn create_tuned(queues: u32, mtu: Option<u32>) -> Result<HostNet> {
        Self::create_full(true, queues.max(1), mtu)
    }

    /// Creates `vmt-PID-N` with only its loopback up: for guests connected to each other
    /// through QEMU socket netdevs on 127.0.0.1 inside it. `tap` is empty; the addresses are
    /// those of the subnet the guests use.
    pub fn create_bare() -> Result<HostNet> {
        Self::create_with(false)
    }

    fn create_with(with_tap: bool) -> Result<HostNet> {
        Self::create_full(with_tap, 1, None)
    }

    fn create_full(with_tap: bool, queues: u32, mtu: Option<u32>) -> Result<HostNet> {
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        let ns = format!(
            "{PREFIX}-{}-{}",
            base36(std::process::id() as u64),
            base36(n as u64)
        );
        let subnet = 10 + (n % 200) as u8;
        let net = HostNet {
            ns: ns.clone(),
            tap: if with_tap { TAP.into() } else { String::new() },
            host_addr: Ipv4Addr::new(198, 18, subnet, 1),
            guest_addr: Ipv4Addr::new(198, 18, subnet, 2),
            stack_addr: Ipv4Addr::new(198, 18, subnet, 3),
            prefix_len: 24,
            queues,
            mtu,
        };
        run(&mut cmd("ip", ["netns", "add", &ns]))
            .context("creating the host network namespace")?;
        // From here on Drop deletes the namespace, also when a later step fails.
        net.setup()
            .with_context(|| format!("setting up tap {TAP} in namespace {ns}"))?;
        Ok(net)
    }

    fn setup(&self) -> Result<()> {
        run(&mut cmd("ip", ["-n", &self.ns, "link", "set", "lo", "up"]))?;
        if self.tap.is_empty() {
            return Ok(());
        }
        let mut add = vec!["tuntap", "add", "dev", &self.tap, "mode", "tap"];
        if self.queues > 1 {
            add.push("multi_queue");
        }
        run(&mut self.command("ip", &add))?;
        if let Some(m) = self.mtu {
            let m = m.to_string();
            run(&mut cmd(
                "ip",
                ["-n", &self.ns, "link", "set", &self.tap, "mtu", &m],
            ))?;
        }
        let a = format!("{}/{}", self.host_addr, self.prefix_len);
        run(&mut cmd(
            "ip",
            ["-n", &self.ns, "addr", "add", &a, "dev", &self.tap],
        ))?;
        run(&mut cmd(
            "ip",
            ["-n", &self.ns, "link", "set", &self.tap, "up"],
        ))?;
        Ok(())
    }

    /// IPv6 beside the IPv4 subnet: 2001:2:0:S::1/64 on the tap (without duplicate address
    /// detection, usable at once), and the address the guest is to take, ::2.
    pub fn add_ipv6(&self) -> Result<(Ipv6Addr, Ipv6Addr)> {
        let s = u16::from(self.host_addr.octets()[2]);
        let (host, guest) = (Ipv6Addr::new(0x2001, 2, 0, s, 0, 0, 0, 1), Ipv6Addr::new(0x2001, 2, 0, s, 0, 0, 0, 2));
        let a = format!("{host}/64");
        run(&mut cmd("ip", ["-n", &self.ns, "-6", "addr", "add", &a, "dev", &self.tap, "nodad"]))?;
        Ok((host, guest))
    }

    /// QEMU's `-netdev` for the tap of this namespace.
    pub fn tap_netdev(&self) -> String {
        let mut n = format!("tap,id=n0,ifname={},script=no,downscript=no", self.tap);
        if self.queues > 1 {
            n.push_str(&format!(",queues={}", self.queues));
        }
        n
    }

    /// `ip netns exec NS prog args...` (stdio left to the caller).
    pub fn command(&self, prog: &str, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns, prog]).args(args);
        c
    }

    /// `/run/netns/NS`.
    pub fn path(&self) -> PathBuf {
        PathBuf::from(NETNS_DIR).join(&self.ns)
    }

    /// Runs `f` on a fresh thread that has entered the namespace (sockets it creates live
    /// there); returns its result.
    pub fn run_in<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> Result<T> {
        let path = self.path();
        let h = std::thread::Builder::new()
            .name(format!("netns {}", self.ns))
            .spawn(move || -> Result<T> {
                let fd =
                    File::open(&path).with_context(|| format!("opening {}", path.display()))?;
                // SAFETY: setns on an open namespace fd; only this thread moves.
                if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                    return Err(std::io::Error::last_os_error())
                        .context("setns into the host namespace");
                }
                Ok(f())
            })
            .context("spawning a thread")?;
        match h.join() {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        }
    }
}

impl Drop for HostNet {
    fn drop(&mut self) {
        destroy(&self.ns);
    }
}

/// (dev, ino) of a namespace file.
fn ns_id(p: &std::path::Path) -> Option<(u64, u64)> {
    std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
}

/// Kills every process inside `ns` (QEMU, load generators), then deletes it.
pub fn destroy(ns: &str) {
    let path = PathBuf::from(NETNS_DIR).join(ns);
    let Some(id) = ns_id(&path) else { return };
    let own = std::process::id() as i32;
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for pid in dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok()) {
            if pid != own && ns_id(&PathBuf::from(format!("/proc/{pid}/ns/net"))) == Some(id) {
                // SAFETY: plain kill of a process inside our own namespace.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
    // QEMU holds the tap: give the kills a moment before deleting.
    for _ in 0..50 {
        let busy = std::fs::read_dir("/proc").map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
                .any(|pid| {
                    pid != own && ns_id(&PathBuf::from(format!("/proc/{pid}/ns/net"))) == Some(id)
                })
        });
        if !busy.unwrap_or(false) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    if let Err(e) = run(&mut cmd("ip", ["netns", "del", ns])) {
        eprintln!("vm-tests: warning: deleting namespace {ns}: {e:#}");
    }
}

/// Deletes `vmt-PID-N` namespaces whose PID is dead. Returns how many.
pub fn sweep_stale() -> usize {
    let Ok(dir) = std::fs::read_dir(NETNS_DIR) else {
        return 0;
    };
    let mut n = 0;
    for name in dir.filter_map(|e| e.ok()?.file_name().into_string().ok()) {
        let Some(rest) = name.strip_prefix(&format!("{PREFIX}-")) else {
            continue;
        };
        let Some((pid, idx)) = rest.split_once('-') else {
            continue;
        };
        let (Some(pid), Some(_)) = (parse_base36(pid), parse_base36(idx)) else {
            continue;
        };
        if pid == 0 || pid > i32::MAX as u64 || pid_alive(pid as i32) {
            continue;
        }
        eprintln!("vm-tests: removing stale namespace {name} (its harness process {pid} is gone)");
        destroy(&name);
        n += 1;
    }
    n
}
