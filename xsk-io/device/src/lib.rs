//! `xsk-device`: an interface prepared for `xsk-io` ports, and put back.
//!
//! `xsk-io` is the AF_XDP data plane: a [`Port`](xsk_io::port::Port) bound to
//! one queue. This crate does what happens once per interface around it:
//! owning the device, tuning it so that a copy-mode socket works well, and
//! attaching the XDP steering program that redirects the stack's flows into
//! the ports and leaves everything else to the kernel.
//!
//! # [`Iface`] prepares, ports move frames
//!
//! [`Iface::open`] (one queue) and [`Iface::open_all`] (every RX queue):
//! 1. take ownership: a lock and a record of the device's original state
//!    under `/run/xsk-io` ([`state`]; `XSK_IO_STATE_DIR` moves it). A second
//!    live owner is refused with its pid; a record left by an owner that died
//!    (SIGKILL, OOM, abort) is restored first;
//! 2. check and tune the device ([`tune`]), recording each original before
//!    changing it;
//! 3. bind the ports ([`Port::bind`](xsk_io::port::Port::bind)) and attach
//!    the steering program ([`steer`]) once they are bound, registering each
//!    port in it, with SYN shedding where [`PortConfig::syn_shed`] asks.
//!
//! Each port keeps its `Iface` alive; when the last port (and the last clone
//! of the returned `Arc<Iface>`) is dropped, the program is detached, the
//! device is put back (newest change first), sysctls set through
//! [`Iface::set_sysctl`] get their old values, and the record is removed. If
//! the process dies instead, the program goes with it (it is held by a
//! bpf_link, not attached through netlink), and the record stays for the
//! next start on that interface or `xsk-bench restore IF` (run under
//! `ip netns exec NS` for a device in a namespace).
//!
//! Where the steering program runs: natively in the driver
//! ([`AttachMode::Drv`]) or on the generic skb path ([`AttachMode::Skb`]);
//! [`AttachMode::Auto`] takes native on veth and virtio_net when the tuning's
//! checks pass, generic otherwise, and says why in one line.
//!
//! # What the process needs
//!
//! The capabilities `CAP_NET_RAW`, `CAP_NET_ADMIN`, `CAP_BPF`, `CAP_PERFMON`
//! and `CAP_IPC_LOCK` ([`privileges`] says what each is for; `CAP_SYS_ADMIN`
//! stands in for `CAP_BPF` and `CAP_PERFMON`; without `CAP_IPC_LOCK` a
//! memlock limit that holds the UMEM does), write access to the state
//! directory `/run/xsk-io` ([`state::state_dir`]: [`state::set_state_dir`]
//! or `XSK_IO_STATE_DIR` move it), and to `/proc/sys` for sysctls set
//! through an `Iface`. [`Iface::open`] checks them before it changes
//! anything and names each one missing with its fix
//! ([`DeviceError::Privileges`]). Once the ports are open only
//! `CAP_NET_ADMIN` is still needed (to put the device back at exit):
//! [`privileges::drop_after_setup`] drops the rest.
//!
//! Root has all of these. The interface must exist in the calling thread's
//! network namespace (and sysfs must show that namespace: use
//! `ip netns exec`, which remounts `/sys`). Its MTU plus the Ethernet header
//! and one VLAN tag must fit a UMEM frame minus
//! [`XDP_PACKET_HEADROOM`](xsk_io::sys::XDP_PACKET_HEADROOM) (1500 fits
//! 2048- and 4096-byte frames). Native XDP has lower limits (virtio_net: 3494
//! with 4 KiB pages; veth: the peer's MTU at most 3506).
//!
//! # What it changes on the interface, and undoes
//!
//! Each step is logged and returned as a [`tune::Step`]; a step that cannot be
//! done fails with the command that fixes it, after rolling back the steps
//! before it. With [`PortConfig::tune`] off, nothing is changed and the
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
//! TCP to the configured addresses and ports (plus ARP, ICMP and neighbour
//! discovery for an address dedicated to the stack, see
//! [`steer::SteerFlags`]) and passes the rest (`XDP_PASS`), also when no
//! socket is bound to the receiving queue. Where the kernel can load it
//! (ring buffers in a map-in-map), the program also defers pure ACKs for a
//! user who asks ([`steer::Steer::ack_ring`]): it copies them into a ring
//! buffer instead of waking the consumer, which reads them the next time it
//! is awake ([`xsk_io::acks`]); elsewhere the plain program is loaded and a
//! warning says so once.
//!
//! # Example: bounce every frame back
//!
//! ```no_run
//! use std::net::Ipv4Addr;
//! use xsk_device::{Iface, PortConfig, SteerSpec};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // TCP to 198.18.0.1:7 goes to the port; everything else to the kernel.
//! let steer = SteerSpec::new(Ipv4Addr::new(198, 18, 0, 1)).with_tcp_ports(vec![7]);
//! let cfg = PortConfig::new("eth1").with_steer(Some(steer));
//! // Owns and tunes eth1, binds queue 0, attaches the steering program;
//! // dropping `port` (and `iface`) puts eth1 back.
//! let (iface, mut port) = Iface::open(&cfg)?;
//! port.log_features();
//! let mut rx = Vec::with_capacity(64);
//! loop {
//!     port.recv(&mut rx, 64);
//!     for mut frame in rx.drain(..) {
//!         let data = port.umem().data_mut(&mut frame);
//!         if data.len() >= 12 {
//!             let (dst, src) = data.split_at_mut(6);
//!             dst.swap_with_slice(&mut src[..6]);
//!         }
//!         if let Err(frame) = port.send(frame) {
//!             port.release(frame);
//!         }
//!     }
//!     port.flush_before_wait()?;
//!     port.wait(None, Some(std::time::Duration::from_secs(1)))?;
//! #   let _ = &iface;
//! }
//! # }
//! ```
//!
//! # Modules
//!
//! - `ethtool` (crate-internal): the ethtool ioctls (driver, offloads,
//!   channels, statistics).
//! - `step` (crate-internal): what a change to the device reports, shared by
//!   the tuning and the record.
//! - [`tune`]: driver-specific device preparation (virtio_net, veth) via
//!   ethtool ioctls and sysfs.
//! - [`state`]: the crash-safe record of what was changed on a device, the
//!   lock that makes one process its owner, and restore.
//! - [`steer`]: the XDP steering program (C, `src/bpf/steer.bpf.c`) behind a bpf_link.
//! - [`iface`]: an interface prepared for ports; hands out ports.
//! - [`ifaddr`]: MAC, MTU and addresses of an interface.
//! - [`privileges`]: what the process needs, checked first; dropped after.
//!
//! # Where `unsafe` lives
//!
//! Syscalls with pointers to plain data: the ethtool ioctls of [`tune`],
//! [`state`]'s `flock`, [`ifaddr`]'s `getifaddrs` and ioctls, and the libbpf
//! link and query calls in [`steer`]. Each block has a SAFETY comment.

#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod config;
mod error;
pub(crate) mod ethtool;
pub mod iface;
pub mod ifaddr;
mod open;
pub mod privileges;
pub mod state;
pub(crate) mod step;
pub mod steer;
pub mod tune;

pub use config::{PortConfig, SteerSpec};
pub use error::DeviceError;
pub use iface::Iface;
pub use xsk_io::port::{BusyPoll, Setting};
pub use xsk_io::AttachMode;
