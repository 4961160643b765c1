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

use std::ffi::CString;
use std::fmt;
use std::io;
use std::mem::size_of;
use std::net::Ipv4Addr;
use std::ops::{BitAnd, BitOr, BitOrAssign, RangeInclusive};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::Once;

use libbpf_rs::query::{LinkInfoIter, LinkTypeInfo, ProgInfoIter};
use libbpf_rs::{libbpf_sys, MapCore, MapFlags, MapHandle, ObjectBuilder, PrintLevel};

use std::sync::Arc;

use crate::acks::AckRing;
use crate::mmap::AtomicMap;
use crate::AttachMode;

/// Number of entries of `xsks_map`: the highest usable queue id is one less.
/// Keep in sync with `XSKS_MAX_QUEUES` in `steer.bpf.c`.
pub const MAX_QUEUES: u32 = 64;

const PROG_NAME: &str = "xsk_steer";
const MAP_XSKS: &str = "xsks_map";
const MAP_TCP_PORTS: &str = "tcp_ports";
const MAP_CFG: &str = "cfg";
const MAP_COUNTERS: &str = "counters";

// Indices of the `counters` map; keep in sync with `steer.bpf.c`.
const CNT_STEERED: u32 = 0;
const CNT_PASSED: u32 = 1;
const CNT_NO_SOCKET: u32 = 2;
const CNT_DEFERRED: u32 = 3;
const CNT_SHED_RX: u32 = 4;
const CNT_SHED_FILL: u32 = 5;
const CNT_SHED_STANDING: u32 = 6;
const CNT_COOKIE: u32 = 7;

/// The compiled program, 8-byte aligned for libelf.
#[repr(C, align(8))]
struct Aligned<B: ?Sized>(B);
static STEER_OBJ: &Aligned<[u8]> =
    &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/steer.bpf.o")));
/// The same program with deferred ACKs (`-DDEFER_ACKS`, see `acks`).
static STEER_ACKS_OBJ: &Aligned<[u8]> =
    &Aligned(*include_bytes!(concat!(env!("OUT_DIR"), "/steer_acks.bpf.o")));
const MAP_ACK_STATE: &str = "ack_state";
const MAP_ACK_RINGS: &str = "ack_rings";
const MAP_SYN_COOKIES: &str = "syn_cookies";

/// Errors of the steering program loader and of its map updates. Each names
/// the interface or map and carries the kernel's error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SteerError {
    /// The name cannot be an interface name (empty, 16 bytes or more, `/`,
    /// whitespace or NUL).
    #[error("invalid interface name {ifname:?}: {reason}")]
    InvalidInterfaceName {
        /// The name given.
        ifname: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// No interface of that name in the calling thread's network namespace.
    #[error("no such interface {ifname:?}: {source}")]
    NoSuchInterface {
        /// The name given.
        ifname: String,
        /// The `if_nametoindex` error.
        #[source]
        source: io::Error,
    },

    /// libbpf could not open or load the embedded program (typically
    /// missing `CAP_BPF`/`CAP_SYS_ADMIN`: the message then says so).
    #[error("loading the XDP steering program failed: {0}{hint}", hint = load_hint(.0))]
    Load(#[source] libbpf_rs::Error),

    /// The interface already has an XDP program (ours from another process,
    /// or someone else's); nothing was attached.
    #[error("interface {ifname} already has an XDP program ({existing}); {remedy}")]
    AlreadyAttached {
        /// The interface.
        ifname: String,
        /// Its index.
        ifindex: u32,
        /// The mode we tried to attach in.
        mode: AttachMode,
        /// What is attached, as far as we can tell.
        existing: String,
        /// How to get rid of it.
        remedy: String,
        /// The kernel's error (`EBUSY` or `EEXIST`).
        #[source]
        source: io::Error,
    },

    /// `BPF_LINK_CREATE` failed for another reason.
    #[error("attaching the XDP program in {mode} mode to {ifname} (ifindex {ifindex}) failed: {source}{hint}")]
    Attach {
        /// The interface.
        ifname: String,
        /// Its index.
        ifindex: u32,
        /// The mode tried (`Skb` or `Drv`).
        mode: AttachMode,
        /// The kernel's error.
        #[source]
        source: io::Error,
        /// Empty, or `"; <likely cause>"`.
        hint: String,
    },

    /// A queue id at or above [`MAX_QUEUES`].
    #[error("queue id {queue_id} is out of range: {MAP_XSKS} has {max} entries (queues 0..={})", max - 1)]
    QueueOutOfRange {
        /// The queue id given.
        queue_id: u32,
        /// [`MAX_QUEUES`].
        max: u32,
    },

    /// A configuration the program cannot express (ARP steering for `0.0.0.0`).
    #[error("invalid steering configuration: {0}")]
    InvalidConfig(&'static str),

    /// Reading or updating one of the program's maps failed.
    #[error("bpf map {map}: {op} failed: {source}")]
    Map {
        /// The map's name in `steer.bpf.c`.
        map: &'static str,
        /// What was being done, e.g. `"add port 7777"`.
        op: String,
        /// libbpf's error.
        #[source]
        source: libbpf_rs::Error,
    },
}

/// What to steer besides the TCP ports: bit 0 ARP, bit 1 ICMP (the `flags`
/// word of the program's `cfg` map).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SteerFlags(u32);

impl SteerFlags {
    /// Only the TCP ports.
    pub const NONE: SteerFlags = SteerFlags(0);
    /// ARP frames whose target protocol address is the configured address.
    pub const ARP: SteerFlags = SteerFlags(1 << 0);
    /// ICMP to the configured address, and non-first TCP/ICMP fragments to
    /// it: for an address dedicated to the userspace stack.
    pub const ICMP: SteerFlags = SteerFlags(1 << 1);
    /// Every known flag.
    pub const ALL: SteerFlags = SteerFlags(Self::ARP.0 | Self::ICMP.0);

    /// The raw bits, as the program sees them.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// `None` if `bits` has unknown bits set.
    pub const fn from_bits(bits: u32) -> Option<SteerFlags> {
        if bits & !Self::ALL.0 == 0 {
            Some(SteerFlags(bits))
        } else {
            None
        }
    }

    /// No flags: [`NONE`](Self::NONE).
    pub const fn empty() -> SteerFlags {
        Self::NONE
    }

    /// True if no flag is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// True if every flag of `other` is set in `self`.
    pub const fn contains(self, other: SteerFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Every flag set in `self` or `other` (also `self | other`).
    pub const fn union(self, other: SteerFlags) -> SteerFlags {
        SteerFlags(self.0 | other.0)
    }
}

impl BitOr for SteerFlags {
    type Output = SteerFlags;
    fn bitor(self, rhs: SteerFlags) -> SteerFlags {
        self.union(rhs)
    }
}

impl BitOrAssign for SteerFlags {
    fn bitor_assign(&mut self, rhs: SteerFlags) {
        *self = self.union(rhs);
    }
}

impl BitAnd for SteerFlags {
    type Output = SteerFlags;
    fn bitand(self, rhs: SteerFlags) -> SteerFlags {
        SteerFlags(self.0 & rhs.0)
    }
}

impl fmt::Debug for SteerFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("NONE");
        }
        let mut sep = "";
        for (flag, name) in [(Self::ARP, "ARP"), (Self::ICMP, "ICMP")] {
            if self.contains(flag) {
                write!(f, "{sep}{name}")?;
                sep = " | ";
            }
        }
        Ok(())
    }
}

/// The program's counters, summed over CPUs. Every frame the program sees
/// is counted in exactly one of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SteerCounters {
    /// Redirected into an AF_XDP socket. (The socket can still drop it, e.g.
    /// when its RX ring is full: see the socket's statistics.)
    pub steered: u64,
    /// Not for the userspace stack: handed to the kernel.
    pub passed: u64,
    /// For the userspace stack, but no socket registered for the receiving
    /// queue: handed to the kernel instead.
    pub no_socket: u64,
    /// Pure ACKs put into a sleeping queue's ack ring instead of its socket
    /// (see [`AckRing`]).
    pub deferred: u64,
    /// SYNs dropped under overload (see [`crate::shed`]): the queue's RX
    /// ring had no more room than the reserve kept for open connections.
    pub shed_rx: u64,
    /// SYNs dropped under overload: the queue's fill ring had no more frames
    /// than the reserve.
    pub shed_fill: u64,
    /// SYNs dropped under overload: the queue's RX ring had not been empty
    /// for a while and the frames waiting in it reached the standing limit.
    pub shed_standing: u64,
    /// SYNs answered by the program with a SYN cookie (see
    /// [`crate::syncookies`]).
    pub cookies: u64,
}

impl SteerCounters {
    /// Every frame the program saw.
    pub fn total(&self) -> u64 {
        self.steered
            + self.passed
            + self.no_socket
            + self.deferred
            + self.shed_rx
            + self.shed_fill
            + self.shed_standing
            + self.cookies
    }

    /// `self - earlier`, per field (saturating).
    pub fn delta(&self, earlier: &SteerCounters) -> SteerCounters {
        SteerCounters {
            steered: self.steered.saturating_sub(earlier.steered),
            passed: self.passed.saturating_sub(earlier.passed),
            no_socket: self.no_socket.saturating_sub(earlier.no_socket),
            deferred: self.deferred.saturating_sub(earlier.deferred),
            shed_rx: self.shed_rx.saturating_sub(earlier.shed_rx),
            shed_fill: self.shed_fill.saturating_sub(earlier.shed_fill),
            shed_standing: self.shed_standing.saturating_sub(earlier.shed_standing),
            cookies: self.cookies.saturating_sub(earlier.cookies),
        }
    }
}

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
            ObjectBuilder::default()
                .name("xsk_steer")
                .and_then(|b| b.open_memory(bytes))
                .and_then(|open| open.load())
        };
        let (obj, deferred_acks) = match open(&STEER_ACKS_OBJ.0) {
            Ok(obj) => (obj, true),
            Err(e) => {
                // Ring buffers in a map-in-map and mmapable arrays need a
                // newer kernel than the rest; say so once per process.
                static ONCE: Once = Once::new();
                ONCE.call_once(|| {
                    tracing::warn!("deferred ACKs unavailable (their XDP program did not load: {e}); every pure ACK wakes the stack")
                });
                (open(&STEER_OBJ.0).map_err(SteerError::Load)?, false)
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
            let len = (MAX_QUEUES as usize * crate::acks::SLOT_BYTES).next_multiple_of(crate::sys::page_size());
            let mem = crate::mmap::Mmap::bpf_map(state.as_fd(), len, 0, true).map_err(|e| SteerError::Map {
                map: MAP_ACK_STATE,
                op: "mmap".into(),
                source: libbpf_rs::Error::from(e),
            })?;
            Some(AckMaps {
                state: Arc::new(AtomicMap::new(mem)),
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
            cfg_value: std::sync::Mutex::new(CfgValue { addr: Ipv4Addr::UNSPECIFIED, flags: SteerFlags::NONE, range: None }),
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
        AckRing::new(queue_id, a.rings.clone(), a.state.clone()).map(Some).map_err(|e| SteerError::Map {
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
        params: &crate::syncookies::CookieParams,
    ) -> Result<Option<crate::syncookies::CookieSlot>, SteerError> {
        check_queue(queue_id)?;
        let Some(a) = &self.acks else { return Ok(None) };
        // In skb mode XDP_TX goes out through the device's own transmit path;
        // natively it may fail where the driver cannot take it (see syncookies).
        let errors = match self.mode {
            AttachMode::Skb => None,
            _ => crate::syncookies::TxErrors::new(&self.ifname).unwrap_or(None),
        };
        let slot = crate::syncookies::CookieSlot::new(a.state.clone(), queue_id, errors);
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
    /// rings for open connections (see [`crate::shed`]); off again when the
    /// returned slot is dropped. `None` if the loaded program cannot shed
    /// (the variant without deferred ACKs, on an older kernel).
    pub fn shed_slot(&self, queue_id: u32, keep: u32) -> Result<Option<crate::shed::ShedSlot>, SteerError> {
        check_queue(queue_id)?;
        Ok(self.acks.as_ref().map(|a| crate::shed::ShedSlot::new(a.state.clone(), queue_id, keep)))
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

    fn write_cfg(&self, v: &CfgValue, op: impl FnOnce() -> String) -> Result<(), SteerError> {
        self.cfg
            .update(&0u32.to_ne_bytes(), &encode_cfg(v.addr, v.flags, v.range), MapFlags::ANY)
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
    state: Arc<AtomicMap>,
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

fn load_hint(e: &libbpf_rs::Error) -> &'static str {
    match e.kind() {
        libbpf_rs::ErrorKind::PermissionDenied => "; needs CAP_BPF and CAP_NET_ADMIN (or root)",
        _ => "",
    }
}

fn missing(what: String) -> SteerError {
    SteerError::Load(libbpf_rs::Error::from(io::Error::new(
        io::ErrorKind::NotFound,
        format!("{what} not found in the embedded steer.bpf.o"),
    )))
}

fn check_queue(queue_id: u32) -> Result<(), SteerError> {
    if queue_id >= MAX_QUEUES {
        return Err(SteerError::QueueOutOfRange {
            queue_id,
            max: MAX_QUEUES,
        });
    }
    Ok(())
}

/// Key of `tcp_ports`: the port in host order, as a `u32`.
/// What the program did with a frame (its XDP action).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// XDP_ABORTED.
    Aborted,
    /// XDP_DROP.
    Drop,
    /// XDP_PASS: to the kernel.
    Pass,
    /// XDP_TX: sent back out of the interface (a SYN answered).
    Tx,
    /// XDP_REDIRECT: into an AF_XDP socket.
    Redirect,
    /// Anything else.
    Other(u32),
}

/// The steering program (with deferred ACKs and SYN cookies) loaded but not
/// attached, run on frames of one's own through `BPF_PROG_RUN`: tests of
/// what it answers, to the byte. Needs what loading needs (root, or
/// `CAP_BPF` and `CAP_NET_ADMIN`). No AF_XDP socket is registered, so a
/// frame it would steer comes back as [`Verdict::Pass`].
pub struct SteerRun {
    obj: libbpf_rs::Object,
}

impl fmt::Debug for SteerRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SteerRun")
    }
}

impl SteerRun {
    /// Loads the program.
    pub fn load() -> Result<SteerRun, SteerError> {
        route_libbpf_logs();
        let obj = ObjectBuilder::default()
            .name("xsk_steer_run")
            .and_then(|b| b.open_memory(&STEER_ACKS_OBJ.0))
            .and_then(|open| open.load())
            .map_err(SteerError::Load)?;
        Ok(SteerRun { obj })
    }

    fn update(&self, name: &'static str, key: &[u8], value: &[u8]) -> Result<(), SteerError> {
        let m = self.obj.maps().find(|m| m.name() == name).ok_or_else(|| missing(format!("map {name}")))?;
        m.update(key, value, MapFlags::ANY).map_err(|source| SteerError::Map { map: name, op: "test setup".into(), source })
    }

    /// Our address and what to steer besides TCP ports, as [`Steer::set_addr`].
    pub fn set_addr(&self, addr: Ipv4Addr, flags: SteerFlags) -> Result<(), SteerError> {
        self.update(MAP_CFG, &0u32.to_ne_bytes(), &encode_cfg(addr, flags, None))
    }

    /// Our address and flags with a steered port range, as [`Steer::set_addr`] followed
    /// by [`Steer::add_tcp_port_range`].
    pub fn set_addr_and_range(&self, addr: Ipv4Addr, flags: SteerFlags, range: (u16, u16)) -> Result<(), SteerError> {
        self.update(MAP_CFG, &0u32.to_ne_bytes(), &encode_cfg(addr, flags, Some(range)))
    }

    /// A listening port, as [`Steer::add_tcp_listener`].
    pub fn add_tcp_listener(&self, port: u16) -> Result<(), SteerError> {
        self.update(MAP_TCP_PORTS, &port_key(port), &[3])
    }

    /// A steered port that is not listening, as [`Steer::add_tcp_port`].
    pub fn add_tcp_port(&self, port: u16) -> Result<(), SteerError> {
        self.update(MAP_TCP_PORTS, &port_key(port), &[1])
    }

    /// Queue `queue`'s SYN cookies: their parameters, and on or off.
    pub fn set_cookies(&self, queue: u32, params: &crate::syncookies::CookieParams, on: bool) -> Result<(), SteerError> {
        check_queue(queue)?;
        self.update(MAP_SYN_COOKIES, &queue.to_ne_bytes(), &params.encode())?;
        let mut slot = [0u8; crate::acks::SLOT_BYTES];
        slot[crate::acks::SLOT_COOKIES_ON] = u8::from(on);
        self.update(MAP_ACK_STATE, &queue.to_ne_bytes(), &slot)
    }

    /// Runs the program once on `frame` (received on queue 0): what it did,
    /// and the frame as it left it.
    pub fn run(&mut self, frame: &[u8]) -> Result<(Verdict, Vec<u8>), SteerError> {
        let prog = self.obj.progs_mut().find(|p| p.name() == PROG_NAME).ok_or_else(|| missing(format!("program {PROG_NAME}")))?;
        let mut out = vec![0u8; frame.len() + 256];
        let input = libbpf_rs::ProgramInput { data_in: Some(frame), data_out: Some(&mut out), ..Default::default() };
        let o = prog.test_run(input).map_err(|source| SteerError::Map { map: "-", op: "BPF_PROG_RUN".into(), source })?;
        let verdict = match o.return_value {
            0 => Verdict::Aborted,
            1 => Verdict::Drop,
            2 => Verdict::Pass,
            3 => Verdict::Tx,
            4 => Verdict::Redirect,
            v => Verdict::Other(v),
        };
        let data = o.data.map(|d| d.to_vec()).unwrap_or_default();
        Ok((verdict, data))
    }
}

fn port_key(port: u16) -> [u8; 4] {
    u32::from(port).to_ne_bytes()
}

/// Value of `cfg[0]`: `struct steer_cfg { __be32 addr; __u32 flags; __u16
/// port_lo; __u16 port_hi; }` (ports in host order; `port_hi` 0: no range).
fn encode_cfg(addr: Ipv4Addr, flags: SteerFlags, range: Option<(u16, u16)>) -> [u8; 12] {
    let mut v = [0u8; 12];
    v[..4].copy_from_slice(&addr.octets()); // network order
    v[4..8].copy_from_slice(&flags.bits().to_ne_bytes());
    if let Some((lo, hi)) = range {
        // Port 0 is no TCP port: a range from 0 starts at 1, and one that
        // is only port 0 is none.
        let lo = lo.max(1);
        if hi >= lo {
            v[8..10].copy_from_slice(&lo.to_ne_bytes());
            v[10..12].copy_from_slice(&hi.to_ne_bytes());
        }
    }
    v
}

/// The one range the config holds, extended by `new`: Some if `new` is the
/// first range or overlaps or touches the current one, None if it cannot be
/// one range with it.
fn merge_range(cur: Option<(u16, u16)>, new: (u16, u16)) -> Option<(u16, u16)> {
    match cur {
        None => Some(new),
        Some((lo, hi)) => {
            let touches = u32::from(new.0) <= u32::from(hi) + 1 && u32::from(lo) <= u32::from(new.1) + 1;
            touches.then(|| (lo.min(new.0), hi.max(new.1)))
        }
    }
}

/// Sum of per-CPU `u64` values (each as native-endian bytes).
fn sum_percpu(values: &[Vec<u8>]) -> u64 {
    values
        .iter()
        .filter_map(|v| v.get(..8))
        .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
        .fold(0u64, u64::wrapping_add)
}

fn validate_ifname(ifname: &str) -> Result<CString, SteerError> {
    let bad = |reason| SteerError::InvalidInterfaceName {
        ifname: ifname.to_owned(),
        reason,
    };
    if ifname.is_empty() {
        return Err(bad("empty"));
    }
    if ifname.len() >= libc::IFNAMSIZ {
        return Err(bad("longer than 15 bytes"));
    }
    if ifname.contains('/') || ifname.chars().any(char::is_whitespace) {
        return Err(bad("contains '/' or whitespace"));
    }
    CString::new(ifname).map_err(|_| bad("contains a NUL byte"))
}

fn ifindex_of(ifname: &str) -> Result<u32, SteerError> {
    validate_ifname(ifname)?;
    crate::sys::if_nametoindex(ifname).map_err(|source| SteerError::NoSuchInterface { ifname: ifname.to_owned(), source })
}

fn mode_flags(mode: AttachMode) -> u32 {
    match mode {
        AttachMode::Skb => libbpf_sys::XDP_FLAGS_SKB_MODE,
        AttachMode::Drv => libbpf_sys::XDP_FLAGS_DRV_MODE,
        AttachMode::Auto => unreachable!("Auto is resolved before attaching"),
    }
}

/// `BPF_LINK_CREATE(prog, ifindex, BPF_XDP, flags = mode)`.
fn attach_link(
    prog: BorrowedFd<'_>,
    ifname: &str,
    ifindex: u32,
    mode: AttachMode,
) -> Result<OwnedFd, SteerError> {
    let opts = libbpf_sys::bpf_link_create_opts {
        sz: size_of::<libbpf_sys::bpf_link_create_opts>() as libbpf_sys::size_t,
        flags: mode_flags(mode),
        ..Default::default()
    };
    // SAFETY: plain syscall wrapper; `opts` outlives the call. For BPF_XDP
    // the target "fd" is the ifindex.
    let ret = unsafe {
        libbpf_sys::bpf_link_create(prog.as_raw_fd(), ifindex as i32, libbpf_sys::BPF_XDP, &opts)
    };
    if ret >= 0 {
        // SAFETY: a fresh fd that nothing else owns.
        return Ok(unsafe { OwnedFd::from_raw_fd(ret) });
    }
    let errno = -ret;
    let source = io::Error::from_raw_os_error(errno);
    if errno == libc::EBUSY || errno == libc::EEXIST {
        if let Some((existing, remedy)) = describe_existing(ifname, ifindex) {
            return Err(SteerError::AlreadyAttached {
                ifname: ifname.to_owned(),
                ifindex,
                mode,
                existing,
                remedy,
                source,
            });
        }
    }
    Err(SteerError::Attach {
        ifname: ifname.to_owned(),
        ifindex,
        mode,
        hint: attach_hint(errno, mode),
        source,
    })
}

/// A likely cause for an attach errno. The kernel's own explanation (its
/// extack message) is not returned by BPF_LINK_CREATE; it only shows up in
/// the `xdp:bpf_xdp_link_attach_failed` tracepoint.
fn attach_hint(errno: i32, mode: AttachMode) -> String {
    let drv = mode == AttachMode::Drv;
    let hint = match errno {
        libc::EPERM | libc::EACCES => "needs CAP_NET_ADMIN and CAP_BPF (or root)",
        libc::EOPNOTSUPP if drv => {
            "the driver has no native XDP, or refuses it in its current state (virtio_net: while the \
             host implements guest offloads; `ethtool -K <if> rx-gro-hw off` first); skb mode works \
             on every interface"
        }
        libc::ERANGE if drv => {
            "MTU too large for native XDP (the program is not multi-buffer aware); lower the MTU \
             (veth: the PEER's MTU counts, at most 3506 with 4 KiB pages)"
        }
        libc::EINVAL if drv => {
            "the driver refused native XDP (virtio_net: MTU too large, or mergeable RX buffers \
             without any_header_sg); the kernel's reason is in the xdp:bpf_xdp_link_attach_failed \
             tracepoint"
        }
        libc::ENODEV => "the interface went away",
        libc::EBUSY | libc::EEXIST => "an XDP program is attached in another mode or by another link",
        _ => return String::new(),
    };
    format!("; {hint}")
}

/// What is attached to `ifindex` and how to remove it, if anything is.
fn describe_existing(ifname: &str, ifindex: u32) -> Option<(String, String)> {
    let mut q = libbpf_sys::bpf_xdp_query_opts {
        sz: size_of::<libbpf_sys::bpf_xdp_query_opts>() as libbpf_sys::size_t,
        ..Default::default()
    };
    // SAFETY: plain netlink query; `q` outlives the call.
    let ret = unsafe { libbpf_sys::bpf_xdp_query(ifindex as i32, 0, &mut q) };
    if ret != 0 {
        return None;
    }
    let (prog_id, mode, ip_mode) = match q.attach_mode as u32 {
        libbpf_sys::XDP_ATTACHED_DRV => (q.drv_prog_id, "drv", "xdpdrv"),
        libbpf_sys::XDP_ATTACHED_SKB => (q.skb_prog_id, "skb", "xdpgeneric"),
        libbpf_sys::XDP_ATTACHED_HW => (q.hw_prog_id, "hw", "xdpoffload"),
        libbpf_sys::XDP_ATTACHED_MULTI => {
            let id = [q.drv_prog_id, q.skb_prog_id, q.hw_prog_id]
                .into_iter()
                .find(|&i| i != 0)
                .unwrap_or(0);
            (id, "multiple modes", "xdp")
        }
        _ => return None, // nothing attached: the error was something else
    };
    let prog_name = ProgInfoIter::default()
        .find(|p| p.id == prog_id)
        .map(|p| p.name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "?".into());
    let link = LinkInfoIter::default().find(|l| {
        l.prog_id == prog_id && matches!(&l.info, LinkTypeInfo::Xdp(x) if x.ifindex == ifindex)
    });
    let existing = format!("prog id {prog_id} {prog_name:?}, {mode} mode");
    Some(match link {
        Some(l) => (
            format!("{existing}, held by bpf_link id {}", l.id),
            format!(
                "it is detached when the process owning that link exits, or with: bpftool link detach id {}",
                l.id
            ),
        ),
        None => (existing, format!("remove it with: ip link set dev {ifname} {ip_mode} off")),
    })
}

// ---------------------------------------------------------------------------
// Driver name (for `Auto`): one implementation, in `tune`.

fn driver_name(ifname: &str) -> Option<String> {
    crate::tune::driver_name(ifname).ok()
}

// ---------------------------------------------------------------------------
// libbpf logging

/// Route libbpf's messages to `tracing` (debug level, target `libbpf`)
/// instead of stderr. Process-wide; installed once. Public for the other
/// BPF programs of the workspace (the benchmarks' NET_RX accountant).
pub fn route_libbpf_logs() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        fn to_tracing(level: PrintLevel, msg: String) {
            let msg = msg.trim_end();
            match level {
                PrintLevel::Warn => tracing::debug!(target: "libbpf", "warn: {msg}"),
                PrintLevel::Info => tracing::debug!(target: "libbpf", "{msg}"),
                PrintLevel::Debug => tracing::trace!(target: "libbpf", "{msg}"),
            }
        }
        libbpf_rs::set_print(Some((PrintLevel::Debug, to_tracing)));
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use libbpf_rs::MapType;
    use std::ffi::OsStr;

    #[test]
    fn shareable_between_threads() {
        fn is<T: Send + Sync>() {}
        is::<Steer>();
        is::<SteerError>();
    }

    #[test]
    fn flags_bits_and_ops() {
        assert_eq!(SteerFlags::NONE.bits(), 0);
        assert_eq!(SteerFlags::ARP.bits(), 1);
        assert_eq!(SteerFlags::ICMP.bits(), 2);
        let both = SteerFlags::ARP | SteerFlags::ICMP;
        assert_eq!(both.bits(), 3);
        assert_eq!(both, SteerFlags::ALL);
        assert!(both.contains(SteerFlags::ARP) && both.contains(SteerFlags::ICMP));
        assert!(!SteerFlags::ARP.contains(SteerFlags::ICMP));
        assert!(SteerFlags::ARP.contains(SteerFlags::NONE));
        assert_eq!(both & SteerFlags::ICMP, SteerFlags::ICMP);
        let mut f = SteerFlags::empty();
        assert!(f.is_empty());
        f |= SteerFlags::ICMP;
        assert_eq!(f, SteerFlags::ICMP);
        assert_eq!(SteerFlags::from_bits(3), Some(both));
        assert_eq!(SteerFlags::from_bits(4), None);
        assert_eq!(format!("{:?}", both), "ARP | ICMP");
        assert_eq!(format!("{:?}", SteerFlags::NONE), "NONE");
        assert_eq!(format!("{:?}", SteerFlags::ICMP), "ICMP");
    }

    #[test]
    fn cfg_encoding_matches_struct_steer_cfg() {
        let v = encode_cfg(
            Ipv4Addr::new(198, 18, 99, 1),
            SteerFlags::ARP | SteerFlags::ICMP,
            Some((40000, 59999)),
        );
        // __be32 addr: the octets in wire order.
        assert_eq!(&v[..4], &[198, 18, 99, 1]);
        // __u32 flags: host order.
        assert_eq!(u32::from_ne_bytes(v[4..8].try_into().unwrap()), 3);
        // __u16 port_lo, port_hi: host order.
        assert_eq!(u16::from_ne_bytes(v[8..10].try_into().unwrap()), 40000);
        assert_eq!(u16::from_ne_bytes(v[10..12].try_into().unwrap()), 59999);
        assert_eq!(encode_cfg(Ipv4Addr::UNSPECIFIED, SteerFlags::NONE, None), [0; 12]);
        // Port 0 is never steered by range.
        assert_eq!(&encode_cfg(Ipv4Addr::UNSPECIFIED, SteerFlags::NONE, Some((0, 0)))[8..], &[0; 4]);
        assert_eq!(u16::from_ne_bytes(encode_cfg(Ipv4Addr::UNSPECIFIED, SteerFlags::NONE, Some((0, 9)))[8..10].try_into().unwrap()), 1);
    }

    #[test]
    fn port_ranges_merge_when_they_touch() {
        assert_eq!(merge_range(None, (40000, 59999)), Some((40000, 59999)));
        assert_eq!(merge_range(Some((40000, 59999)), (60000, 60010)), Some((40000, 60010)));
        assert_eq!(merge_range(Some((40000, 59999)), (30000, 39999)), Some((30000, 59999)));
        assert_eq!(merge_range(Some((40000, 59999)), (45000, 45001)), Some((40000, 59999)));
        assert_eq!(merge_range(Some((40000, 59999)), (7000, 7000)), None);
        assert_eq!(merge_range(Some((40000, 65535)), (65535, 65535)), Some((40000, 65535)));
    }

    #[test]
    fn port_keys_are_host_order_u32() {
        assert_eq!(port_key(7777), 7777u32.to_ne_bytes());
        assert_eq!(port_key(0), [0; 4]);
        assert_eq!(port_key(u16::MAX), 65535u32.to_ne_bytes());
    }

    #[test]
    fn port_ranges_cover_bounds_and_terminate() {
        let all: Vec<u16> = (65530..=u16::MAX).collect();
        assert_eq!(all, [65530, 65531, 65532, 65533, 65534, 65535]);
        assert_eq!((0..=u16::MAX).count(), 65536);
        #[allow(clippy::reversed_empty_ranges)]
        let empty = 10u16..=9;
        assert_eq!(empty.count(), 0);
    }

    #[test]
    fn percpu_sum() {
        let vals = vec![
            5u64.to_ne_bytes().to_vec(),
            7u64.to_ne_bytes().to_vec(),
            vec![],
        ];
        assert_eq!(sum_percpu(&vals), 12);
        assert_eq!(sum_percpu(&[]), 0);
        let c = SteerCounters {
            steered: 5,
            passed: 10,
            no_socket: 1,
            deferred: 4,
            ..Default::default()
        };
        assert_eq!(c.total(), 20);
        assert_eq!(
            c.delta(&SteerCounters {
                steered: 2,
                passed: 10,
                no_socket: 0,
                deferred: 1,
                ..Default::default()
            }),
            SteerCounters {
                steered: 3,
                passed: 0,
                no_socket: 1,
                deferred: 3,
                ..Default::default()
            }
        );
    }

    #[test]
    fn ifname_validation() {
        assert!(validate_ifname("eth0").is_ok());
        assert!(validate_ifname("").is_err());
        assert!(validate_ifname("0123456789abcdef").is_err());
        assert!(validate_ifname("a/b").is_err());
        assert!(validate_ifname("a\0b").is_err());
        assert!(matches!(
            ifindex_of("stst-nx0"),
            Err(SteerError::NoSuchInterface { .. })
        ));
    }

    #[test]
    fn loopback_driver_is_readable_without_privileges() {
        // `lo` has no driver name via ethtool on every kernel; only check
        // that asking does not fail badly.
        let _ = driver_name("lo");
    }

    #[test]
    fn queue_range() {
        assert!(check_queue(0).is_ok());
        assert!(check_queue(MAX_QUEUES - 1).is_ok());
        let e = check_queue(MAX_QUEUES).unwrap_err();
        assert_eq!(
            e.to_string(),
            "queue id 64 is out of range: xsks_map has 64 entries (queues 0..=63)"
        );
    }

    /// Opening (not loading) the embedded objects needs no privileges: check
    /// that they have the program and the maps the loader expects, with the
    /// layout the Rust side encodes (`acks` for the deferred-ACK maps).
    #[test]
    fn embedded_object_layout() {
        for (bytes, acks) in [(&STEER_OBJ.0, false), (&STEER_ACKS_OBJ.0, true)] {
            let obj = ObjectBuilder::default()
                .open_memory(bytes)
                .expect("open the steering object");
            let prog = obj
                .progs()
                .find(|p| p.name() == PROG_NAME)
                .expect("program");
            assert_eq!(prog.section(), OsStr::new("xdp"));
            let find = |name: &str| obj.maps().find(|m| m.name() == name);
            let check = |name: &str, ty: MapType, key: u32, value: u32, max: u32| {
                let m = find(name).unwrap_or_else(|| panic!("map {name}"));
                assert_eq!(m.map_type(), ty, "{name} type");
                assert_eq!(m.key_size(), key, "{name} key size");
                assert_eq!(m.value_size(), value, "{name} value size");
                assert_eq!(m.max_entries(), max, "{name} max entries");
            };
            check(MAP_XSKS, MapType::Xskmap, 4, 4, MAX_QUEUES);
            check(MAP_TCP_PORTS, MapType::Array, 4, 1, 65536);
            check(MAP_CFG, MapType::Array, 4, 12, 1);
            check(MAP_COUNTERS, MapType::PercpuArray, 4, 8, CNT_COOKIE + 1);
            if acks {
                check(MAP_ACK_STATE, MapType::Array, 4, crate::acks::SLOT_BYTES as u32, MAX_QUEUES);
                check(MAP_ACK_RINGS, MapType::ArrayOfMaps, 4, 4, MAX_QUEUES);
                check(MAP_SYN_COOKIES, MapType::Array, 4, crate::syncookies::PARAMS_BYTES as u32, MAX_QUEUES);
            } else {
                assert!(find(MAP_ACK_STATE).is_none() && find(MAP_ACK_RINGS).is_none());
                assert!(find(MAP_SYN_COOKIES).is_none());
            }
        }
    }
}
