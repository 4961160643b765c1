//! `rr-server doctor`: everything the xsk backend needs of an interface, the kernel and the
//! process, checked without changing anything, each as ok / warn / fail with its fix. rr-server
//! runs the same checks at start and logs what is not ok.

use std::fmt;

use serde::Serialize;
use stack::xsk::{privileges, AddrMode, XskConfig};
use xsk_io::socket::XskSocket;
use xsk_device::tune::{self, Outcome, QueueLayout, TuneOptions};


/// How a check turned out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// As needed.
    Ok,
    /// Works, with a cost or a caveat worth acting on.
    Warn,
    /// The server cannot start (or serves no one) like this.
    Fail,
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        })
    }
}

/// One check's result.
#[derive(Clone, Debug, Serialize)]
pub struct Check {
    /// What was checked, e.g. `link`, `capabilities`, `veth: rx-gro`.
    pub check: String,
    /// ok, warn or fail.
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// What to do (empty when ok).
    pub fix: String,
}

impl Check {
    fn new(check: impl Into<String>, status: Status, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check { check: check.into(), status, detail: detail.into(), fix: fix.into() }
    }
}

/// The checks' results, in order.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Report {
    /// The interface checked.
    pub iface: String,
    /// Every check.
    pub checks: Vec<Check>,
}

impl Report {
    /// The worst status (ok for no checks).
    pub fn worst(&self) -> Status {
        self.checks.iter().map(|c| c.status).max().unwrap_or(Status::Ok)
    }

    /// The table: status, check, what was found, and under it the fix of each that is not ok;
    /// then a line of counts.
    pub fn table(&self) -> String {
        let w = self.checks.iter().map(|c| c.check.chars().count()).max().unwrap_or(5).max(5);
        let mut s = format!("{:<7}{:<w$}  {}\n", "status", "check", "detail");
        for c in &self.checks {
            s.push_str(&format!("{:<7}{:<w$}  {}\n", c.status.to_string(), c.check, c.detail));
            if !c.fix.is_empty() {
                s.push_str(&format!("{:<7}{:<w$}  fix: {}\n", "", "", c.fix));
            }
        }
        let n = |st| self.checks.iter().filter(|c| c.status == st).count();
        s.push_str(&format!(
            "{}: {} ok, {} warn, {} fail\n",
            self.iface,
            n(Status::Ok),
            n(Status::Warn),
            n(Status::Fail)
        ));
        s
    }

    /// Logs every check that is not ok.
    pub fn log(&self) {
        self.log_where(|_| true);
    }

    /// rr-server's start: logs the checks that are not ok and that the setup does not report
    /// itself (it names the interface, link, address, capabilities, kernel knobs and device
    /// steps on its own), then one line with the counts.
    pub fn log_at_start(&self) {
        let own = ["queues", "xdp program", "busy polling", "state directory"];
        self.log_where(|c| own.contains(&c.check.as_str()));
        let n = |s| self.checks.iter().filter(|c| c.status == s).count();
        tracing::info!(
            "doctor: {} checks on {}: {} ok, {} warn, {} fail (`rr-server doctor --iface {}` for the table)",
            self.checks.len(),
            self.iface,
            n(Status::Ok),
            n(Status::Warn),
            n(Status::Fail),
            self.iface
        );
    }

    fn log_where(&self, pick: impl Fn(&Check) -> bool) {
        for c in self.checks.iter().filter(|c| c.status != Status::Ok && pick(c)) {
            let fix = if c.fix.is_empty() { String::new() } else { format!(" (fix: {})", c.fix) };
            tracing::warn!("doctor: {}: {}: {}{fix}", self.iface, c.check, c.detail);
        }
    }
}

/// What to check: the server's AF_XDP configuration, its threads (one RX queue each) and the
/// user it will run as after setup (for the state directory).
pub fn run(cfg: &XskConfig, threads: u16, user: Option<(u32, u32)>) -> Report {
    let ifname = cfg.port.ifname.clone();
    let mut checks = Vec::new();
    if !link(&ifname, &mut checks) {
        return Report { iface: ifname, checks };
    }
    device(cfg, threads, &mut checks);
    if let Some((what, remedy)) = xsk_device::steer::attached(&ifname) {
        checks.push(Check::new("xdp program", Status::Fail, format!("already attached: {what}"), remedy));
    } else {
        checks.push(Check::new("xdp program", Status::Ok, "none attached", ""));
    }
    kernel(&mut checks);
    let ports = if threads > 1 { u64::from(threads) } else { 1 };
    privileges(cfg, ports, user, &mut checks);
    address(&ifname, &cfg.addr, &mut checks);
    Report { iface: ifname, checks }
}

/// The interface exists, is not loopback, is up with a carrier. False: stop here.
fn link(ifname: &str, out: &mut Vec<Check>) -> bool {
    let flags = match xsk_device::ifaddr::flags(ifname) {
        Ok(f) => f,
        Err(e) => {
            out.push(Check::new(
                "interface",
                Status::Fail,
                format!("{ifname}: {e}"),
                "check the name with `ip link`, in the interface's network namespace (ip netns exec NS)",
            ));
            return false;
        }
    };
    if flags & libc::IFF_LOOPBACK != 0 {
        out.push(Check::new(
            "interface",
            Status::Fail,
            "the loopback interface: local clients never pass an XDP hook",
            "use the interface clients reach (`ip route get CLIENT_ADDR`); local clients: --backend kernel",
        ));
        return false;
    }
    out.push(Check::new("interface", Status::Ok, format!("{ifname} exists"), ""));
    out.push(if flags & libc::IFF_UP == 0 {
        Check::new("link", Status::Fail, "down: no frame arrives", format!("ip link set {ifname} up"))
    } else if xsk_device::ifaddr::carrier(ifname) == Some(false) {
        Check::new("link", Status::Warn, "up, no carrier", "check the cable, the peer or the host side")
    } else {
        Check::new("link", Status::Ok, "up, carrier", "")
    });
    true
}

/// The driver, the XDP mode, MTU against the mode's limit, offloads and channels: the
/// device tuning's own checks, run check-only; and queues against threads.
fn device(cfg: &XskConfig, threads: u16, out: &mut Vec<Check>) {
    let ifname = &cfg.port.ifname;
    let driver = tune::driver_name(ifname).unwrap_or_else(|_| "unknown".into());
    let queues = tune::rx_queue_count(ifname).unwrap_or(1);
    out.push(Check::new("driver", Status::Ok, format!("{driver}, {queues} RX queue(s)"), ""));
    if threads > 1 && queues != u32::from(threads) {
        out.push(Check::new(
            "queues",
            Status::Fail,
            format!("{queues} RX queue(s) for {threads} threads: one shard per queue"),
            format!("ethtool -L {ifname} combined {threads} (veth: numrxqueues), or --threads {queues}"),
        ));
    } else if threads == 1 && queues > 1 && !matches!(driver.as_str(), "veth" | "virtio_net") {
        out.push(Check::new(
            "queues",
            Status::Warn,
            format!("{queues} RX queues, one thread: flows hashed to other queues never reach the stack"),
            format!("ethtool -L {ifname} combined 1, or --threads {queues}"),
        ));
    } else {
        out.push(Check::new("queues", Status::Ok, format!("{queues} RX queue(s) for {threads} thread(s)"), ""));
    }
    let layout = if threads > 1 { QueueLayout::All } else { QueueLayout::Single };
    let opts = TuneOptions::default()
        .with_mode(cfg.port.attach)
        .with_queues(layout)
        .with_frame_size(cfg.port.umem.frame_size)
        .with_apply(false);
    let steps = match tune::prepare(ifname, &opts) {
        Ok(t) => t.steps.clone(),
        Err(tune::TuneError::Step { report, .. }) => report,
        Err(e) => {
            out.push(Check::new("device", Status::Fail, e.to_string(), e.fix().to_string()));
            return;
        }
    };
    for s in steps {
        // The tuning names each step with its values ("veth: mtu 1500 in 4096-byte frames");
        // the mode step is the XDP mode check.
        let (name, ok) = match s.what.strip_prefix("mode ") {
            Some(m) => ("xdp mode".to_string(), m.to_string()),
            None => (s.what, "as needed".to_string()),
        };
        out.push(match s.outcome {
            Outcome::Ok => Check::new(name, Status::Ok, ok, ""),
            Outcome::Changed { from, to } | Outcome::WouldChange { from, to } => {
                Check::new(name, Status::Ok, format!("{from} now; set to {to} at start, put back at exit"), "")
            }
            Outcome::Skipped(why) => Check::new(name, Status::Ok, format!("not needed: {why}"), ""),
            Outcome::Warn { note, fix } => Check::new(name, Status::Warn, note, fix),
            Outcome::Failed { error, fix } => Check::new(name, Status::Fail, error, fix),
        });
    }
}

/// The kernel's copy-mode knobs, probed on an unbound AF_XDP socket where the process may
/// create one (CAP_NET_RAW), else by version.
fn kernel(out: &mut Vec<Check>) {
    let version = xsk_io::sys::kernel_version();
    let at_least = |v: (u32, u32)| version.is_some_and(|k| k >= v);
    let release = version.map_or("unknown".to_string(), |(a, b)| format!("{a}.{b}"));
    let sock = XskSocket::new().ok();
    let probe = |opt: i32, v: u32| -> Option<bool> {
        let s = sock.as_ref()?;
        Some(match s.set_xdp_u32(opt, v) {
            Ok(()) => true,
            Err(e) => e.raw_os_error() != Some(libc::ENOPROTOOPT),
        })
    };
    let budget = probe(xsk_io::sys::XDP_MAX_TX_SKB_BUDGET, 32).unwrap_or(at_least((6, 17)));
    out.push(if budget {
        Check::new("XDP_MAX_TX_SKB_BUDGET", Status::Ok, "present: one sendto sends a whole TX ring", "")
    } else {
        Check::new(
            "XDP_MAX_TX_SKB_BUDGET",
            Status::Warn,
            format!("absent (Linux {release}): one sendto sends at most 32 frames"),
            "Linux 6.17 or later",
        )
    });
    out.push(match probe(xsk_io::sys::XDP_GENERIC_XMIT_BATCH, 1) {
        Some(true) => Check::new("XDP_GENERIC_XMIT_BATCH", Status::Ok, "present: frames sent under one queue lock", ""),
        Some(false) => Check::new(
            "XDP_GENERIC_XMIT_BATCH",
            Status::Warn,
            "absent (proposed upstream, in no released kernel): copy-mode TX takes the queue lock per frame",
            "a kernel with the patch (vm-tests/README.md: the batch kernel)",
        ),
        None => Check::new(
            "XDP_GENERIC_XMIT_BATCH",
            Status::Warn,
            "not probed: creating an AF_XDP socket needs CAP_NET_RAW",
            "run the doctor with the server's capabilities",
        ),
    });
    out.push(if at_least((6, 8)) {
        Check::new("AF_XDP TX metadata", Status::Ok, "Linux 6.8+: TCP checksums offloaded", "")
    } else {
        Check::new(
            "AF_XDP TX metadata",
            Status::Warn,
            format!("Linux {release}: TCP checksums are filled in user space"),
            "Linux 6.8 or later",
        )
    });
    // EPERM: the option exists and wants CAP_NET_ADMIN, which the port has when it sets it.
    let prefer = sock
        .as_ref()
        .map(|s| match s.set_sock_int(xsk_io::sys::SO_PREFER_BUSY_POLL, 1) {
            Ok(()) => true,
            Err(e) => e.raw_os_error() != Some(libc::ENOPROTOOPT),
        })
        .unwrap_or(at_least((5, 11)));
    out.push(if prefer {
        Check::new("busy polling", Status::Ok, "SO_PREFER_BUSY_POLL on AF_XDP sockets (--busy-poll)", "")
    } else {
        Check::new("busy polling", Status::Warn, "no SO_PREFER_BUSY_POLL: --busy-poll fails", "Linux 5.11 or later")
    });
}

/// Capabilities, the memlock limit, the state directory.
fn privileges(cfg: &XskConfig, ports: u64, user: Option<(u32, u32)>, out: &mut Vec<Check>) {
    let pinned = u64::from(cfg.port.umem.frame_count) * u64::from(cfg.port.umem.frame_size) * ports;
    let missing = privileges::missing(pinned);
    if missing.is_empty() {
        let memlock = privileges::memlock_limit().map_or("unlimited".to_string(), |l| format!("{} KiB", l >> 10));
        out.push(Check::new(
            "capabilities",
            Status::Ok,
            format!("{} (UMEM {} MiB, memlock limit {memlock})", privileges::needed_list(), pinned >> 20),
            "",
        ));
    }
    for m in missing {
        out.push(Check::new(format!("capability {}", m.what), Status::Fail, "missing", m.fix));
    }
    let dir = stack::xsk::state_dir();
    let (uid, gid) = user.unwrap_or_else(|| {
        // SAFETY: geteuid and getegid have no preconditions.
        unsafe { (libc::geteuid(), libc::getegid()) }
    });
    let writable = crate::deploy::writable_by(&dir, uid, gid) || (uid == 0 && !dir.exists());
    out.push(if writable {
        Check::new("state directory", Status::Ok, format!("{} writable by uid {uid}", dir.display()), "")
    } else {
        Check::new(
            "state directory",
            Status::Fail,
            format!("{} is not writable by uid {uid}", dir.display()),
            format!("install -d -o {uid} {} (systemd: RuntimeDirectory=xsk-io), or --state-dir", dir.display()),
        )
    });
}

/// Shared mode needs the interface's address; a dedicated one must not be the kernel's.
fn address(ifname: &str, mode: &AddrMode, out: &mut Vec<Check>) {
    match mode {
        AddrMode::Shared => out.push(match xsk_device::ifaddr::ipv4(ifname).ok().flatten() {
            Some((a, p)) => Check::new("address", Status::Ok, format!("shared: {a}/{p}, the interface's"), ""),
            None => Check::new(
                "address",
                Status::Fail,
                format!("shared mode, but {ifname} has no IPv4 address"),
                "give the interface one, or the stack a dedicated one (--addr A.B.C.D/LEN)",
            ),
        }),
        AddrMode::Dedicated { addr, prefix_len } => {
            let owners = xsk_device::ifaddr::owners_of(*addr);
            out.push(if owners.is_empty() {
                Check::new("address", Status::Ok, format!("dedicated: {addr}/{prefix_len}, not the kernel's"), "")
            } else {
                Check::new(
                    "address",
                    Status::Warn,
                    format!("dedicated {addr} is also the kernel's (on {}): the kernel's use of it breaks", owners.join(", ")),
                    "an address the kernel does not have, or --addr shared",
                )
            });
        }
    }
}
