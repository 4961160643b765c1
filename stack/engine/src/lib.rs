//! The stack's TCP engine: smoltcp's TCP over IPv4 and IPv6 for many connections, with no
//! I/O. Frames go in one at a time, frames come out through a [`Link`] the
//! caller lends to each call, time is an argument, and what happened to the
//! connections comes out as [`Event`]s. It opens no socket, reads no clock
//! and spawns nothing (it depends on smoltcp, not on the OS), so the same
//! engine runs under the AF_XDP driver in `stack::xsk`, in memory in tests
//! (`testing`, with the feature `testing`), and in the fuzzer.
//!
//! Scaling to many connections: smoltcp scans every socket of a set for each
//! packet and each egress pass, so sockets live in many small sets (buckets)
//! chosen by a hash of the 4-tuple ([`demux`]); a packet and a timer only
//! touch their own bucket. In front of smoltcp sit what a server facing the
//! network needs: a check of every frame before smoltcp parses it (counted
//! by [`DropReason`]), half-open limits and SYN cookies ([`SynCookies`]),
//! a header-prediction fast path for in-order request/response segments, and
//! a socket pool.
//!
//! # Driving it
//!
//! One [`Engine`] per shard (one RX queue, one thread). The driver owns the
//! link and the clock and calls, in this order, once per pass of its loop:
//!
//! 1. [`Engine::add_neighbour`] for each neighbour it resolved outside the
//!    engine (shared-address mode: the kernel's table), if any;
//! 2. [`Engine::ingest`] for each received frame, in arrival order, with the
//!    time it arrived (or now). A frame the engine refuses comes back as a
//!    [`DropReason`]; the frame is the caller's again either way;
//! 3. [`Engine::scan_dirty`], then [`Engine::take_events`]: what the frames
//!    changed (accepts, data, closes), reported *before* anything is sent, so
//!    the application's answers can ride on the ACKs. If there were events,
//!    the driver returns them to the application, which calls
//!    [`Engine::recv`], [`Engine::send_now`] (or [`Engine::send`], which only
//!    queues), [`Engine::close`] ... and then the driver's flush runs step 4.
//!    `send_now` puts an answer to an idle connection on the link at once when
//!    that is all its bucket's egress would do (its socket alone in the
//!    bucket); what else was written waits for step 4;
//! 4. [`Engine::egress`] when [`Engine::egress_due`] (a touched bucket, a
//!    due timer, the sweep), or whenever the application queued data
//!    ([`Engine::wants_egress`]): smoltcp's transmit for those buckets into
//!    the link; then [`Engine::take_events`] again (timeouts, resets);
//! 5. [`Engine::port_changes`]: local ports that started or stopped being
//!    used, for a driver that steers or holds them (shared-address mode);
//! 6. sleep until [`Engine::poll_at`] at the latest (or until a frame
//!    arrives), then start again at 1.
//!
//! [`Engine::listen`], [`Engine::connect`] and [`Engine::shutdown_write`]
//! may be called between passes. [`Engine::abort_all`] resets every
//! connection when the driver goes away.
//!
//! A [`Link`] is the engine's only way out: `tx` for a frame, `tx_ready`
//! for whether egress may produce frames now, `mtu`, and whether the link
//! completes TCP checksums ([`Link::csum_offload`]). [`faults::Faulty`]
//! wraps any link (and a received frame's way in) to drop, duplicate and
//! reorder frames, as smoltcp's `FaultInjector` wraps a device.
//!
//! # Without the `tcp` feature
//!
//! The crate is then only the connection vocabulary: [`ConnId`],
//! [`ListenerId`], [`Event`], [`TransportError`] and [`ConnSlab`], which
//! `stack`'s kernel backend shares with the engine without compiling smoltcp.

#![warn(missing_docs)]

mod conn;

pub use conn::{ConnId, ConnIdHasher, ConnMap, ConnSlab, Event, ListenerId, TransportError};

#[cfg(feature = "tcp")]
pub mod arp;
#[cfg(feature = "tcp")]
pub mod csum;
#[cfg(feature = "tcp")]
pub mod demux;
#[cfg(feature = "tcp")]
mod drops;
#[cfg(feature = "tcp")]
mod engine;
#[cfg(feature = "tcp")]
pub mod faults;
#[cfg(feature = "tcp")]
mod recovery;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

#[cfg(feature = "tcp")]
pub use drops::{DropReason, DropStats};
#[cfg(feature = "tcp")]
pub use engine::{
    CookieTemplate, Congestion, Engine, EngineConfig, EngineSetup, EngineStats, Link, PortChange, SynCookies,
};
#[cfg(feature = "tcp")]
pub use faults::{Faults, RxFrames};
#[cfg(feature = "tcp")]
pub use recovery::{Recovery, RecoveryStats};
/// smoltcp's time, in which the engine takes its clock.
#[cfg(feature = "tcp")]
pub use smoltcp::time::Instant;
/// The `bytes` the API speaks (`recv` into a `BytesMut`), so a user needs no version of its own.
pub use bytes;
/// Our patched smoltcp (`stack/vendor/smoltcp/PATCHES.md`): a [`Link`] implements its
/// `phy::TxToken`, and the clock is its `time`.
#[cfg(feature = "tcp")]
pub use smoltcp;
