//! The connection API: listen, connect, recv, send, close.

use std::net::{IpAddr, SocketAddr, SocketAddrV4};

use bytes::BytesMut;
use smoltcp::iface::SocketHandle;
use smoltcp::socket::tcp;
use smoltcp::time::Instant;
use smoltcp::wire::IpEndpoint;

use super::bucket::Conn;
use super::egress::wants_acks_now;
use super::link::SmolDev;
use super::{Engine, Link};
use crate::conn::{ConnId, Event, ListenerId, TransportError};
use crate::demux::bucket_of;

impl Engine {
    /// Listens on `port` (0: one of the ephemeral range): listening sockets in every bucket.
    pub fn listen(&mut self, port: u16) -> Result<ListenerId, TransportError> {
        let port = if port == 0 { self.ports.alloc().ok_or_else(|| TransportError::Exhausted("ephemeral ports"))? } else { port };
        if self.listeners.contains(&Some(port)) {
            return Err(TransportError::AddrInUse(port));
        }
        let lid = ListenerId(self.listeners.len() as u32);
        let per_bucket = self.cfg.tcp.listeners_per_bucket();
        for b in 0..self.buckets.len() {
            for _ in 0..per_bucket {
                let mut s = self.new_socket();
                s.listen(port).map_err(|e| TransportError::Backend { backend: "xsk", source: Box::new(e) })?;
                let h = self.buckets[b].listen.add(s);
                self.buckets[b].listeners.push((h, lid));
            }
        }
        self.listeners.push(Some(port));
        self.ports.set_listening(port);
        Ok(lid)
    }

    /// Stops listening on `lid`'s port: its listening sockets go, and a SYN to the port is
    /// then answered with a RST (no socket). Half-open and established connections stay.
    /// A no-op for an unknown or closed listener.
    pub fn unlisten(&mut self, lid: ListenerId) {
        let Some(Some(port)) = self.listeners.get(lid.0 as usize).copied() else { return };
        self.listeners[lid.0 as usize] = None;
        self.ports.stop_listening(port);
        for b in 0..self.buckets.len() {
            let mut k = 0;
            while k < self.buckets[b].listeners.len() {
                let (h, l) = self.buckets[b].listeners[k];
                if l != lid {
                    k += 1;
                    continue;
                }
                self.buckets[b].listeners.swap_remove(k);
                let s = Self::take_socket(&mut self.buckets[b].listen, h);
                self.recycle(s);
            }
        }
    }

    /// Opens a connection from an ephemeral port; `usable` may veto a port
    /// (the driver's claim on it in the kernel failed), up to a few tries. To an IPv6
    /// address only when the engine has one (`EngineSetup::addr6`).
    pub fn connect(&mut self, addr: impl Into<SocketAddr>, usable: &mut dyn FnMut(u16) -> bool) -> Result<ConnId, TransportError> {
        let addr: SocketAddr = addr.into();
        let local: IpAddr = match addr {
            SocketAddr::V4(_) => self.cfg.addr.into(),
            SocketAddr::V6(_) => match self.cfg.addr6 {
                Some(a) => a.into(),
                None => return Err(TransportError::InvalidInput("an IPv6 peer, but the stack has no IPv6 address")),
            },
        };
        let mut lport = None;
        for _ in 0..16 {
            let p = self.ports.alloc().ok_or_else(|| TransportError::Exhausted("ephemeral ports"))?;
            if usable(p) {
                lport = Some(p);
                break;
            }
            // Leave it marked in use: the kernel has it.
        }
        let lport = lport.ok_or_else(|| TransportError::Exhausted("ephemeral ports the kernel does not use"))?;
        let b = bucket_of(addr.ip(), addr.port(), lport, self.buckets.len());
        let mut s = self.new_socket();
        self.seed_ack_delay(&mut s, addr.ip());
        let remote = IpEndpoint::new(addr.ip().into(), addr.port());
        if let Err(e) = s.connect(self.iface.context(), remote, (smoltcp::wire::IpAddress::from(local), lport)) {
            self.ports.release(lport);
            self.recycle(s);
            return Err(TransportError::Backend { backend: "xsk", source: Box::new(e) });
        }
        let h = self.buckets[b].add(s);
        let conn = Conn {
            bucket: b as u32,
            handle: h,
            connected: false,
            want_read: true,
            blocked: false,
            closed_reported: false,
            local_port: lport,
            active: self.clock,
            unacked: 0,
            unacked_since: self.clock,
            acks_gen: self.peer_memory.generation().wrapping_sub(1),
            slow_peer: false,
        };
        let id = match self.conns.insert(conn) {
            Ok(id) => id,
            Err(e) => {
                let s = self.buckets[b].take(h);
                self.recycle(s);
                self.ports.release(lport);
                return Err(e);
            }
        };
        self.buckets[b].members.push(id);
        self.mark_dirty(b as u32);
        Ok(id)
    }

    /// Moves everything `conn` has received into `buf` (it drains: `Readable` is re-armed);
    /// `Ok(0)` at EOF or after a reset, with `Closed` queued.
    pub fn recv(&mut self, conn: ConnId, buf: &mut BytesMut) -> Result<usize, TransportError> {
        let c = self.conns.get(conn).ok_or_else(|| TransportError::UnknownConn(conn))?;
        let (b, h) = (c.bucket, c.handle);
        let s = self.buckets[b as usize].sockets.get_mut::<tcp::Socket>(h);
        let mut total = 0;
        while s.can_recv() {
            match s.recv(|data| {
                buf.extend_from_slice(data);
                (data.len(), data.len())
            }) {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
        // Half the buffer or more in one read: the peer sends faster than the buffer (and
        // the window it allows) can hold between reads.
        let cap = s.recv_capacity();
        if total * 2 >= cap && cap < self.cfg.tcp.rx_buffer {
            let _ = s.grow_rx_buffer(tcp::SocketBuffer::new(vec![0u8; grown(cap, 0, self.cfg.tcp.rx_buffer)]));
        }
        let may_recv = s.may_recv();
        let eof = !may_recv && !s.can_recv();
        let c = self.conns.get_mut(conn).expect("checked above");
        // The buffer is empty now, whatever was read: `Readable` is re-armed (`recv_drains`).
        c.want_read = true;
        if total == 0 {
            if eof && !c.closed_reported {
                c.closed_reported = true;
                self.stats.closed += 1;
                self.pending.push(Event::Closed(conn));
            }
        } else {
            c.active = self.clock;
            // The window opened: let egress send an update if smoltcp wants to. After
            // the peer's FIN the scan after it reports the end (`Readable`, then a
            // `recv` of 0).
            if !may_recv {
                self.mark_dirty(b);
            } else {
                self.mark_dirty_app(b);
            }
        }
        Ok(total)
    }

    /// Queues what fits of `data` in `conn`'s send buffer (growing it up to `tx_buffer`);
    /// it goes out at the next `egress`. Short: `Writable` follows when there is room.
    pub fn send(&mut self, conn: ConnId, data: &[u8]) -> Result<usize, TransportError> {
        self.queue(conn, data).map(|q| q.n)
    }

    /// [`send`](Self::send), and what `send_now` needs next: whether the send buffer was
    /// empty before (nothing in flight or waiting), and where the socket is.
    fn queue(&mut self, conn: ConnId, data: &[u8]) -> Result<Queued, TransportError> {
        let c = self.conns.get(conn).ok_or_else(|| TransportError::UnknownConn(conn))?;
        let (b, h, connected, acks_gen, slow) = (c.bucket, c.handle, c.connected, c.acks_gen, c.slow_peer);
        let s = self.buckets[b as usize].sockets.get_mut::<tcp::Socket>(h);
        if !s.may_send() {
            return match s.state() {
                tcp::State::SynSent | tcp::State::SynReceived => Ok(Queued { n: 0, was_empty: false, bucket: b, handle: h }),
                _ if !connected => Ok(Queued { n: 0, was_empty: false, bucket: b, handle: h }),
                _ => Err(TransportError::ConnectionClosed(conn)),
            };
        }
        let was_empty = s.send_queue() == 0;
        // The verdict first: a connection whose peer it shows holding its ACKs (its
        // first send, or the pool's lesson since) takes the pooled RTT and the peer's
        // wait now, not at its next send.
        let (acks_gen, slow) = Self::share_ack_delay(&mut self.peer_memory, &self.cfg, &mut self.stats, s, (acks_gen, slow), self.clock);
        if self.cfg.tcp.recovery.timestamps || slow {
            Self::share_rtt(&mut self.peer_memory, s, self.clock);
        }
        let mut n = s.send_slice(data).map_err(|_| TransportError::ConnectionClosed(conn))?;
        let cap = s.send_capacity();
        if n < data.len() && cap < self.cfg.tcp.tx_buffer {
            let want = s.send_queue() + data.len() - n;
            if s.grow_tx_buffer(tcp::SocketBuffer::new(vec![0u8; grown(cap, want, self.cfg.tcp.tx_buffer)])).is_ok() {
                n += s.send_slice(&data[n..]).map_err(|_| TransportError::ConnectionClosed(conn))?;
            }
        }
        let c = self.conns.get_mut(conn).expect("checked above");
        (c.acks_gen, c.slow_peer) = (acks_gen, slow);
        if n < data.len() {
            c.blocked = true;
        }
        if n > 0 {
            c.active = self.clock;
            // Still blocked from an earlier short send: the scan after egress may
            // report `Writable`.
            if c.blocked {
                self.mark_dirty(b);
            } else {
                self.mark_dirty_app(b);
            }
        }
        Ok(Queued { n, was_empty, bucket: b, handle: h })
    }

    /// [`send`](Self::send), and when the send buffer was empty (nothing in flight) and
    /// the socket is its bucket's only one, that bucket's egress now rather than at the
    /// next `egress`: the answer is on the TX ring when the application writes it, as a
    /// kernel sends a write to an idle connection at once. (Not when the bucket holds
    /// other sockets: an early egress would send their ACKs before their answers are
    /// written; nor before a scan the bucket waits for, which reports first.) What is
    /// written while data is in flight waits for the `egress` at `flush`, which sends it
    /// in as few segments as its bytes need.
    ///
    /// With the fast path, an answer that fits one segment goes out by smoltcp's
    /// `Interface::send_now`, and the bucket is taken off the dirty list with the
    /// deadline and ACK tracking its egress would have left.
    ///
    /// `clock` is asked for the time only when the egress runs here (a driver's clock
    /// read is a vDSO call; a write that only queues needs none).
    pub fn send_now<L: Link>(&mut self, conn: ConnId, data: &[u8], link: &mut L, clock: impl FnOnce() -> Instant) -> Result<usize, TransportError> {
        let Queued { n, was_empty, bucket: b, handle: h } = self.queue(conn, data)?;
        if n == 0 || !was_empty {
            return Ok(n);
        }
        let b = b as usize;
        let bucket = &self.buckets[b];
        if bucket.len != 1 || bucket.unscanned || !link.tx_ready() {
            return Ok(n);
        }
        let now = clock();
        self.clock = now;
        if !(self.cfg.tcp.fast_path && self.sent_alone(now, b, h, link)) {
            self.egress_bucket(now, b, link, &mut 0);
        }
        // Off the dirty list when it is the last entry (at light load it is). With a
        // batch of requests from several connections the earlier answers' buckets are
        // further up: they stay listed, no longer dirty, and `wants_egress` drops them
        // once per flush (searching the list here would cost each answer the batch).
        if !self.buckets[b].dirty && self.dirty.last() == Some(&(b as u32)) {
            self.dirty.pop();
        }
        Ok(n)
    }

    /// `send_now`'s fast way: true when the answer went out and the bucket was left as
    /// its egress would leave it.
    fn sent_alone<L: Link>(&mut self, now: Instant, b: usize, h: SocketHandle, link: &mut L) -> bool {
        let bucket = &mut self.buckets[b];
        let mut dev = SmolDev { rx: None, link };
        let Some(at) = self.iface.send_now(now, &mut dev, &mut bucket.sockets, h) else {
            return false;
        };
        bucket.fast_sent += 1;
        debug_assert_eq!(at, self.iface.poll_at(now, &bucket.sockets));
        bucket.dirty = false;
        Self::set_deadline(bucket, b, &mut self.timers, at);
        let wants = self.track_acks && wants_acks_now(bucket.sockets.get::<tcp::Socket>(h));
        Self::set_wants_acks(bucket, &mut self.buckets_wanting_acks, wants);
        self.sent_now += 1;
        true
    }

    /// Half-close: smoltcp's `close` is one (FIN after the queued data, receiving goes on);
    /// the connection stays the application's until `close`.
    pub fn shutdown_write(&mut self, conn: ConnId) -> Result<(), TransportError> {
        let c = self.conns.get(conn).ok_or_else(|| TransportError::UnknownConn(conn))?;
        let b = c.bucket;
        self.buckets[b as usize].sockets.get_mut::<tcp::Socket>(c.handle).close();
        self.mark_dirty(b);
        Ok(())
    }

    /// Sockets the application closed that are not finished yet.
    pub fn closing(&self) -> usize {
        self.closing
    }

    /// Events gathered outside a poll (a `recv` that found EOF) wait to be taken.
    pub fn has_events(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Closes `conn` gracefully (what was queued, then FIN) and frees its id at once.
    pub fn close(&mut self, conn: ConnId) {
        let Some(c) = self.conns.remove(conn) else { return };
        let b = c.bucket as usize;
        let bucket = &mut self.buckets[b];
        Self::remember_ack_delay(&mut self.peer_memory, &self.cfg, bucket.sockets.get::<tcp::Socket>(c.handle));
        if let Some(i) = bucket.members.iter().position(|m| *m == conn) {
            bucket.members.swap_remove(i);
        }
        bucket.sockets.get_mut::<tcp::Socket>(c.handle).close();
        bucket.closing.push((c.handle, c.local_port, self.clock));
        self.closing += 1;
        self.mark_dirty(b as u32);
    }

    /// A listener's IPv4 address (it takes IPv6 connections too, on our IPv6 address and
    /// the same port, when the engine has one).
    pub fn local_addr(&self, listener: ListenerId) -> Option<SocketAddrV4> {
        self.listeners.get(listener.0 as usize).copied().flatten().map(|p| SocketAddrV4::new(self.cfg.addr, p))
    }

    /// A connection's peer, if it is an IPv4 one ([`peer_socket_addr`](Self::peer_socket_addr)
    /// for either family).
    pub fn peer_addr(&self, conn: ConnId) -> Option<SocketAddrV4> {
        match self.peer_socket_addr(conn)? {
            SocketAddr::V4(a) => Some(a),
            SocketAddr::V6(_) => None,
        }
    }

    /// A connection's peer, IPv4 or IPv6.
    pub fn peer_socket_addr(&self, conn: ConnId) -> Option<SocketAddr> {
        let c = self.conns.get(conn)?;
        let s = self.buckets[c.bucket as usize].sockets.get::<tcp::Socket>(c.handle);
        s.remote_endpoint().map(SocketAddr::from)
    }
}

/// What [`Engine::queue`] took of a write, and where the connection's socket is.
struct Queued {
    n: usize,
    was_empty: bool,
    bucket: u32,
    handle: SocketHandle,
}

/// The next size of a buffer of `cap` bytes that was too small: four times, or enough for
/// `want` bytes, at most `max`.
fn grown(cap: usize, want: usize, max: usize) -> usize {
    cap.saturating_mul(4).max(want.next_power_of_two()).min(max)
}
