//! The application side of a [`Server`](super::Server): the [`Handler`] trait, what it returns
//! ([`Reply`]), how it completes deferred responses ([`Completions`]), and the simplest handler,
//! [`Echo`].

use std::net::SocketAddrV4;

use bytes::BytesMut;

use crate::transport::ConnId;

/// What the [`Server`](super::Server) does with a connection after [`Handler::handle`] returned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reply {
    /// The response is complete: keep serving the connection.
    #[default]
    Done,
    /// Send every response queued so far, then close the connection (e.g. RESP `QUIT`).
    /// Requests that arrived after this one are dropped unanswered.
    Close,
    /// The response comes later, through [`Completions::complete`] (from [`Handler::tick`]) or
    /// [`Server::complete`](super::Server::complete); whatever `handle` wrote to `resp` is discarded. Until then the
    /// server decodes no further request from this connection, so responses stay in request
    /// order; other connections are served as usual.
    Pending,
}

/// Responses to [`Reply::Pending`] requests, handed to the server from [`Handler::tick`]. The
/// buffers are kept between ticks, so completing allocates nothing in steady state.
#[derive(Debug, Default)]
pub struct Completions {
    pub(super) payloads: BytesMut,
    /// Connection and end offset of its payload in `payloads`.
    pub(super) done: Vec<(ConnId, usize)>,
}

impl Completions {
    /// Completes the pending request of `conn` with `payload` (framed by the server's codec).
    /// A completion for a connection that closed meanwhile, or has nothing pending, is dropped.
    pub fn complete(&mut self, conn: ConnId, payload: &[u8]) {
        self.payloads.extend_from_slice(payload);
        self.done.push((conn, self.payloads.len()));
    }

    /// Completions queued and not yet taken by the server.
    pub fn len(&self) -> usize {
        self.done.len()
    }

    /// Nothing queued.
    pub fn is_empty(&self) -> bool {
        self.done.is_empty()
    }
}

/// Application logic of a [`Server`](super::Server): one decoded request in, one response out.
///
/// The server calls the hooks from its single event-loop thread, without locks. State shared
/// by all connections (a store, counters) lives in the handler itself; a server per thread
/// (one transport each) means a handler per thread, so sharing across threads is the
/// handler's own choice (an `Arc<Mutex<..>>`, say). The server keeps a [`Handler::Conn`]
/// for each connection on the handler's behalf (made by `on_open`, lent to every `handle`,
/// given back to `on_close`), so per-connection state needs no table of the handler's own;
/// `type Conn = ();` when there is none. Everything but `handle` has a default.
pub trait Handler {
    /// Per-connection state, kept by the server from `on_open` to `on_close`. Its `Default`
    /// is what the provided `on_open` makes.
    type Conn: Default;

    /// Appends the response payload for `req` to `resp` (empty on entry). The server frames
    /// it with the connection's codec. `state` is this connection's. Must not panic on any
    /// `req`: it is peer input.
    fn handle(&mut self, conn: ConnId, state: &mut Self::Conn, req: &[u8], resp: &mut BytesMut) -> Reply;

    /// A connection was accepted from `peer` (None if the transport no longer knows it):
    /// returns its state. Called before any `handle` for it.
    fn on_open(&mut self, conn: ConnId, peer: Option<SocketAddrV4>) -> Self::Conn {
        let _ = (conn, peer);
        Self::Conn::default()
    }

    /// The connection is closed (peer closed, `Reply::Close`, protocol or I/O error, or
    /// [`Server::shutdown`](super::Server::shutdown)); `state` is its state, handed back. No
    /// further calls for this id follow. Not called for connections still open when a
    /// server is dropped.
    fn on_close(&mut self, conn: ConnId, state: Self::Conn) {
        let _ = (conn, state);
    }

    /// Called once per event-loop iteration, for periodic work such as expiring keys, and to
    /// complete [`Reply::Pending`] requests through `done`. While idle the loop runs when
    /// [`tick_in`](Self::tick_in) says (and at least every
    /// [`ServerConfig::poll_timeout`](super::ServerConfig::poll_timeout), if one is set): work
    /// that finishes elsewhere (another thread) must wake a server that sleeps with no
    /// timeout through its waker ([`Server::waker`](super::Server::waker)).
    /// Keep it cheap: it runs between batches.
    fn tick(&mut self, done: &mut Completions) {
        let _ = done;
    }

    /// How soon [`tick`](Self::tick) must run if nothing else happens: the server's sleep ends
    /// by then. None (the default): no periodic work, only events wake the loop. Asked once
    /// per iteration, before the server sleeps.
    fn tick_in(&self) -> Option<std::time::Duration> {
        None
    }
}

/// Replies with the request.
#[derive(Clone, Copy, Debug, Default)]
pub struct Echo;

impl Handler for Echo {
    type Conn = ();

    fn handle(&mut self, _conn: ConnId, _state: &mut (), req: &[u8], resp: &mut BytesMut) -> Reply {
        resp.extend_from_slice(req);
        Reply::Done
    }
}
