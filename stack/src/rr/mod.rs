//! Request/response over any [`Transport`](crate::transport::Transport): a pipelining
//! [`Server`] driving a [`Handler`]. The load generator that drives such servers (closed or
//! open loop, each response checked and timed) is the `rr-load` crate (`apps/loadgen/`).
//!
//! A [`Handler`] gets each decoded request and writes its response; it can also keep
//! per-connection state ([`Handler::Conn`], made at open, lent to each request), ask to close
//! ([`Reply::Close`]), and answer later ([`Reply::Pending`], completed through [`Completions`] in
//! [`Handler::tick`] or [`Server::complete`]). `stack/examples/line_server.rs` shows per-connection
//! state and `Reply::Close`; `pending_replies_complete_later_in_order_without_blocking_others` in
//! `stack/tests/kernel_rr/pending.rs` a handler that answers later.
//!
//! The server follows the transport contract in [`crate::transport`]: on `Readable` they drain
//! `recv` until `Ok(0)` (or knowingly postpone it), a short `send` waits for `Writable`, and
//! `flush` is called once per loop iteration. Per-connection buffers are `BytesMut`s that
//! keep their capacity, and in-flight bookkeeping is a pre-reserved `VecDeque`, so the steady
//! state allocates nothing per request.
//!
//! | file | what |
//! |---|---|
//! | `handler.rs` | [`Handler`], [`Reply`], [`Completions`], and the [`Echo`] handler |
//! | `kv.rs` | the [`Kv`] service and its wire format ([`KvRequest`], [`KvResponse`]) |
//! | `server/` | [`Server`]: accept, decode, handle, batch responses, back-pressure (`mod.rs`); [`Server::shutdown`] (`shutdown.rs`); tests over the in-memory transport (`tests.rs`) |

mod handler;
mod kv;
mod server;

pub use handler::{Completions, Echo, Handler, Reply};
pub use kv::{Kv, KvError, KvRequest, KvResponse, KvStatus};
pub use server::{Server, ServerConfig, ServerStats, ShutdownStats};
