//! The XDP steering program (`src/bpf/steer.bpf.c`) and its loader.
//!
//! [`Steer::attach`] loads the program and attaches it to one interface
//! through a **bpf_link** (`BPF_LINK_CREATE`, attach type `BPF_XDP`, with an
//! explicit `XDP_FLAGS_SKB_MODE` / `XDP_FLAGS_DRV_MODE`). The link is owned
//! by the [`Steer`] value: dropping it, or the process dying for any reason
//! (including `SIGKILL`), detaches the program. Nothing is left behind on
//! the interface, unlike a netlink (`ip link set ... xdp`) attachment.
//!
//! The program redirects into the AF_XDP socket registered for the
//! receiving queue ([`Steer::register_xsk`]):
//! - ARP whose target protocol address is ours, with [`SteerFlags::ARP`];
//! - IPv4 TCP to our address whose destination port was added with
//!   [`Steer::add_tcp_port`] (address `0.0.0.0` means any address);
//! - IPv4 ICMP to our address, and non-first TCP/ICMP fragments, with
//!   [`SteerFlags::ICMP`] (meant for an address dedicated to the stack).
//!
//! Everything else, VLAN-tagged frames included, goes to the kernel
//! (`XDP_PASS`). A steer decision for a queue without a registered socket
//! also goes to the kernel: the program never drops a frame.
//!
//! The object file is compiled by `build.rs` and embedded in the binary; it
//! is opened with [`libbpf_rs::ObjectBuilder::open_memory`], which gives an
//! owned [`libbpf_rs::Object`] (the generated skeleton borrows its storage,
//! which does not fit a long-lived, `Arc`-shared value).

use std::net::{Ipv4Addr, Ipv6Addr};
use std::ops::RangeInclusive;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Once};

use libbpf_rs::{MapCore, MapFlags, MapHandle, ObjectBuilder};

use xsk_io::acks::{AckRing, QueueState};
use crate::AttachMode;

mod counters;
mod error;
mod flags;
mod link;
mod maps;
mod object;
mod run;

pub use counters::SteerCounters;
pub use error::SteerError;
pub use flags::SteerFlags;
pub use object::{route_libbpf_logs, MAX_QUEUES};
pub use run::{SteerRun, Verdict};
use error::missing;
use link::{attach_link, describe_existing, driver_name, ifindex_of};

/// The XDP program already attached to `ifname`, if any: what it is, and how to remove it.
/// (A netlink query: needs no privileges; the program's name needs `CAP_SYS_ADMIN`.)
pub fn attached(ifname: &str) -> Option<(String, String)> {
    describe_existing(ifname, ifindex_of(ifname).ok()?)
}
use maps::{check_queue, encode_cfg, merge_range, port_key, sum_percpu};
use object::{
    CNT_COOKIE, CNT_DEFERRED, CNT_NO_SOCKET, CNT_PASSED, CNT_SHED_FILL, CNT_SHED_RX, CNT_SHED_STANDING, CNT_STEERED,
    MAP_ACK_RINGS, MAP_ACK_STATE, MAP_CFG, MAP_COUNTERS, MAP_SYN_COOKIES, MAP_TCP_PORTS, MAP_XSKS, PROG_NAME,
    STEER_ACKS_OBJ, STEER_OBJ,
};

/// The steering program, attached to one interface through a bpf_link.
///
/// All methods take `&self`; the value is meant to be shared (`Arc`) by the
/// per-queue ports. Dropping it detaches the program.
#[derive(Debug)]
pub struct Steer {
    ifname: String,
    ifindex: u32,
    mode: AttachMode,
    link_id: u32,
    xsks: MapHandle,
    tcp_ports: MapHandle,
    cfg: MapHandle,
    counters: MapHandle,
    /// Deferred ACKs' maps; None when the kernel could not load that
    /// variant of the program (the plain one runs).
    acks: Option<AckMaps>,
    /// What `cfg[0]` holds (address, flags, port range), to rewrite it whole.
    cfg_value: std::sync::Mutex<CfgValue>,
    /// The bpf_link; closing it (drop, process exit) detaches the program.
    link: OwnedFd,
}

/// `struct steer_cfg` as userspace keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct CfgValue {
    addr: Ipv4Addr,
    flags: SteerFlags,
    /// TCP ports steered by range (empty: `port_hi` 0).
    range: Option<(u16, u16)>,
    /// IPv6 steered to this address (unspecified: any), or not at all.
    addr6: Option<Ipv6Addr>,
}

impl Steer {
    /// Load the program and attach it to `ifname`.
    ///
    /// `Skb` / `Drv` attach in exactly that mode or fail. `Auto` tries `Drv`
    /// when the driver is `veth` or `virtio_net` and falls back to `Skb`
    /// (one `warn!` line with the kernel's error) if that fails; other
    /// drivers get `Skb`.
    ///
    /// The program steers nothing until [`set_addr`](Self::set_addr),
    /// [`add_tcp_port`](Self::add_tcp_port) and
    /// [`register_xsk`](Self::register_xsk) say what and where to.
    ///
    /// # Errors
    /// A bad or unknown interface name; [`SteerError::Load`] (privileges:
    /// `CAP_BPF` + `CAP_NET_ADMIN`, or root); [`SteerError::AlreadyAttached`]
    /// if another XDP program is on the interface; [`SteerError::Attach`]
    /// otherwise, with the likely cause.
    pub fn attach(ifname: &str, mode: AttachMode) -> Result<Steer, SteerError> {
        route_libbpf_logs();
        let ifindex = ifindex_of(ifname)?;

        let open = |bytes: &[u8]| {
            object::capture_log(|| {
                ObjectBuilder::default().name("xsk_steer").and_then(|b| b.open_memory(bytes)).and_then(|open| open.load())
            })
        };
        let (obj, deferred_acks) = match open(&STEER_ACKS_OBJ.0).0 {
            Ok(obj) => (obj, true),
            Err(e) => {
                // Ring buffers in a map-in-map and mmapable arrays need a
                // newer kernel than the rest; say so once per process.
                static ONCE: Once = Once::new();
                ONCE.call_once(|| {
                    tracing::warn!("deferred ACKs unavailable (their XDP program did not load: {e}); every pure ACK wakes the stack")
                });
                let (r, log) = open(&STEER_OBJ.0);
                (r.map_err(|e| SteerError::load(e, &log))?, false)
            }
        };

        let prog = obj
            .progs()
            .find(|p| p.name() == PROG_NAME)
            .ok_or_else(|| missing(format!("program {PROG_NAME}")))?;

        let map = |name: &'static str| -> Result<MapHandle, SteerError> {
            let m = obj
                .maps()
                .find(|m| m.name() == name)
                .ok_or_else(|| missing(format!("map {name}")))?;
            MapHandle::try_from(&m).map_err(SteerError::Load)
        };
        let xsks = map(MAP_XSKS)?;
        let tcp_ports = map(MAP_TCP_PORTS)?;
        let cfg = map(MAP_CFG)?;
        let counters = map(MAP_COUNTERS)?;
        let acks = if deferred_acks {
            let state = map(MAP_ACK_STATE)?;
            let mapped = QueueState::map(state.as_fd(), MAX_QUEUES).map_err(|e| SteerError::Map {
                map: MAP_ACK_STATE,
                op: "mmap".into(),
                source: libbpf_rs::Error::from(e),
            })?;
            Some(AckMaps {
                state: mapped,
                rings: Arc::new(map(MAP_ACK_RINGS)?),
                cookies: map(MAP_SYN_COOKIES)?,
                _state_map: state,
            })
        } else {
            None
        };

        let (link, mode) = match mode {
            AttachMode::Skb | AttachMode::Drv => {
                (attach_link(prog.as_fd(), ifname, ifindex, mode)?, mode)
            }
            AttachMode::Auto => {
                let driver = driver_name(ifname);
                match driver.as_deref() {
                    Some(drv @ ("veth" | "virtio_net")) => {
                        match attach_link(prog.as_fd(), ifname, ifindex, AttachMode::Drv) {
                            Ok(link) => (link, AttachMode::Drv),
                            Err(e @ SteerError::AlreadyAttached { .. }) => return Err(e),
                            Err(e) => {
                                tracing::warn!(
                                    "{ifname} ({drv}): native XDP attach failed, falling back to skb (generic) mode: {e}"
                                );
                                (
                                    attach_link(prog.as_fd(), ifname, ifindex, AttachMode::Skb)?,
                                    AttachMode::Skb,
                                )
                            }
                        }
                    }
                    other => {
                        tracing::debug!(
                            "{ifname}: driver {} is not known to do native XDP well, using skb mode",
                            other.unwrap_or("<unknown>")
                        );
                        (
                            attach_link(prog.as_fd(), ifname, ifindex, AttachMode::Skb)?,
                            AttachMode::Skb,
                        )
                    }
                }
            }
        };

        let link_id = libbpf_rs::query::LinkInfo::from_fd(link.as_fd())
            .map(|i| i.id)
            .unwrap_or(0);
        tracing::info!("XDP steering program attached to {ifname} (ifindex {ifindex}) in {mode} mode, bpf_link id {link_id}");

        // `obj` is dropped here: the link keeps the program alive, the map
        // handles keep the maps alive.
        Ok(Steer {
            ifname: ifname.to_owned(),
            ifindex,
            mode,
            link_id,
            xsks,
            tcp_ports,
            cfg,
            counters,
            acks,
            cfg_value: std::sync::Mutex::new(CfgValue { addr: Ipv4Addr::UNSPECIFIED, flags: SteerFlags::NONE, range: None, addr6: None }),
            link,
        })
    }

    /// Sets up deferred ACKs for `queue_id`: a ring the program fills with
    /// pure ACKs while the queue's consumer sleeps with
    /// [`AckRing::set_waiting`] on. `None` if the loaded program has no
    /// deferred ACKs (an older kernel; [`attach`](Self::attach) said so).
    pub fn ack_ring(&self, queue_id: u32) -> Result<Option<AckRing>, SteerError> {
        check_queue(queue_id)?;
        let Some(a) = &self.acks else { return Ok(None) };
        AckRing::new(queue_id, a.rings.clone(), &a.state).map(Some).map_err(|e| SteerError::Map {
            map: MAP_ACK_RINGS,
            op: format!("set up the ack ring of queue {queue_id}"),
            source: libbpf_rs::Error::from(e),
        })
    }

    /// Sets up SYN cookies in the program for `queue_id`: `params` say how
    /// the queue's stack makes them; the returned slot turns them on and off
    /// (off at first, and again when dropped). `None` if the loaded program
    /// cannot answer SYNs (the variant without deferred ACKs, on an older
    /// kernel).
    pub fn cookie_slot(
        &self,
        queue_id: u32,
        params: &xsk_io::syncookies::CookieParams,
    ) -> Result<Option<xsk_io::syncookies::CookieSlot>, SteerError> {
        check_queue(queue_id)?;
        let Some(a) = &self.acks else { return Ok(None) };
        // In skb mode XDP_TX goes out through the device's own transmit path;
        // natively it may fail where the driver cannot take it (see syncookies).
        let errors = match self.mode {
            AttachMode::Skb => None,
            _ => crate::tune::TxErrors::new(&self.ifname)
                .unwrap_or(None)
                .map(|e| Box::new(e) as Box<dyn xsk_io::syncookies::TxErrorCount>),
        };
        let slot = xsk_io::syncookies::CookieSlot::new(&a.state, queue_id, errors);
        a.cookies
            .update(&queue_id.to_ne_bytes(), &params.encode(), MapFlags::ANY)
            .map_err(|source| SteerError::Map {
                map: MAP_SYN_COOKIES,
                op: format!("set the SYN cookie parameters of queue {queue_id}"),
                source,
            })?;
        Ok(Some(slot))
    }

    /// Turns SYN shedding on for `queue_id`, keeping `keep` places of its
    /// rings for open connections (see [`xsk_io::shed`]); off again when the
    /// returned slot is dropped. `None` if the loaded program cannot shed
    /// (the variant without deferred ACKs, on an older kernel).
    pub fn shed_slot(&self, queue_id: u32, keep: u32) -> Result<Option<xsk_io::shed::ShedSlot>, SteerError> {
        check_queue(queue_id)?;
        Ok(self.acks.as_ref().map(|a| xsk_io::shed::ShedSlot::new(&a.state, queue_id, keep)))
    }

    /// `Skb` or `Drv`: the mode actually attached.
    pub fn mode(&self) -> AttachMode {
        self.mode
    }

    /// Index of the interface the program is attached to.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Name of the interface the program is attached to.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The kernel id of the bpf_link (as in `bpftool link`), 0 if unknown.
    pub fn link_id(&self) -> u32 {
        self.link_id
    }

    /// Set our IPv4 address and what to steer besides the TCP ports.
    ///
    /// `0.0.0.0` means "any address" for TCP and ICMP; ARP needs a concrete
    /// address, so `ARP` with `0.0.0.0` is rejected.
    pub fn set_addr(&self, addr: Ipv4Addr, flags: SteerFlags) -> Result<(), SteerError> {
        if addr.is_unspecified() && flags.contains(SteerFlags::ARP) {
            return Err(SteerError::InvalidConfig(
                "ARP steering needs a concrete address, not 0.0.0.0",
            ));
        }
        let mut g = self.cfg_value.lock().unwrap_or_else(|e| e.into_inner());
        let v = CfgValue { addr, flags, ..*g };
        self.write_cfg(&v, || format!("set address {addr} flags {flags:?}"))?;
        *g = v;
        Ok(())
    }

    /// Steer IPv6 too: TCP to `addr6` (`::`: any address) and the steered ports, and
    /// with [`SteerFlags::ICMP`] (a dedicated address) everything else to it and its
    /// neighbour solicitations; `None`: no IPv6 (the default), all of it the kernel's.
    pub fn set_addr6(&self, addr6: Option<Ipv6Addr>) -> Result<(), SteerError> {
        let mut g = self.cfg_value.lock().unwrap_or_else(|e| e.into_inner());
        let v = CfgValue { addr6, ..*g };
        self.write_cfg(&v, || format!("set IPv6 address {addr6:?}"))?;
        *g = v;
        Ok(())
    }

    fn write_cfg(&self, v: &CfgValue, op: impl FnOnce() -> String) -> Result<(), SteerError> {
        self.cfg
            .update(&0u32.to_ne_bytes(), &encode_cfg(v.addr, v.flags, v.range, v.addr6), MapFlags::ANY)
            .map_err(|source| SteerError::Map { map: MAP_CFG, op: op(), source })
    }

    /// Steer TCP segments to destination port `port`.
    pub fn add_tcp_port(&self, port: u16) -> Result<(), SteerError> {
        self.set_tcp_port(port, 1)
    }

    /// Steer TCP segments to `port`, a listening port: the program may
    /// answer its SYNs with cookies (see [`cookie_slot`](Self::cookie_slot)).
    /// [`remove_tcp_port`](Self::remove_tcp_port) undoes both.
    pub fn add_tcp_listener(&self, port: u16) -> Result<(), SteerError> {
        self.set_tcp_port(port, 3)
    }

    /// Stop steering TCP destination port `port` (a no-op if it was not steered).
    pub fn remove_tcp_port(&self, port: u16) -> Result<(), SteerError> {
        self.set_tcp_port(port, 0)
    }

    /// Steer every TCP destination port in `ports`. The first range is one
    /// write of the program's config (the program checks it before the port
    /// map); a range that does not extend it becomes one map update per port.
    /// Ports of the range stay steered whatever
    /// [`remove_tcp_port`](Self::remove_tcp_port) says.
    pub fn add_tcp_port_range(&self, ports: RangeInclusive<u16>) -> Result<(), SteerError> {
        if ports.is_empty() {
            return Ok(());
        }
        let (lo, hi) = (*ports.start(), *ports.end());
        let mut g = self.cfg_value.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(merged) = merge_range(g.range, (lo, hi)) {
            let v = CfgValue { range: Some(merged), ..*g };
            self.write_cfg(&v, || format!("steer TCP ports {}..={}", merged.0, merged.1))?;
            *g = v;
            return Ok(());
        }
        drop(g);
        for port in ports {
            self.set_tcp_port(port, 1)?;
        }
        Ok(())
    }

    fn set_tcp_port(&self, port: u16, on: u8) -> Result<(), SteerError> {
        self.tcp_ports
            .update(&port_key(port), &[on], MapFlags::ANY)
            .map_err(|source| SteerError::Map {
                map: MAP_TCP_PORTS,
                op: format!("{} port {port}", if on != 0 { "add" } else { "remove" }),
                source,
            })
    }

    /// Direct steered frames received on `queue_id` to the AF_XDP socket
    /// `xsk_fd` (which must be bound to this interface and queue). Replaces
    /// any socket registered for that queue. The kernel drops the entry by
    /// itself when the socket is closed.
    pub fn register_xsk(&self, queue_id: u32, xsk_fd: BorrowedFd<'_>) -> Result<(), SteerError> {
        check_queue(queue_id)?;
        let fd = u32::try_from(xsk_fd.as_raw_fd()).expect("a BorrowedFd is never negative");
        self.xsks
            .update(&queue_id.to_ne_bytes(), &fd.to_ne_bytes(), MapFlags::ANY)
            .map_err(|source| SteerError::Map {
                map: MAP_XSKS,
                op: format!("register AF_XDP socket fd {fd} for queue {queue_id}"),
                source,
            })
    }

    /// Remove the socket of `queue_id`: steered frames on that queue go to
    /// the kernel again. Not an error if none was registered.
    pub fn unregister_xsk(&self, queue_id: u32) -> Result<(), SteerError> {
        check_queue(queue_id)?;
        match self.xsks.delete(&queue_id.to_ne_bytes()) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == libbpf_rs::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(SteerError::Map {
                map: MAP_XSKS,
                op: format!("unregister queue {queue_id}"),
                source,
            }),
        }
    }

    /// The program's counters, summed over CPUs.
    pub fn counters(&self) -> Result<SteerCounters, SteerError> {
        let read = |idx: u32, what: &str| -> Result<u64, SteerError> {
            let percpu = self
                .counters
                .lookup_percpu(&idx.to_ne_bytes(), MapFlags::ANY)
                .map_err(|source| SteerError::Map {
                    map: MAP_COUNTERS,
                    op: format!("read {what}"),
                    source,
                })?;
            Ok(percpu.as_deref().map(sum_percpu).unwrap_or(0))
        };
        Ok(SteerCounters {
            steered: read(CNT_STEERED, "steered")?,
            passed: read(CNT_PASSED, "passed")?,
            no_socket: read(CNT_NO_SOCKET, "no_socket")?,
            deferred: read(CNT_DEFERRED, "deferred")?,
            shed_rx: read(CNT_SHED_RX, "shed_rx")?,
            shed_fill: read(CNT_SHED_FILL, "shed_fill")?,
            shed_standing: read(CNT_SHED_STANDING, "shed_standing")?,
            cookies: read(CNT_COOKIE, "cookies")?,
        })
    }
}

/// The deferred-ACK maps of the program: the mapped per-queue state and the
/// map of per-queue rings.
#[derive(Debug)]
struct AckMaps {
    state: QueueState,
    rings: Arc<MapHandle>,
    /// Per queue, what the program answers SYNs with (`struct cookie_cfg`).
    cookies: MapHandle,
    _state_map: MapHandle,
}

impl Drop for Steer {
    fn drop(&mut self) {
        // Closing `link` (after this) detaches the program.
        tracing::debug!(
            "detaching XDP steering program from {} (bpf_link id {}, fd {})",
            self.ifname,
            self.link_id,
            self.link.as_raw_fd()
        );
    }
}

#[cfg(test)]
mod tests;
