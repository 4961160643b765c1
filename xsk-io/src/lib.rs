//! `xsk-io`: one network interface queue as a fast, batched, copy-mode AF_XDP port.
//!
//! An AF_XDP socket receives the frames an XDP program redirects to it and
//! sends frames straight to the device queue, bypassing the kernel's IP and
//! TCP layers. This crate is that socket's data plane: the shared memory
//! (UMEM) and its four rings, batched receive and send with at most one
//! syscall per batch, and exact accounting of every frame. It does no IP or
//! TCP (the `stack` crate of this workspace does, on top of it), and it
//! does not prepare the device: owning and tuning the interface and
//! attaching the XDP program that redirects into the socket is the
//! `xsk-device` crate's job (`xsk-io/device/`), or an embedder's own.
//!
//! # A port
//!
//! [`Port::bind`](port::Port::bind) binds one queue of an interface:
//! [`recv`](port::Port::recv) and [`release`](port::Port::release) received
//! frames, [`alloc`](port::Port::alloc) and [`send`](port::Port::send)
//! frames to send, [`flush`](port::Port::flush) to put them on the TX ring
//! (one Release store) and kick the kernel (a `sendto`, only when it asks
//! for a wakeup), [`reap`](port::Port::reap) completions, and
//! [`audit`](port::Port::audit) to prove that every UMEM frame is in exactly
//! one place. No allocation on this path.
//!
//! Frames reach the socket once an XDP program on the interface redirects
//! them into an `XSKMAP` entry holding the port's descriptor (the port is
//! [`AsFd`](std::os::fd::AsFd)); sending needs no program.
//!
//! # Copy mode, and why
//!
//! Sockets are always bound `XDP_COPY | XDP_USE_NEED_WAKEUP`, never
//! zero-copy (a zero-copy bind is refused: [`port::PortError::ZeroCopy`]).
//! Copy mode is the AF_XDP mode every driver supports; the devices this is
//! for, virtio_net in KVM guests and veth in tests, offer no zero-copy the
//! crate could rely on.
//!
//! The cost of copy mode is on TX: each frame becomes an skb sent by the
//! kernel inside the `sendto`. Two `SOL_XDP` options make that cheaper, both
//! probed when a port binds and reported in [`port::Features`]:
//! - [`sys::XDP_MAX_TX_SKB_BUDGET`] (Linux 6.17+): descriptors per `sendto`,
//!   set to the TX ring size by default (older kernels: 32);
//! - [`sys::XDP_GENERIC_XMIT_BATCH`] (proposed upstream, in no released
//!   kernel): frames sent under one TX queue lock, 32 by default, never above
//!   the budget.
//!
//! A kernel without an option answers `ENOPROTOOPT`: the port logs one
//! warning and runs without it. A value the kernel refuses for an option it
//! has is an error ([`port::PortError::Option`]). Both are
//! [`port::Setting`]s in [`port::QueueConfig`].
//!
//! # The steering program's shared memory
//!
//! The `xsk-device` crate's program shares per-queue slots with the port
//! ([`acks::QueueState`]), which this crate reads and writes on the data
//! path: deferred pure ACKs ([`acks`]), the SYN-shedding budget ([`shed`])
//! and the switch of SYN cookies answered in XDP ([`syncookies`]).
//!
//! # Example: bounce every frame back
//!
//! Bind queue 0 of an interface whose XDP program someone else attached, and
//! send every received frame back to its sender with the Ethernet addresses
//! swapped (a layer-2 reflector; a real server runs a TCP/IP stack on the
//! port, see the `stack` crate; `xsk-device` shows the same with the device
//! prepared for you).
//!
//! ```no_run
//! use xsk_io::port::{Port, QueueConfig};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut port = Port::bind("eth1", 0, &QueueConfig::default())?;
//! // ... put the port's descriptor into your program's XSKMAP here ...
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
//!     port.flush_before_wait()?;
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
//! - [`acks`]: deferred ACKs: a per-queue BPF ring buffer the program fills
//!   with pure ACKs, without a wake-up, while the queue's consumer sleeps.
//! - [`shed`]: the port's side of SYN shedding under overload.
//! - [`syncookies`]: the port's side of SYN cookies answered in XDP.
//! - [`port`]: the data plane of one queue.
//!
//! # Where `unsafe` lives
//!
//! Only where the kernel, or memory shared with it, is touched; each block has
//! a SAFETY comment (enforced by `clippy::undocumented_unsafe_blocks`, see
//! below): the UMEM and ring memory (the crate-internal mapping and ring
//! modules, and the frame slices of [`umem`]), the BPF map memory that
//! [`acks`] shares with the program (as atomics and committed records, in
//! the mapping module), and syscalls with pointers to plain data ([`sys`],
//! [`socket`]). [`port`] has none.

#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

use std::fmt;
use std::str::FromStr;

pub mod sys;
pub(crate) mod mmap;
pub(crate) mod ring;
pub mod umem;
pub mod socket;
pub mod acks;
pub mod shed;
pub mod syncookies;
pub mod port;

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
