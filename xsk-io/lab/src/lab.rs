//! Network lab for tests and benchmarks: two network namespaces joined by one
//! veth pair, driven through `ip` (iproute2).
//!
//! ```text
//!   netns ns_a                          netns ns_b
//!   lo (up)                             lo (up)
//!   if_a  addr_a/24  <==== veth ====>   if_b  addr_b/24
//! ```
//!
//! Everything lives inside the two namespaces: the veth pair is created
//! directly inside them (`ip -n A link add ... peer ... netns B`), so the root
//! namespace's interfaces are never touched. Addresses come from the
//! benchmarking range 198.18.0.0/15.
//!
//! Names are `{prefix}-{pid base36}-{counter base36}{a|b}` (at most 15
//! characters, IFNAMSIZ - 1), used for both the namespace and the veth end in
//! it, so they are unique per process and per lab, and [`sweep_stale`] can tell
//! which process made a namespace.
//!
//! Teardown: [`Lab`]'s `Drop` kills any process still inside either namespace
//! and deletes both namespaces (which destroys the veth). Live labs are also
//! kept in a process-wide registry that is cleaned by an `atexit` hook (so
//! `std::process::exit` does not leak them), by [`cleanup_registered`], and by
//! the second SIGINT/SIGTERM once [`install_signal_handlers`] is in place.
//! Labs of processes that died by SIGKILL are removed by [`sweep_stale`].
//! Requires root (CAP_SYS_ADMIN + CAP_NET_ADMIN).

use std::fmt;
use std::io;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};

mod command;
mod error;
mod names;
mod netns;
// pub(crate): the signal handling removes the registered labs, and takes
// that from here rather than through this file (which re-exports it).
pub(crate) mod registry;

use command::{ip, ip_batch};
pub use error::LabError;
use names::{counter_capacity, validate_prefix};
pub use names::{lab_name, parse_lab_name, LabName, Side, MAX_IFNAME_LEN, MAX_PREFIX_LEN};
pub use netns::{Netns, NetnsGuard, NETNS_RUN_DIR};
use registry::{destroy_namespaces, register, unregister};
pub use registry::{cleanup_registered, sweep_stale};

/// How to build a [`Lab`]. Use `..LabConfig::default()` for fields you don't care about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabConfig {
    /// Short tag, 1..=4 chars of `[a-z0-9]`, e.g. `"xb"`.
    pub prefix: String,
    /// MTU of both veth ends (68..=65535).
    pub mtu: u32,
    /// `Some(x)`: the lab uses 198.18.x.0/24. `None`: a /24 inside
    /// 198.18.0.0/15 derived from the pid and a per-process counter.
    pub subnet_index: Option<u8>,
    /// numtxqueues/numrxqueues of both veth ends (1..=4096); `None` is the
    /// kernel default, 1.
    pub peer_queues: Option<u32>,
    /// Disable IPv6 in both namespaces before the veth exists, so the kernel
    /// emits no router solicitations, MLD or DAD frames on the link (they
    /// would otherwise show up on an AF_XDP socket). Default `true`.
    pub disable_ipv6: bool,
}

impl Default for LabConfig {
    fn default() -> Self {
        LabConfig {
            prefix: "xl".to_string(),
            mtu: 1500,
            subnet_index: None,
            peer_queues: None,
            disable_ipv6: true,
        }
    }
}

impl LabConfig {
    /// Defaults with the given prefix.
    pub fn new(prefix: &str) -> Self {
        LabConfig {
            prefix: prefix.to_string(),
            ..LabConfig::default()
        }
    }

    fn validate(&self) -> Result<(), LabError> {
        validate_prefix(&self.prefix)?;
        if !(68..=65535).contains(&self.mtu) {
            return Err(LabError::Config(format!("mtu {} outside 68..=65535", self.mtu)));
        }
        if let Some(q) = self.peer_queues {
            if !(1..=4096).contains(&q) {
                return Err(LabError::Config(format!("peer_queues {q} outside 1..=4096")));
            }
        }
        Ok(())
    }
}

static NEXT_LAB: AtomicU64 = AtomicU64::new(0);

/// Two network namespaces joined by one veth pair; torn down on drop.
#[derive(Debug)]
pub struct Lab {
    /// The first namespace.
    pub ns_a: Netns,
    /// The second namespace.
    pub ns_b: Netns,
    /// veth end inside `ns_a`, up, with `addr_a`.
    pub if_a: String,
    /// veth end inside `ns_b`, up, with `addr_b`.
    pub if_b: String,
    /// Address of `if_a`, in 198.18.0.0/15.
    pub addr_a: Ipv4Addr,
    /// Address of `if_b`, in the same /24.
    pub addr_b: Ipv4Addr,
    /// Prefix length of both addresses (24).
    pub prefix_len: u8,
    /// MAC address of `if_a`.
    pub mac_a: [u8; 6],
    /// MAC address of `if_b`.
    pub mac_b: [u8; 6],
    /// MTU of both ends, in bytes.
    pub mtu: u32,
}

/// Deletes namespaces created so far if `Lab::new` fails or panics midway.
struct Partial(Vec<String>);

impl Drop for Partial {
    fn drop(&mut self) {
        let owned: Vec<String> = self.0.iter().filter(|n| unregister(n)).cloned().collect();
        if !owned.is_empty() {
            destroy_namespaces(&owned);
        }
    }
}

fn mac_string(mac: &[u8; 6]) -> String {
    mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

fn netns_add(partial: &mut Partial, name: &str) -> Result<bool, LabError> {
    match ip(&["netns", "add", name]) {
        Ok(_) => {
            register(name);
            partial.0.push(name.to_string());
            Ok(true)
        }
        // A namespace of a dead process that had our pid, or a counter wrap.
        Err(e) if e.stderr().is_some_and(|s| s.contains("File exists")) => Ok(false),
        Err(e) => Err(e),
    }
}

fn disable_ipv6(ns: &Netns) -> Result<(), LabError> {
    let name = ns.name.clone();
    ns.run_in(move || {
        for key in ["all", "default"] {
            let path = format!("/proc/sys/net/ipv6/conf/{key}/disable_ipv6");
            match std::fs::write(&path, "1") {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()), // no IPv6 in this kernel
                Err(source) => return Err(LabError::Netns { op: "disable IPv6", ns: name, source }),
            }
        }
        Ok(())
    })?
}

impl Lab {
    /// Create both namespaces, the veth pair between them (directly inside the
    /// namespaces), addresses, and bring `lo` and the veth ends up. On error
    /// everything created so far is deleted.
    pub fn new(cfg: &LabConfig) -> Result<Lab, LabError> {
        cfg.validate()?;
        let pid = std::process::id();
        let capacity = counter_capacity(cfg.prefix.len(), pid);
        let mut partial = Partial(Vec::new());

        // Pick a counter whose names are free.
        let mut attempt = 0;
        let (counter, name_a, name_b) = loop {
            attempt += 1;
            if attempt > 64 {
                return Err(LabError::Config(format!(
                    "no free lab name for prefix {:?} after 64 attempts",
                    cfg.prefix
                )));
            }
            let counter = NEXT_LAB.fetch_add(1, Ordering::Relaxed) % capacity;
            let name_a = lab_name(&cfg.prefix, pid, counter, Side::A)?;
            let name_b = lab_name(&cfg.prefix, pid, counter, Side::B)?;
            if !netns_add(&mut partial, &name_a)? {
                continue;
            }
            if !netns_add(&mut partial, &name_b)? {
                let a = partial.0.pop().expect("just added");
                unregister(&a);
                destroy_namespaces(&[a]);
                continue;
            }
            break (counter, name_a, name_b);
        };
        let ns_a = Netns { name: name_a.clone() };
        let ns_b = Netns { name: name_b.clone() };

        if cfg.disable_ipv6 {
            disable_ipv6(&ns_a)?;
            disable_ipv6(&ns_b)?;
        }

        let index = match cfg.subnet_index {
            Some(x) => u16::from(x),
            None => ((pid as u64 * 61 + counter) % 512) as u16,
        };
        let (o2, o3) = (18 + (index >> 8) as u8, (index & 0xff) as u8);
        let addr_a = Ipv4Addr::new(198, o2, o3, 1);
        let addr_b = Ipv4Addr::new(198, o2, o3, 2);
        let prefix_len = 24;
        let p = pid.to_be_bytes();
        let mac_a = [0x02, p[1], p[2], p[3], counter as u8, 0x0a];
        let mac_b = [0x02, p[1], p[2], p[3], counter as u8, 0x0b];

        let mtu = cfg.mtu.to_string();
        let queues = cfg.peer_queues.map(|q| q.to_string());
        let (mac_a_s, mac_b_s) = (mac_string(&mac_a), mac_string(&mac_b));
        let end_args = |ifname: &str, mac: &str| -> Vec<String> {
            let mut v = vec!["name".into(), ifname.into(), "address".into(), mac.into(), "mtu".into(), mtu.clone()];
            if let Some(q) = &queues {
                v.extend(["numtxqueues".into(), q.clone(), "numrxqueues".into(), q.clone()]);
            }
            v
        };
        let mut args: Vec<String> = vec!["-n".into(), name_a.clone(), "link".into(), "add".into()];
        args.extend(end_args(&name_a, &mac_a_s));
        args.extend(["type".into(), "veth".into(), "peer".into()]);
        args.extend(end_args(&name_b, &mac_b_s));
        args.extend(["netns".into(), name_b.clone()]);
        ip(&args.iter().map(String::as_str).collect::<Vec<_>>())?;

        for (ns, ifname, addr) in [(&name_a, &name_a, addr_a), (&name_b, &name_b, addr_b)] {
            ip_batch(
                Some(ns),
                false,
                &[
                    "link set lo up".to_string(),
                    format!("addr add {addr}/{prefix_len} dev {ifname}"),
                    format!("link set {ifname} up"),
                ],
            )?;
        }

        partial.0.clear(); // the Lab owns the namespaces now
        Ok(Lab {
            ns_a,
            ns_b,
            if_a: name_a,
            if_b: name_b,
            addr_a,
            addr_b,
            prefix_len,
            mac_a,
            mac_b,
            mtu: cfg.mtu,
        })
    }

    /// Attaches an XDP program that passes every frame (the steering program
    /// with nothing to steer) to `if_b`, natively: a veth sends native
    /// XDP_TX and redirects into its peer only while the peer runs such a
    /// program (its NAPI is not scheduled for them otherwise), so this is
    /// how a lab lets the XDP program on `if_a` answer SYNs itself. Detached
    /// when the returned value is dropped (or the lab removed).
    pub fn peer_xdp_pass(&self) -> Result<xsk_device::steer::Steer, LabError> {
        let ifname = self.if_b.clone();
        let name = ifname.clone();
        self.ns_b
            .run_in(move || xsk_device::steer::Steer::attach(&name, xsk_device::AttachMode::Drv))?
            .map_err(|source| LabError::Xdp { ifname, source })
    }

    /// Permanent neighbour entries on both ends, so no ARP is needed.
    pub fn add_static_neighbours(&self) -> Result<(), LabError> {
        let entry = |addr: Ipv4Addr, mac: &[u8; 6], dev: &str| {
            vec![format!("neigh replace {addr} lladdr {} dev {dev} nud permanent", mac_string(mac))]
        };
        ip_batch(Some(&self.ns_a.name), false, &entry(self.addr_b, &self.mac_b, &self.if_a))?;
        ip_batch(Some(&self.ns_b.name), false, &entry(self.addr_a, &self.mac_a, &self.if_b))?;
        Ok(())
    }

    /// IPv6 addresses in a /64 of the benchmarking range 2001:2::/48 of this lab's own
    /// (from its IPv4 subnet): `a` ::1 (`with_a`: else nothing, for a stack's dedicated
    /// address), `b` ::2, without duplicate address detection, so they are usable at
    /// once. Needs a lab made with `disable_ipv6: false`.
    pub fn add_ipv6(&self, with_a: bool) -> Result<(std::net::Ipv6Addr, std::net::Ipv6Addr), LabError> {
        let o = self.addr_a.octets();
        let net = u16::from_be_bytes([o[1], o[2]]);
        let a = std::net::Ipv6Addr::new(0x2001, 2, 0, net, 0, 0, 0, 1);
        let b = std::net::Ipv6Addr::new(0x2001, 2, 0, net, 0, 0, 0, 2);
        if with_a {
            self.ns_a.run(&["ip", "-6", "addr", "add", &format!("{a}/64"), "dev", &self.if_a, "nodad"])?;
        }
        self.ns_b.run(&["ip", "-6", "addr", "add", &format!("{b}/64"), "dev", &self.if_b, "nodad"])?;
        Ok((a, b))
    }

    /// `ethtool -K IF tx off` on both ends (disables TX checksum offload and
    /// with it TSO). Kernel-sent frames on veth otherwise carry
    /// CHECKSUM_PARTIAL, i.e. an unfinished L4 checksum, which an AF_XDP
    /// receiver sees as-is. Needs `ethtool`.
    pub fn disable_tx_offloads(&self) -> Result<(), LabError> {
        self.ns_a.run(&["ethtool", "-K", &self.if_a, "tx", "off"])?;
        self.ns_b.run(&["ethtool", "-K", &self.if_b, "tx", "off"])?;
        Ok(())
    }

    /// The namespace names, for checks such as `ip netns list`.
    pub fn netns_names(&self) -> [&str; 2] {
        [&self.ns_a.name, &self.ns_b.name]
    }
}

impl fmt::Display for Lab {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "netns {} dev {} {}/{} {} <-> netns {} dev {} {}/{} {} (mtu {})",
            self.ns_a.name,
            self.if_a,
            self.addr_a,
            self.prefix_len,
            mac_string(&self.mac_a),
            self.ns_b.name,
            self.if_b,
            self.addr_b,
            self.prefix_len,
            mac_string(&self.mac_b),
            self.mtu
        )
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let owned: Vec<String> = [&self.ns_a.name, &self.ns_b.name]
            .into_iter()
            .filter(|n| unregister(n))
            .cloned()
            .collect();
        if owned.is_empty() {
            return; // already removed by cleanup_registered / signal path
        }
        let removed = destroy_namespaces(&owned);
        if removed != owned.len() {
            tracing::warn!(?owned, removed, "lab teardown left namespaces behind");
        }
    }
}

#[cfg(test)]
mod tests;
