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

mod client;
mod report;
mod workloads;

pub use client::{Churn, ChurnConfig, ChurnPattern, Client, ClientConfig, ClientError, LoadMode};
pub use report::ClientReport;
pub use workloads::{EchoWorkload, FnWorkload, Workload};

/// Initial per-connection buffer capacity: enough for typical pipelined small messages without
/// growing, small enough for thousands of connections.
const INITIAL_BUF: usize = 16 * 1024;

use stack::transport::ConnMap;
