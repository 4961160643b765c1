//! `xsk-io`: one network interface queue as a fast, batched, copy-mode AF_XDP port.
//!
//! An AF_XDP socket receives the frames an XDP program redirects to it and
//! sends frames straight to the device queue, bypassing the kernel's IP and
//! TCP layers. This crate gives a user space stack such a socket, with
//! everything around it: the shared memory (UMEM) and its four rings, the XDP
//! steering program that hands over only the flows the stack owns, the device
//! preparation that makes the interface fit, and exact accounting of every
//! frame. It does no IP or TCP itself; the `stack` crate of this workspace
//! does, on top of it.
//!
//! # Two types: [`Iface`](iface::Iface) prepares, [`Port`](port::Port) moves frames
//!
//! [`iface::Iface::prepare`] does what happens once per interface:
//! 1. takes ownership: a lock and a record of the device's original state
//!    under `/run/xsk-io` ([`state`]; `XSK_IO_STATE_DIR` moves it). A second
//!    live owner is refused with its pid; a record left by an owner that died
//!    (SIGKILL, OOM, abort) is restored first;
//! 2. checks and tunes the device ([`tune`]), recording each original before
//!    changing it;
//! 3. then hands out ports ([`iface::Iface::open_ports`]) and attaches the
//!    steering program ([`steer`]) once they are bound.
//!
//! It is shared (`Arc`) by its ports; when the last port is dropped, the
//! program is detached, the device is put back (newest change first), sysctls
//! set through [`iface::Iface::set_sysctl`] get their old values, and the
//! record is removed. If the process dies instead, the program goes with it
//! (it is held by a bpf_link, not attached through netlink), and the record
//! stays for the next start on that interface or `xsk-bench restore IF` (run
//! under `ip netns exec NS` for a device in a namespace).
//!
//! A [`port::Port`] is the data plane of one queue: [`recv`](port::Port::recv)
//! and [`release`](port::Port::release) received frames,
//! [`alloc`](port::Port::alloc) and [`send`](port::Port::send) frames to send,
//! [`flush`](port::Port::flush) to publish them (one Release store) and kick
//! the kernel (at most one `sendto` per batch, only when it asks for a
//! wakeup), [`reap`](port::Port::reap) completions, and
//! [`audit`](port::Port::audit) to prove that every UMEM frame is in exactly
//! one place. No allocation on this path. [`port::Port::open`] and
//! [`port::Port::open_all`] do the preparation and the opening in one call.
//!
//! # Copy mode, and why
//!
//! Sockets are always bound `XDP_COPY | XDP_USE_NEED_WAKEUP`, never
//! zero-copy (a zero-copy bind is refused: [`port::PortError::ZeroCopy`]).
//! Copy mode is the AF_XDP mode every driver supports; the devices this is
//! for, virtio_net in KVM guests and veth in tests, offer no zero-copy the
//! crate could rely on. The steering program runs natively in the driver
//! ([`AttachMode::Drv`]) or on the generic skb path ([`AttachMode::Skb`]);
//! [`AttachMode::Auto`] takes native on veth and virtio_net when the tuning's
//! checks pass, generic otherwise, and says why in one line.
//!
//! The cost of copy mode is on TX: each frame becomes an skb sent by the
//! kernel inside the `sendto`. Two `SOL_XDP` options make that cheaper, both
//! probed when a port opens and reported in [`port::Features`]:
//! - [`sys::XDP_MAX_TX_SKB_BUDGET`] (Linux 6.17+): descriptors per `sendto`,
//!   set to the TX ring size by default (older kernels: 32);
//! - [`sys::XDP_GENERIC_XMIT_BATCH`] (proposed upstream, in no released
//!   kernel): frames sent under one TX queue lock, 32 by default, never above
//!   the budget.
//!
//! A kernel without an option answers `ENOPROTOOPT`: the port logs one
//! warning and runs without it. A value the kernel refuses for an option it
//! has is an error ([`port::PortError::Knob`]). Both are
//! [`port::Knob`]s in [`port::PortConfig`].
//!
//! # What the process needs
//!
//! The capabilities `CAP_NET_RAW`, `CAP_NET_ADMIN`, `CAP_BPF`, `CAP_PERFMON`
//! and `CAP_IPC_LOCK` ([`privileges`] says what each is for; `CAP_SYS_ADMIN`
//! stands in for `CAP_BPF` and `CAP_PERFMON`; without `CAP_IPC_LOCK` a
//! memlock limit that holds the UMEM does), write access to the state
//! directory `/run/xsk-io` ([`state::state_dir`]: [`state::set_state_dir`]
//! or `XSK_IO_STATE_DIR` move it), and to `/proc/sys` for sysctls set
//! through an `Iface`. [`port::Port::open`] checks them before it changes
//! anything and names each one missing with its fix
//! ([`port::PortError::Privileges`]). Once the ports are open only
//! `CAP_NET_ADMIN` is still needed (to put the device back at exit):
//! [`privileges::drop_after_setup`] drops the rest.
//!
//! Root has all of these. The interface must exist in the calling thread's
//! network namespace (and sysfs must show that namespace: use
//! `ip netns exec`, which remounts `/sys`). Its MTU plus the Ethernet header
//! and one VLAN tag must fit a UMEM frame minus [`sys::XDP_PACKET_HEADROOM`]
//! (1500 fits 2048- and 4096-byte frames). Native XDP has lower limits
//! (virtio_net: 3494 with 4 KiB pages; veth: the peer's MTU at most 3506).
//!
//! # What it changes on the interface, and undoes
//!
//! Each step is logged and returned as a [`tune::Step`]; a step that cannot be
//! done fails with the command that fixes it, after rolling back the steps
//! before it. With [`port::PortConfig::tune`] off, nothing is changed and the
//! same checks only report.
//! - Receive aggregation off (`rx-gro`, `rx-lro`, `rx-gro-hw`) where it would
//!   hand the program frames larger than a UMEM frame (GRO stays on for native
//!   mode, which runs before it).
//! - virtio_net: down to one combined channel when only queue 0 is bound;
//!   the guest receive offloads (`rx-gro-hw`) off, or the host hands the
//!   guest GSO frames of up to 64 KiB.
//! - veth: one RX channel when only queue 0 is bound; in generic mode the
//!   segmentation offloads of a peer in the same namespace off, so it sends
//!   frames no larger than the MTU (in native mode veth does that itself).
//! - The MTU is checked, not changed (it is recorded, and put back after a
//!   crash if it differs).
//! - The steering program, attached through a bpf_link.
//!
//! Everything else keeps reaching the kernel: the program redirects only
//! IPv4 TCP to the configured address and ports (plus ARP and ICMP for an
//! address dedicated to the stack, see [`steer::SteerFlags`]) and passes the
//! rest (`XDP_PASS`), also when no socket is bound to the receiving queue.
//! Where the kernel can load it (ring buffers in a map-in-map), the program
//! also defers pure ACKs for a user who asks ([`steer::Steer::ack_ring`]):
//! it copies them into a ring buffer instead of waking the consumer, which
//! reads them the next time it is awake ([`acks`]); elsewhere the plain
//! program is loaded and a warning says so once.
//!
//! # Example: bounce every frame back
//!
//! Open a port and send every received frame back to its sender with the
//! Ethernet addresses swapped (a layer-2 reflector; a real server runs a
//! TCP/IP stack on the port, see the `stack` crate).
//!
//! ```no_run
//! use std::net::Ipv4Addr;
//! use xsk_io::port::{Port, PortConfig, SteerSpec};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // TCP to 198.18.0.1:7 goes to the port; everything else to the kernel.
//! let steer = SteerSpec::new(Ipv4Addr::new(198, 18, 0, 1)).with_tcp_ports(vec![7]);
//! let cfg = PortConfig::new("eth1").with_steer(Some(steer));
//! // Owns and tunes eth1, binds queue 0, attaches the steering program;
//! // dropping `port` puts eth1 back.
//! let mut port = Port::open(&cfg)?;
//! port.log_features();
//! let mut rx = Vec::with_capacity(64); // reserved once: recv does not allocate
//! loop {
//!     port.recv(&mut rx, 64);
//!     for mut frame in rx.drain(..) {
//!         let data = port.umem().data_mut(&mut frame);
//!         if data.len() >= 12 {
//!             let (dst, src) = data.split_at_mut(6);
//!             dst.swap_with_slice(&mut src[..6]);
//!         }
//!         if let Err(frame) = port.send(frame) {
//!             port.release(frame); // TX ring full: drop this one
//!         }
//!     }
//!     // Publish the batch, reap, refill RX; then sleep until frames come,
//!     // the sleep's poll(2) making the TX kick (one syscall for both). A
//!     // mio loop can register the port instead (it is a
//!     // mio::event::Source) and call `flush`, which kicks at once.
//!     port.publish()?;
//!     port.wait(None, Some(std::time::Duration::from_secs(1)))?;
//! }
//! # }
//! ```
//!
//! # Modules
//!
//! Bottom up (crate-internal: the ring memory mapping and the four
//! single-producer/single-consumer rings, with indices read and written once
//! per batch):
//! - [`sys`]: the `if_xdp.h` ABI the crate needs to show (socket options,
//!   statistics, headroom) and `if_nametoindex`.
//! - [`umem`]: the frame memory and the owned [`Frame`](umem::Frame) handle.
//! - [`socket`]: the AF_XDP socket: ring sizes, errors, option probing.
//! - [`steer`]: the XDP steering program (C, `src/bpf/steer.bpf.c`) behind a bpf_link.
//! - [`acks`]: deferred ACKs: a per-queue BPF ring buffer the program fills
//!   with pure ACKs, without a wake-up, while the queue's consumer sleeps.
//! - [`tune`]: driver-specific device preparation (virtio_net, veth) via
//!   ethtool ioctls and sysfs.
//! - [`state`]: the crash-safe record of what was changed on a device, the
//!   lock that makes one process its owner, and restore.
//! - [`iface`]: an interface prepared for ports; hands out ports.
//! - [`port`]: the data plane of one queue.
//! - [`ifaddr`]: MAC, MTU and IPv4 address of an interface.
//!
//! # The lab kit: the `xsk-lab` crate
//!
//! What the tests and benchmarks need besides the port is a crate of its own,
//! `xsk-lab` (in `xsk-io/lab/`), so that a user of this crate compiles only
//! what the port needs (libbpf-rs, libc, mio, serde, thiserror, tracing):
//! `xsk_lab::lab` (two network namespaces joined by veth, named uniquely per
//! process, torn down on drop), `xsk_lab::pktgen` (Ethernet/IPv4/UDP or TCP
//! frames), `xsk_lab::rawsock` (an `AF_PACKET` socket to play the peer),
//! `xsk_lab::signals` (the binaries' SIGINT/SIGTERM handling) and the
//! `xsk-bench` binary. This crate's integration tests use it as a
//! dev-dependency.
//!
//! # Where `unsafe` lives
//!
//! Only where the kernel, or memory shared with it, is touched; each block has
//! a SAFETY comment (enforced by `clippy::undocumented_unsafe_blocks`, see
//! below): the UMEM and ring memory (the crate-internal mapping and ring
//! modules, and the frame slices of [`umem`]), and the BPF map memory that
//! [`acks`] shares with the program (as atomics and committed records, in
//! the mapping module); syscalls with pointers to plain
//! data ([`sys`], [`socket`], [`ifaddr`], the ethtool ioctls of [`tune`],
//! [`state`]'s `flock`, and the libbpf link and query calls in [`steer`].
//! [`iface`] and [`port`] have none. (The lab kit's own `unsafe`, namespace
//! switching, mounts, signal handlers and the packet socket, is in `xsk-lab`.)

#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

use std::fmt;
use std::str::FromStr;

pub mod sys;
pub(crate) mod mmap;
pub(crate) mod ring;
pub mod umem;
pub mod socket;
pub mod steer;
pub mod acks;
pub mod shed;
pub mod syncookies;
pub mod tune;
pub mod state;
pub mod config;
pub mod iface;
pub mod port;
pub mod ifaddr;
pub mod privileges;

/// How the XDP steering program is attached to the interface. Parses from
/// `skb` (or `generic`), `drv` (or `native`) and `auto`.
///
/// The AF_XDP socket itself is always bound in copy mode; this only chooses
/// where the XDP program runs: in the driver (`Drv`, native) or on the skb
/// path (`Skb`, generic).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AttachMode {
    /// Generic XDP: the program runs on the skb path, after the driver built
    /// an skb. Works on every interface.
    Skb,
    /// Native XDP: the program runs in the driver, before any skb exists.
    /// Needs driver support (veth, virtio_net) and a small enough MTU.
    Drv,
    /// `Drv` where the driver supports native XDP (virtio_net, veth), else `Skb`.
    Auto,
}

impl fmt::Display for AttachMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AttachMode::Skb => "skb",
            AttachMode::Drv => "drv",
            AttachMode::Auto => "auto",
        })
    }
}

impl FromStr for AttachMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "skb" | "generic" => Ok(AttachMode::Skb),
            "drv" | "native" => Ok(AttachMode::Drv),
            "auto" => Ok(AttachMode::Auto),
            other => Err(format!("unknown attach mode {other:?} (expected skb, drv or auto)")),
        }
    }
}
