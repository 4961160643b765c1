//! `xsk-lab`: the test and benchmark kit of `xsk-io`.
//!
//! A port needs none of this, so it is a crate of its own and `xsk-io`
//! compiles without clap, anyhow, serde_json, tracing-subscriber or
//! humantime. The workspace's tests, benchmarks and `apps` binaries use it:
//! - [`lab`]: two network namespaces joined by one veth pair, named uniquely
//!   per process and torn down on drop (also after a crash: `sweep_stale`);
//! - [`pktgen`]: Ethernet/IPv4/UDP or TCP frames with valid checksums;
//! - [`rawsock`]: an `AF_PACKET` socket to play the peer of a port;
//! - [`signals`]: the binaries' SIGINT/SIGTERM handling (the first signal
//!   sets a flag, the second removes the labs and exits);
//! - the `xsk-bench` binary (`src/bin/xsk-bench/`): packet rates of the bare
//!   port, and `xsk-bench restore IF` to put a device back after a crash.
//!
//! Everything here needs root (namespaces, XDP, packet sockets) when used.
//!
//! # Where `unsafe` lives
//!
//! Namespace switching and the private `/sys` mount ([`lab`]), signal handlers
//! ([`signals`]) and the packet socket ([`rawsock`]); each block has a SAFETY
//! comment.

#![warn(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod lab;
pub mod pktgen;
pub mod rawsock;
pub mod signals;
