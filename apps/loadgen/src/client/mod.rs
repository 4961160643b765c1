//! [`Client`]: a load generator over any transport. This file holds its configuration
//! ([`ClientConfig`], [`LoadMode`]), its errors, and connection set-up and teardown; the timed
//! run itself (pacing, matching responses, latency) is in `run.rs`.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use stack::codec::Codec;
use stack::transport::{ConnId, Event, Transport, TransportError};

use crate::{ClientReport, ConnMap, EchoWorkload, Workload, INITIAL_BUF};

mod churn;
mod run;

pub use churn::{Churn, ChurnConfig, ChurnPattern};

use run::InFlight;

/// How requests are paced.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LoadMode {
    /// Keep `depth` requests in flight on every connection. A new one is sent as soon as a
    /// response arrives.
    ClosedLoop {
        /// Requests in flight per connection.
        depth: usize,
    },
    /// Request `k` is due at `start + k / rate` (total over all connections, round robin).
    /// Latency counts from the *scheduled* time, so a slow server cannot hide queueing by
    /// slowing the generator down (coordinated omission). Requests are not capped in flight.
    OpenLoop {
        /// Requests per second over all connections.
        rate: f64,
    },
}

#[derive(Clone, Debug)]
/// What a [`Client`] connects to and how it loads it.
#[non_exhaustive]
pub struct ClientConfig {
    /// Server address (IPv6 where the transport connects over it: the kernel backend).
    pub addr: SocketAddr,
    /// Connections opened before the run and kept for all of it.
    pub connections: usize,
    /// Closed or open loop.
    pub mode: LoadMode,
    /// Stop issuing new requests after this long.
    pub duration: Duration,
    /// Stop issuing after this many requests in total (whichever comes first).
    pub max_requests: Option<u64>,
    /// All connections must be established within this time.
    pub connect_timeout: Duration,
    /// After issuing stops, wait at most this long for outstanding responses (the rest
    /// count as lost).
    pub drain_timeout: Duration,
    /// Poll with a zero timeout instead of sleeping. This burns a core but removes wake-up
    /// latency, and with it the 1 ms timer rounding of the kernel backend in open-loop
    /// pacing.
    pub busy_poll: bool,
}

/// Builders: each sets one field and gives the config back, so a caller outside this
/// crate (where the struct is `#[non_exhaustive]`) writes `ClientConfig::new(addr).with_connections(16)`.
impl ClientConfig {
    /// With `addr` set to `v`.
    pub fn with_addr(mut self, v: impl Into<SocketAddr>) -> Self {
        self.addr = v.into();
        self
    }

    /// With `connections` set to `v`.
    pub fn with_connections(mut self, v: usize) -> Self {
        self.connections = v;
        self
    }

    /// With `mode` set to `v`.
    pub fn with_mode(mut self, v: LoadMode) -> Self {
        self.mode = v;
        self
    }

    /// With `duration` set to `v`.
    pub fn with_duration(mut self, v: Duration) -> Self {
        self.duration = v;
        self
    }

    /// With `max_requests` set to `v`.
    pub fn with_max_requests(mut self, v: Option<u64>) -> Self {
        self.max_requests = v;
        self
    }

    /// With `connect_timeout` set to `v`.
    pub fn with_connect_timeout(mut self, v: Duration) -> Self {
        self.connect_timeout = v;
        self
    }

    /// With `drain_timeout` set to `v`.
    pub fn with_drain_timeout(mut self, v: Duration) -> Self {
        self.drain_timeout = v;
        self
    }

    /// With `busy_poll` set to `v`.
    pub fn with_busy_poll(mut self, v: bool) -> Self {
        self.busy_poll = v;
        self
    }
}

impl ClientConfig {
    /// One connection, depth 1, closed loop, 1 s.
    pub fn new(addr: impl Into<SocketAddr>) -> Self {
        ClientConfig {
            addr: addr.into(),
            connections: 1,
            mode: LoadMode::ClosedLoop { depth: 1 },
            duration: Duration::from_secs(1),
            max_requests: None,
            connect_timeout: Duration::from_secs(5),
            drain_timeout: Duration::from_secs(2),
            busy_poll: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
/// Why a [`Client`] run failed as a whole (individual bad replies count as errors instead).
pub enum ClientError {
    #[error(transparent)]
    /// The transport failed (not a peer's misbehaviour).
    Transport(#[from] TransportError),
    #[error("only {established} of {wanted} connections to {addr} established within {timeout:?} ({failed} failed)")]
    /// Not every connection was established in time.
    Connect {
        /// Server address.
        addr: SocketAddr,
        /// Connections that came up.
        established: usize,
        /// Connections refused or reset.
        failed: usize,
        /// Connections asked for.
        wanted: usize,
        /// The connect timeout.
        timeout: Duration,
    },
    #[error("invalid client config: {0}")]
    /// The configuration cannot work (e.g. depth 0).
    Config(&'static str),
}

/// One connection of the client: its buffers and the requests awaiting a response.
struct ClientConn<C> {
    id: ConnId,
    codec: C,
    rbuf: BytesMut,
    wbuf: BytesMut,
    inflight: VecDeque<InFlight>,
    /// Payloads of the in-flight requests, concatenated in order, for the check.
    reqs: BytesMut,
    seq: u64,
    /// The id is still open in the transport (not yet closed by `kill`).
    alive: bool,
}

/// A load generator: `connections` connections to one server, requests from a [`Workload`],
/// responses matched FIFO per connection, verified, and timed.
pub struct Client<T: Transport, C: Codec + Clone, W: Workload = EchoWorkload> {
    transport: T,
    codec: C,
    workload: W,
    cfg: ClientConfig,
    conns: Vec<ClientConn<C>>,
    index: ConnMap<usize>,
    events: Vec<Event>,
    scratch: BytesMut,
}

impl<T: Transport, C: Codec + Clone, W: Workload> Client<T, C, W> {
    /// A client that will open `cfg.connections` connections when [`Client::run`] is called.
    pub fn new(transport: T, codec: C, workload: W, cfg: ClientConfig) -> Self {
        Client {
            transport,
            codec,
            workload,
            cfg,
            conns: Vec::new(),
            index: ConnMap::default(),
            events: Vec::with_capacity(1024),
            scratch: BytesMut::with_capacity(INITIAL_BUF),
        }
    }

    /// The transport (e.g. for its counters after a run).
    pub fn transport(&self) -> &T {
        &self.transport
    }

    /// The workload (e.g. for its own counters after a run).
    pub fn workload(&self) -> &W {
        &self.workload
    }

    /// Takes the client apart.
    pub fn into_parts(self) -> (T, W) {
        (self.transport, self.workload)
    }

    /// Connects, runs the load, and closes every connection again. Fails with
    /// [`ClientError::Config`] for a depth of 0, a rate that is not a positive number or no
    /// connections, [`ClientError::Connect`] if not every connection came up within
    /// [`ClientConfig::connect_timeout`], and [`ClientError::Transport`] if the transport
    /// failed. Bad or missing responses do not fail the run: they are counted in the report.
    pub fn run(&mut self) -> Result<ClientReport, ClientError> {
        let depth = match self.cfg.mode {
            LoadMode::ClosedLoop { depth: 0 } => return Err(ClientError::Config("closed-loop depth must be > 0")),
            LoadMode::ClosedLoop { depth } => depth,
            LoadMode::OpenLoop { rate } if !(rate.is_finite() && rate > 0.0) => {
                return Err(ClientError::Config("open-loop rate must be a positive number"))
            }
            LoadMode::OpenLoop { .. } => 64,
        };
        if self.cfg.connections == 0 {
            return Err(ClientError::Config("need at least one connection"));
        }
        let result = self.connect_all(depth).and_then(|()| self.drive());
        self.close_all();
        result
    }

    fn connect_all(&mut self, depth: usize) -> Result<(), ClientError> {
        for _ in 0..self.cfg.connections {
            let id = self.transport.connect_ip(self.cfg.addr)?;
            self.index.insert(id, self.conns.len());
            self.conns.push(ClientConn {
                id,
                codec: self.codec.clone(),
                rbuf: BytesMut::with_capacity(INITIAL_BUF),
                wbuf: BytesMut::with_capacity(INITIAL_BUF),
                inflight: VecDeque::with_capacity(depth),
                reqs: BytesMut::with_capacity(INITIAL_BUF),
                seq: 0,
                alive: true,
            });
        }
        self.transport.flush()?;
        let deadline = Instant::now() + self.cfg.connect_timeout;
        let (mut established, mut failed) = (0, 0);
        while established + failed < self.conns.len() {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            self.events.clear();
            self.transport.poll(&mut self.events, Some((deadline - now).min(Duration::from_millis(50))))?;
            for ev in &self.events {
                match *ev {
                    Event::Connected(id) if self.index.contains_key(&id) => established += 1,
                    // A failed connect. Its id stays valid until close_all() closes it.
                    Event::Closed(id) if self.index.contains_key(&id) => failed += 1,
                    _ => {}
                }
            }
        }
        if established < self.conns.len() {
            return Err(ClientError::Connect {
                addr: self.cfg.addr,
                established,
                failed,
                wanted: self.conns.len(),
                timeout: self.cfg.connect_timeout,
            });
        }
        Ok(())
    }

    fn close_all(&mut self) {
        for conn in self.conns.drain(..) {
            if conn.alive {
                self.transport.close(conn.id);
            }
        }
        self.index.clear();
        // Let a batching backend push out the FINs: flush may leave its
        // last step to the next poll (xsk: the TX kick), so poll once,
        // without waiting.
        let _ = self.transport.flush();
        let mut scratch = std::mem::take(&mut self.events);
        let _ = self.transport.poll(&mut scratch, Some(Duration::ZERO));
        scratch.clear();
        self.events = scratch;
    }
}
