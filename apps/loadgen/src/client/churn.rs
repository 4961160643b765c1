//! [`Churn`]: how fast a server takes new connections. Each connection is opened, sends one
//! request, checks the response and is closed (a FIN from the client), over and over:
//! continuously with `concurrency` connections in progress ([`ChurnPattern::Churn`]), or in
//! waves of `concurrency` connections opened at once ([`ChurnPattern::Storm`]: the next
//! wave starts when every connection of the last one is done).
//!
//! The report's `requests` are completed connections, `latency` is from the connect call to
//! the response, and `setup` from the connect call to the established connection.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use stack::codec::Codec;
use stack::transport::{ConnId, Event, Transport};

use super::{ClientError, INITIAL_BUF};
use crate::{ClientReport, ConnMap, EchoWorkload, Workload};

/// How connections are opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChurnPattern {
    /// `concurrency` connections in progress at all times: one closes, the next opens.
    Churn,
    /// Waves of `concurrency` connections opened at once.
    Storm,
}

/// What a [`Churn`] run does.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ChurnConfig {
    /// Server address.
    pub addr: SocketAddr,
    /// Connections in progress at once (churn), or per wave (storm).
    pub concurrency: usize,
    /// Churn or storm.
    pub pattern: ChurnPattern,
    /// Stop opening connections after this long.
    pub duration: Duration,
    /// Open no more than this many connections (whichever comes first).
    pub max_connections: Option<u64>,
    /// A connection not established within this long counts as failed and is closed.
    pub connect_timeout: Duration,
    /// After opening stops, wait at most this long for the connections in progress.
    pub drain_timeout: Duration,
}

/// Builders: each sets one field and gives the config back, so a caller outside this
/// crate (where the struct is `#[non_exhaustive]`) writes `ChurnConfig::new(addr).with_concurrency(16)`.
impl ChurnConfig {
    /// With `addr` set to `v`.
    pub fn with_addr(mut self, v: impl Into<SocketAddr>) -> Self {
        self.addr = v.into();
        self
    }

    /// With `concurrency` set to `v`.
    pub fn with_concurrency(mut self, v: usize) -> Self {
        self.concurrency = v;
        self
    }

    /// With `pattern` set to `v`.
    pub fn with_pattern(mut self, v: ChurnPattern) -> Self {
        self.pattern = v;
        self
    }

    /// With `duration` set to `v`.
    pub fn with_duration(mut self, v: Duration) -> Self {
        self.duration = v;
        self
    }

    /// With `max_connections` set to `v`.
    pub fn with_max_connections(mut self, v: Option<u64>) -> Self {
        self.max_connections = v;
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
}

impl ChurnConfig {
    /// 16 connections in progress, churn, 1 s.
    pub fn new(addr: impl Into<SocketAddr>) -> Self {
        ChurnConfig {
            addr: addr.into(),
            concurrency: 16,
            pattern: ChurnPattern::Churn,
            duration: Duration::from_secs(1),
            max_connections: None,
            connect_timeout: Duration::from_secs(5),
            drain_timeout: Duration::from_secs(5),
        }
    }
}

/// One connection in progress.
struct Slot {
    id: ConnId,
    /// Its number for the workload.
    n: usize,
    opened: Instant,
    established: bool,
    req: BytesMut,
    wbuf: BytesMut,
    rbuf: BytesMut,
}

/// The connection-rate load generator (see the module docs).
pub struct Churn<T: Transport, C: Codec + Clone, W: Workload = EchoWorkload> {
    transport: T,
    codec: C,
    workload: W,
    cfg: ChurnConfig,
    /// Connections in progress; `index` maps their ids to positions.
    slots: Vec<Slot>,
    index: ConnMap<usize>,
    events: Vec<Event>,
    report: ClientReport,
    /// Connection numbers for the workload, stable while a connection lives: the free ones.
    free: Vec<usize>,
    seq: u64,
}

impl<T: Transport, C: Codec + Clone, W: Workload> Churn<T, C, W> {
    /// A run that opens its connections when [`Churn::run`] is called.
    pub fn new(transport: T, codec: C, workload: W, cfg: ChurnConfig) -> Self {
        let backend = transport.name();
        Churn {
            transport,
            codec,
            workload,
            report: ClientReport::empty(backend, cfg.concurrency),
            cfg,
            slots: Vec::new(),
            index: ConnMap::default(),
            events: Vec::with_capacity(1024),
            free: Vec::new(),
            seq: 0,
        }
    }

    /// Takes the run apart.
    pub fn into_parts(self) -> (T, W) {
        (self.transport, self.workload)
    }

    /// Runs for the configured duration. Fails with [`ClientError::Config`] for no
    /// concurrency and [`ClientError::Transport`] when the transport fails (running out of
    /// local ports included); refused, reset and slow connects are counted, not errors.
    pub fn run(&mut self) -> Result<ClientReport, ClientError> {
        if self.cfg.concurrency == 0 {
            return Err(ClientError::Config("need at least one connection at a time"));
        }
        let start = Instant::now();
        let result = self.drive(start);
        for s in self.slots.drain(..) {
            self.transport.close(s.id);
        }
        self.index.clear();
        let _ = self.transport.flush();
        let mut scratch = std::mem::take(&mut self.events);
        let _ = self.transport.poll(&mut scratch, Some(Duration::ZERO));
        self.events = scratch;
        result?;
        let mut r = std::mem::replace(&mut self.report, ClientReport::empty(self.transport.name(), self.cfg.concurrency));
        r.duration = start.elapsed();
        Ok(r)
    }

    fn opening(&self, now: Instant, start: Instant) -> bool {
        now < start + self.cfg.duration && self.cfg.max_connections.is_none_or(|m| self.report.opened < m)
    }

    fn drive(&mut self, start: Instant) -> Result<(), ClientError> {
        self.open_up_to(self.cfg.concurrency)?;
        let mut stop_at: Option<Instant> = None;
        let mut next_sweep = start + Duration::from_millis(100);
        loop {
            let now = Instant::now();
            if !self.opening(now, start) {
                let until = *stop_at.get_or_insert(now + self.cfg.drain_timeout);
                if self.slots.is_empty() || now >= until {
                    return Ok(());
                }
            }
            self.transport.flush()?;
            self.events.clear();
            self.transport.poll(&mut self.events, Some(Duration::from_millis(10)))?;
            let events = std::mem::take(&mut self.events);
            for ev in &events {
                match *ev {
                    Event::Connected(id) => self.on_connected(id)?,
                    Event::Readable(id) => self.on_readable(id)?,
                    Event::Writable(id) => {
                        if let Some(&i) = self.index.get(&id) {
                            self.flush_slot(i)?;
                        }
                    }
                    Event::Closed(id) => {
                        if let Some(&i) = self.index.get(&id) {
                            // Refused or reset before it was done.
                            if self.slots[i].established {
                                self.report.errors += 1;
                                self.report.lost += 1;
                            } else {
                                self.report.failed_connects += 1;
                            }
                            self.finish(i);
                        }
                    }
                    _ => {}
                }
            }
            self.events = events;
            let now = Instant::now();
            if now >= next_sweep {
                next_sweep = now + Duration::from_millis(100);
                let mut i = 0;
                while i < self.slots.len() {
                    let s = &self.slots[i];
                    if !s.established && now >= s.opened + self.cfg.connect_timeout {
                        self.report.failed_connects += 1;
                        self.finish(i);
                    } else {
                        i += 1;
                    }
                }
            }
            if self.opening(Instant::now(), start) {
                match self.cfg.pattern {
                    ChurnPattern::Churn => self.open_up_to(self.cfg.concurrency)?,
                    ChurnPattern::Storm if self.slots.is_empty() => self.open_up_to(self.cfg.concurrency)?,
                    ChurnPattern::Storm => {}
                }
            }
        }
    }

    fn open_up_to(&mut self, n: usize) -> Result<(), ClientError> {
        let budget = self.cfg.max_connections.map_or(u64::MAX, |m| m.saturating_sub(self.report.opened));
        let n = n.min(self.slots.len().saturating_add(budget.min(usize::MAX as u64) as usize));
        while self.slots.len() < n {
            let opened = Instant::now();
            let id = self.transport.connect_ip(self.cfg.addr)?;
            self.report.opened += 1;
            self.index.insert(id, self.slots.len());
            let n = self.free.pop().unwrap_or(self.slots.len());
            self.slots.push(Slot {
                id,
                n,
                opened,
                established: false,
                req: BytesMut::with_capacity(INITIAL_BUF),
                wbuf: BytesMut::with_capacity(INITIAL_BUF),
                rbuf: BytesMut::with_capacity(INITIAL_BUF),
            });
        }
        Ok(())
    }

    fn on_connected(&mut self, id: ConnId) -> Result<(), ClientError> {
        let Some(&i) = self.index.get(&id) else { return Ok(()) };
        let s = &mut self.slots[i];
        s.established = true;
        self.report.setup.saturating_record(s.opened.elapsed().as_nanos() as u64);
        self.workload.next_request(s.n, self.seq, &mut s.req);
        self.seq += 1;
        let mut codec = self.codec.clone();
        codec.encode(&s.req, &mut s.wbuf);
        self.flush_slot(i)
    }

    fn flush_slot(&mut self, i: usize) -> Result<(), ClientError> {
        let s = &mut self.slots[i];
        while !s.wbuf.is_empty() {
            match self.transport.send(s.id, &s.wbuf) {
                Ok(0) => break,
                Ok(n) => {
                    self.report.bytes_sent += n as u64;
                    s.wbuf.advance(n);
                }
                Err(_) => {
                    self.report.errors += 1;
                    self.report.lost += 1;
                    self.finish(i);
                    break;
                }
            }
        }
        Ok(())
    }

    fn on_readable(&mut self, id: ConnId) -> Result<(), ClientError> {
        let Some(&i) = self.index.get(&id) else { return Ok(()) };
        let s = &mut self.slots[i];
        loop {
            match self.transport.recv(s.id, &mut s.rbuf) {
                Ok(0) => break,
                Ok(n) => self.report.bytes_received += n as u64,
                Err(_) => {
                    self.report.errors += 1;
                    self.finish(i);
                    return Ok(());
                }
            }
        }
        let mut codec = self.codec.clone();
        let decoded = match self.workload.response_len(&s.req) {
            Some(len) => codec.decode_exact(&mut s.rbuf, len),
            None => codec.decode(&mut s.rbuf),
        };
        match decoded {
            Ok(None) => {}
            Ok(Some(resp)) => {
                if !self.workload.check(s.n, &s.req, &resp) || !s.rbuf.is_empty() {
                    self.report.errors += 1;
                }
                self.report.requests += 1;
                self.report.latency.saturating_record(s.opened.elapsed().as_nanos() as u64);
                self.finish(i);
            }
            Err(_) => {
                self.report.errors += 1;
                self.finish(i);
            }
        }
        Ok(())
    }

    /// Closes slot `i`'s connection and forgets it.
    fn finish(&mut self, i: usize) {
        let s = self.slots.swap_remove(i);
        self.index.remove(&s.id);
        if let Some(moved) = self.slots.get(i) {
            self.index.insert(moved.id, i);
        }
        self.transport.close(s.id);
        self.free.push(s.n);
    }
}
