//! The load generator for request/response servers, over any [`stack::Transport`]: the
//! engine of `rr-bench`, and what the stack's own tests drive their servers with. It lives
//! outside `stack`, which holds what an embedder needs (a server, the backends); it uses only
//! `stack`'s public API, so the same generator runs over the kernel backend
//! ([`stack::KernelTransport`]) or the AF_XDP one (`stack::xsk::XskTransport`, whichever the
//! caller built with).
//!
//! - A [`Client`] opens its connections, loads them closed or open loop ([`LoadMode`]) with
//!   requests from a [`Workload`] ([`EchoWorkload`], or [`FnWorkload`] from two closures),
//!   checks and times each response, and gives a [`ClientReport`] at the end.
//! - A [`Churn`] measures how fast a server takes new connections: connect, one request,
//!   close, over and over ([`ChurnPattern`]).
//!
//! `examples/client.rs` drives the line protocol of `stack/examples/line_server.rs`.
//!
//! | file | what |
//! |---|---|
//! | `workloads.rs` | what a [`Client`] sends and checks: [`Workload`], [`EchoWorkload`], [`FnWorkload`] |
//! | `client/` | [`Client`]: configuration and connection set-up; `run.rs` is the timed load loop, `churn.rs` the connection-rate generator [`Churn`] |
//! | `report.rs` | [`ClientReport`]: counts, latency histogram, merge, one-line summary |

#![warn(missing_docs)]

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use stack::transport::ConnId;

mod client;
mod report;
mod workloads;

pub use client::{Churn, ChurnConfig, ChurnPattern, Client, ClientConfig, ClientError, LoadMode};
pub use report::ClientReport;
pub use workloads::{EchoWorkload, FnWorkload, Workload};

/// Initial per-connection buffer capacity: enough for typical pipelined small messages without
/// growing, small enough for thousands of connections.
const INITIAL_BUF: usize = 16 * 1024;

/// ConnIds are already well-distributed small integers, so a multiplicative hash beats SipHash
/// for the per-event lookup. The ids come from our own transport, so HashDoS is not a concern.
/// (The same hasher as `stack::rr`'s server, whose copy is private to `stack`.)
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

type ConnMap<V> = HashMap<ConnId, V, BuildHasherDefault<IdHasher>>;
