//! How sockets are born, promoted, timed out and recycled.

use smoltcp::iface::{SocketHandle, SocketSet};
use smoltcp::socket::tcp;
use smoltcp::time::Instant;

use smoltcp::phy::TxToken;
use smoltcp::wire::{IpEndpoint, TcpSeqNumber};

use super::cookies::{self, CookieTemplate, SynAck, SynCookies};
use super::{Conn, Engine, Link};
use crate::conn::{Event, ListenerId};
use super::Congestion;
use crate::drops::DropReason;

impl Engine {
    /// What a socket's receive and send buffers start at.
    pub(super) fn initial_buffers(&self) -> (usize, usize) {
        self.cfg.tcp.initial_buffers()
    }

    pub(super) fn new_socket(&mut self) -> tcp::Socket<'static> {
        if let Some(mut s) = self.pool.pop() {
            // The one setting that may change while the engine runs (`set_ack_delay`).
            s.set_ack_delay(self.cfg.tcp.ack_delay.map(Into::into));
            return s;
        }
        let (rx, tx) = self.initial_buffers();
        let mut s = tcp::Socket::new(tcp::SocketBuffer::new(vec![0u8; rx]), tcp::SocketBuffer::new(vec![0u8; tx]));
        // The window scale covers the largest the receive buffer grows to.
        s.set_rx_capacity_max(self.cfg.tcp.rx_buffer);
        // Request/response defaults: no Nagle (a response goes out at once),
        // and no delayed ACK unless asked for (`EngineConfig::ack_delay`): in the
        // stack's own loop the ACK rides on the response anyway, and a lone
        // request segment is never held back.
        s.set_nagle_enabled(false);
        s.set_ack_delay(self.cfg.tcp.ack_delay.map(Into::into));
        // With a delay: a sender whose window holds one segment waits for its ACK (smoltcp has
        // no quick-ACK mode), so a full segment is acknowledged at once.
        s.set_ack_full_segment(true);
        // Linux's initial window (RFC 6928), not smoltcp's 2,048 octets: an answer of up to
        // 10 segments leaves in a new connection's first flight.
        s.set_rfc6928_initial_window(true);
        // Without Nagle, a congestion window counted in octets sends the few octets each ACK
        // grows it by as a segment of its own; Linux counts it in segments, and so do we.
        s.set_cwnd_segments(true);
        s.set_keep_alive(self.cfg.tcp.keepalive.map(Into::into));
        // smoltcp's timeout also aborts a connection whose peer merely sent
        // nothing for that long (checked whenever the socket is polled, which
        // a busy bucket does often): an idle connection would die after 60 s,
        // which kernel TCP never does. With keep-alive the peer answers, so
        // smoltcp's semantics are right; without it the sweep below applies
        // the timeout to what it is meant for.
        s.set_timeout(self.cfg.tcp.keepalive.and(self.cfg.tcp.timeout).map(Into::into));
        s.set_congestion_control(match self.cfg.tcp.congestion {
            Congestion::None => tcp::CongestionControl::None,
            Congestion::Reno => tcp::CongestionControl::Reno,
            Congestion::Cubic => tcp::CongestionControl::Cubic,
        });
        // Kept by smoltcp across reuse, so pooled sockets have them too.
        s.set_rto_config(self.cfg.tcp.recovery.rto_config());
        s.set_tail_loss_probe(self.cfg.tcp.recovery.tail_loss_probe());
        s.set_timestamps_micros(self.cfg.tcp.recovery.timestamps);
        s.set_sack_recovery(self.cfg.tcp.recovery.sack);
        s.set_frto(self.cfg.tcp.recovery.frto);
        s.set_rto_after_probe(self.cfg.tcp.recovery.rto_after_probe().into());
        s
    }

    pub(super) fn recycle(&mut self, mut s: tcp::Socket<'static>) {
        Self::remember_ack_delay(&mut self.peer_memory, &self.cfg, &s);
        self.stats.recovery.add(s.take_recovery_stats());
        s.abort();
        self.stats.recycled += 1;
        // Spare sockets for the next burst, as many as the connection limit, only at their
        // initial size: a grown one is freed (the pool holds little memory).
        let small = (s.recv_capacity(), s.send_capacity()) == self.initial_buffers();
        if small && self.pool.len() < self.cfg.tcp.pool_max() {
            self.pool.push(s);
        }
    }

    pub(super) fn take_socket(set: &mut SocketSet<'static>, h: SocketHandle) -> tcp::Socket<'static> {
        match set.remove(h) {
            smoltcp::socket::Socket::Tcp(t) => t,
            #[allow(unreachable_patterns)]
            _ => unreachable!("only TCP sockets are added"),
        }
    }

    /// See [`EngineConfig::half_open_limit`](super::EngineConfig::half_open_limit).
    pub(super) fn half_open_limit(&self) -> usize {
        self.cfg.tcp.half_open_limit()
    }

    /// Listeners that got a SYN become half-open connections and a fresh listener takes
    /// their place at once, so a burst of SYNs into one bucket finds a
    /// listener for each (smoltcp has no accept queue). Called after every
    /// ingress; it only looks at the bucket's few listeners.
    pub(super) fn replenish_listeners(&mut self, b: usize) {
        let mut k = 0;
        while k < self.buckets[b].listeners.len() {
            let (h, lid) = self.buckets[b].listeners[k];
            if self.buckets[b].listen.get::<tcp::Socket>(h).state() == tcp::State::Listen {
                k += 1;
                continue;
            }
            self.buckets[b].listeners.swap_remove(k);
            // It took a SYN: it is a half-open connection now, and moves to
            // the connections' set (a move of the socket, buffers and all).
            let s = Self::take_socket(&mut self.buckets[b].listen, h);
            let h = self.buckets[b].add(s);
            // Past the limit the oldest half-open connection of this bucket
            // makes room, as the kernel drops from a full SYN queue; where
            // the bucket has none, the new one is refused. Either way the
            // count never passes the limit.
            let mut admit = true;
            if self.half_open >= self.half_open_limit() {
                if self.buckets[b].half_open.is_empty() {
                    admit = false;
                } else {
                    let (old, _, _) = self.buckets[b].half_open.remove(0);
                    self.half_open -= 1;
                    self.buckets[b].sockets.get_mut::<tcp::Socket>(old).abort();
                    let s = self.buckets[b].take(old);
                    self.recycle(s);
                }
                self.stats.drops.count(DropReason::SynBacklog);
            }
            if admit {
                self.half_open += 1;
                self.buckets[b].half_open.push((h, lid, self.clock));
            } else {
                let mut s = self.buckets[b].take(h);
                s.abort();
                self.recycle(s);
            }
            if let Some(Some(port)) = self.listeners.get(lid.0 as usize) {
                let port = *port;
                let mut s = self.new_socket();
                if s.listen(port).is_ok() {
                    let nh = self.buckets[b].listen.add(s);
                    self.buckets[b].listeners.push((nh, lid));
                }
            }
        }
    }

    /// Reports what changed in bucket `b`: accepts, connects, data, room, closes.
    pub(super) fn scan(&mut self, b: usize) {
        self.buckets[b].unscanned = false;
        if !self.buckets[b].half_open.is_empty() {
            self.scan_half_open(b);
        }
        self.scan_members(b);
    }

    /// Half-open connections of bucket `b` that were accepted (reported) or failed.
    /// Out of line: a request/response exchange finds none, and inlined this loop made
    /// every scan save and restore a large frame.
    #[inline(never)]
    fn scan_half_open(&mut self, b: usize) {
        let now = self.clock;
        let mut k = 0;
        while k < self.buckets[b].half_open.len() {
            let (h, lid, _) = self.buckets[b].half_open[k];
            match self.buckets[b].sockets.get::<tcp::Socket>(h).state() {
                tcp::State::SynReceived => k += 1,
                tcp::State::Closed | tcp::State::Listen | tcp::State::TimeWait => {
                    self.buckets[b].half_open.swap_remove(k);
                    self.half_open -= 1;
                    let s = self.buckets[b].take(h);
                    self.recycle(s);
                }
                _ => {
                    self.buckets[b].half_open.swap_remove(k);
                    self.half_open -= 1;
                    if let Some(remote) = self.buckets[b].sockets.get::<tcp::Socket>(h).remote_endpoint() {
                        let known = self.peer_memory.delays_acks(remote.addr.into());
                        Self::apply_ack_delays(&self.cfg, self.buckets[b].sockets.get_mut::<tcp::Socket>(h), known);
                    }
                    if self.conns.len() >= self.cfg.tcp.max_conns {
                        // Half-open ones may outnumber the room left (cookies): refuse.
                        self.buckets[b].sockets.get_mut::<tcp::Socket>(h).abort();
                        let s = self.buckets[b].take(h);
                        self.recycle(s);
                        self.stats.drops.count(DropReason::ConnLimit);
                        continue;
                    }
                    let conn = Conn {
                        bucket: b as u32,
                        handle: h,
                        connected: true,
                        want_read: true,
                        blocked: false,
                        closed_reported: false,
                        local_port: 0,
                        active: now,
                        unacked: 0,
                        unacked_since: now,
                        acks_gen: self.peer_memory.generation().wrapping_sub(1),
                        slow_peer: false,
                    };
                    match self.conns.insert(conn) {
                        Ok(id) => {
                            self.buckets[b].members.push(id);
                            self.pending.push(Event::Accepted { listener: lid, conn: id });
                            self.stats.accepted += 1;
                        }
                        Err(_) => {
                            // Out of ids: refuse the connection rather than leak it.
                            self.buckets[b].sockets.get_mut::<tcp::Socket>(h).abort();
                            let s = self.buckets[b].take(h);
                            self.recycle(s);
                            self.stats.drops.count(DropReason::ConnLimit);
                        }
                    }
                }
            }
        }
    }

    /// The connections of bucket `b`: connects, data, room, closes.
    fn scan_members(&mut self, b: usize) {
        let bucket = &mut self.buckets[b];
        for &id in &bucket.members {
            let Some(c) = self.conns.get_mut(id) else { continue };
            let s = bucket.sockets.get::<tcp::Socket>(c.handle);
            let state = s.state();
            if !c.connected {
                match state {
                    tcp::State::SynSent | tcp::State::SynReceived => continue,
                    tcp::State::Closed | tcp::State::TimeWait => {
                        // Connect failed (RST or timeout).
                        if !c.closed_reported {
                            c.closed_reported = true;
                            self.pending.push(Event::Closed(id));
                        }
                        continue;
                    }
                    _ => {
                        c.connected = true;
                        self.stats.connected += 1;
                        self.pending.push(Event::Connected(id));
                    }
                }
            }
            let readable = s.can_recv() || !s.may_recv();
            if c.want_read && readable && !c.closed_reported {
                c.want_read = false;
                self.pending.push(Event::Readable(id));
            }
            if c.blocked && (s.send_capacity() > s.send_queue() || !s.may_send()) {
                c.blocked = false;
                self.pending.push(Event::Writable(id));
            }
            if !c.closed_reported && !s.may_recv() && !s.can_recv() && c.want_read {
                c.closed_reported = true;
                self.stats.closed += 1;
                self.pending.push(Event::Closed(id));
            }
        }
    }

    /// Sockets the application closed: recycled once the exchange is over.
    /// Called after egress, so a socket that entered TIME-WAIT has sent its
    /// final ACK.
    /// True if it took any socket out of the bucket.
    pub(super) fn reap_closing(&mut self, b: usize) -> bool {
        let before = self.buckets[b].closing.len();
        let mut k = 0;
        while k < self.buckets[b].closing.len() {
            let (h, lport, _) = self.buckets[b].closing[k];
            let state = self.buckets[b].sockets.get::<tcp::Socket>(h).state();
            if matches!(state, tcp::State::Closed | tcp::State::TimeWait) {
                // TIME-WAIT is not kept: the 4-tuple's next use gets a fresh
                // random ISN from smoltcp, and keeping thousands of sockets
                // (with their buffers) under churn is the leak the stack must
                // not have.
                self.buckets[b].closing.swap_remove(k);
                self.closing -= 1;
                let s = self.buckets[b].take(h);
                self.recycle(s);
                self.ports.release(lport);
            } else {
                k += 1;
            }
        }
        self.buckets[b].closing.len() < before
    }

    pub(super) fn needs_sweep(&self) -> bool {
        let timers = self.cfg.tcp.idle_timeout.is_some() || self.cfg.tcp.timeout.is_some();
        (timers && (!self.conns.is_empty() || self.half_open > 0)) || self.closing > 0
    }

    /// Idle connections and closes the peer never finishes: both would hold
    /// a socket (and its buffers) for as long as a peer likes.
    pub(super) fn sweep(&mut self, now: Instant) {
        let idle: Option<smoltcp::time::Duration> = self.cfg.tcp.idle_timeout.map(Into::into);
        let stall: Option<smoltcp::time::Duration> =
            if self.cfg.tcp.keepalive.is_none() { self.cfg.tcp.timeout.map(Into::into) } else { None };
        let mut expired = Vec::new();
        for (id, c) in self.conns.iter_mut() {
            if c.closed_reported {
                continue;
            }
            let s = self.buckets[c.bucket as usize].sockets.get::<tcp::Socket>(c.handle);
            let q = s.send_queue();
            if q == 0 || q < c.unacked {
                c.unacked_since = now;
            }
            c.unacked = q;
            let stalled = stall.is_some_and(|t| {
                if c.connected { q > 0 && now >= c.unacked_since + t } else { now >= c.active + t }
            });
            let idle = idle.is_some_and(|t| c.connected && now >= c.active + t);
            if stalled || idle {
                expired.push((id, idle && !stalled));
            }
        }
        for (id, idle) in expired {
            let c = self.conns.get_mut(id).expect("listed above");
            c.closed_reported = true;
            let (b, h) = (c.bucket, c.handle);
            self.buckets[b as usize].sockets.get_mut::<tcp::Socket>(h).abort();
            if idle {
                self.stats.idle_closed += 1;
            } else {
                self.stats.timed_out += 1;
            }
            self.stats.closed += 1;
            self.pending.push(Event::Closed(id));
            self.mark_dirty(b);
        }
        // Half-open connections that never complete.
        if let Some(t) = stall {
            for b in 0..self.buckets.len() {
                let bucket = &mut self.buckets[b];
                let mut aborted = false;
                for &(h, _, since) in &bucket.half_open {
                    if now >= since + t {
                        bucket.sockets.get_mut::<tcp::Socket>(h).abort();
                        aborted = true;
                    }
                }
                if aborted {
                    self.mark_dirty(b as u32);
                }
            }
        }
        let fin: smoltcp::time::Duration = self.cfg.tcp.fin_timeout.into();
        for b in 0..self.buckets.len() {
            let mut aborted = false;
            let bucket = &mut self.buckets[b];
            for &(h, _, since) in &bucket.closing {
                if now >= since + fin {
                    bucket.sockets.get_mut::<tcp::Socket>(h).abort();
                    self.stats.fin_timeouts += 1;
                    aborted = true;
                }
            }
            if aborted {
                self.mark_dirty(b as u32);
            }
        }
    }

    /// Whether a SYN for a listener gets a cookie instead of a socket.
    pub(super) fn wants_cookie(&self) -> bool {
        match self.cfg.tcp.syn_cookies {
            SynCookies::Off => false,
            SynCookies::Always => true,
            SynCookies::Auto => self.half_open >= self.half_open_limit(),
        }
    }

    /// What the engine's cookie SYN-ACKs say over a link of `mtu`, and the key.
    pub fn cookie_template(&self, mtu: usize) -> CookieTemplate {
        let (k0, k1) = self.cookie_codec.key();
        CookieTemplate {
            k0,
            k1,
            // As smoltcp's SYN-ACK (RFC 6691).
            mss: mtu.saturating_sub(40).min(u16::MAX as usize) as u16,
            // A fresh socket's receive buffer, as smoltcp's SYN-ACK would say.
            window: self.initial_buffers().0.min(u16::MAX as usize) as u16,
            window_shift: window_shift(self.cfg.tcp.rx_buffer),
            mac: self.rules.mac,
            addr: self.rules.addr,
            prefix_len: self.rules.prefix_len,
            accept_partial: self.rules.accept_partial,
            addr6: self.rules.addr6,
        }
    }

    /// Whether SYNs to listening ports are to be answered with cookies
    /// before they reach the engine (by the steering program, which has made
    /// `answered` such answers so far): with `Always`, yes; with `Auto`, from
    /// when the engine would answer them with cookies itself (the half-open
    /// table is full) until a second in which fewer SYNs came than an eighth
    /// of that table (the flood is over; if not, the table fills again and
    /// this turns on again). Meanwhile ACKs that match no connection are
    /// checked for cookies. Cheap: call it once per pass.
    pub fn steering_answers_syns(&mut self, now: Instant, answered: u64) -> bool {
        let on = match self.cfg.tcp.syn_cookies {
            SynCookies::Off => false,
            SynCookies::Always => true,
            SynCookies::Auto if !self.steering_cookies.on => self.wants_cookie(),
            SynCookies::Auto => match self.steering_cookies.checked {
                Some((at, n)) if now >= at + smoltcp::time::Duration::from_secs(1) => {
                    self.steering_cookies.checked = Some((now, answered));
                    answered.wrapping_sub(n) >= (self.half_open_limit() / 8).max(1) as u64
                }
                _ => true,
            },
        };
        if on && !self.steering_cookies.on {
            self.steering_cookies.checked = Some((now, answered));
        }
        self.steering_cookies.on = on;
        if on {
            self.cookies_until = now + smoltcp::time::Duration::from_secs(128);
        }
        on
    }

    /// Answers the SYN in `frame` with a SYN-ACK whose sequence number is a
    /// cookie, and keeps nothing.
    pub(super) fn send_cookie<L: Link>(&mut self, now: Instant, frame: &[u8], link: &mut L) {
        let Some(syn) = cookies::segment(frame) else { return };
        let mut peer_mac = [0u8; 6];
        peer_mac.copy_from_slice(&frame[6..12]);
        let t = self.cookie_template(link.mtu());
        let answer = SynAck {
            our_mac: self.cfg.mac,
            // The SYN's sender: the peer, or the router it came through.
            peer_mac,
            cookie: self.cookie_codec.make(now, &syn.tuple, syn.seq, syn.opts),
            // The IPv6 header is 20 bytes longer than the template's IPv4 one.
            mss: if syn.tuple.src.is_ipv6() { t.mss.saturating_sub(20) } else { t.mss },
            window: t.window,
            window_shift: t.window_shift,
        };
        let tcp_csum = !link.csum_offload();
        link.tx().consume(SynAck::len(&syn), |buf| answer.write(&syn, buf, tcp_csum));
        self.stats.syn_cookies_sent += 1;
        self.cookies_until = now + smoltcp::time::Duration::from_secs(128);
    }

    /// A segment for a listening port, not a SYN, while cookies are out: if
    /// it matches no connection of bucket `b` and returns a valid cookie, the
    /// half-open connection the cookie encodes is rebuilt there, so the
    /// segment then establishes it (with any data it carries).
    ///
    /// True: drop the segment without an answer. That is a segment with data
    /// whose cookie does not check: the cookie is checked against the peer's
    /// ISN, taken as the segment's sequence number minus one, which only the
    /// first segment after the handshake carries. When that one and the
    /// handshake's ACK are lost (an RX ring overflowing under the very flood
    /// that turned cookies on), a client's later segment (Linux sends its
    /// next write as a tail-loss probe) would fail the check and draw an RST
    /// that kills a connection the client thinks is open; dropped, it waits
    /// for the retransmission of the first segment, which passes. A pure ACK
    /// that fails is answered with RST, as Linux does.
    pub(super) fn take_cookie(&mut self, now: Instant, b: usize, frame: &[u8]) -> bool {
        let Some(seg) = cookies::segment(frame) else { return false };
        if seg.flags & (cookies::SYN | cookies::RST) != 0 || seg.flags & cookies::ACK == 0 {
            return false;
        }
        let t = seg.tuple;
        let (peer_isn, cookie) = (seg.seq.wrapping_sub(1), seg.ack.wrapping_sub(1));
        // A live connection of the same tuple takes the segment, unless it is half-open and
        // the segment returns a cookie (below).
        let found = match self.buckets[b].find_conn(t.src, t.sport, t.dport) {
            None => None,
            Some(h) => match self.buckets[b].half_open.iter().position(|e| e.0 == h) {
                Some(k) if self.buckets[b].sockets.get::<tcp::Socket>(h).state() == tcp::State::SynReceived => {
                    Some((k, h))
                }
                _ => return false,
            },
        };
        let Some(d) = self.cookie_codec.check(now, &t, peer_isn, cookie) else {
            if found.is_none() {
                // Without data smoltcp finds no socket and answers with RST, as Linux does.
                self.stats.drops.count(DropReason::BadCookie);
                return seg.payload_len > 0;
            }
            return false;
        };
        if let Some((k, h)) = found {
            // The peer's SYN came again after the steering program took over the SYNs
            // and got a cookie SYN-ACK, which it answers: the half-open socket (its ISN
            // is not the cookie) goes, silently, and the cookie's connection takes its
            // place.
            self.buckets[b].half_open.swap_remove(k);
            self.half_open -= 1;
            let s = self.buckets[b].take(h);
            self.recycle(s);
        }
        let Some(lid) = self.listeners.iter().position(|p| *p == Some(t.dport)) else { return false };
        // A completed handshake is worth more than a half-open connection of a flood: only
        // established connections refuse it (the half-open table has its own bound).
        if self.conns.len() >= self.cfg.tcp.max_conns {
            self.stats.drops.count(DropReason::ConnLimit);
            return false;
        }
        let mut s = self.new_socket();
        let rebuilt = s.accept_syn_cookie(
            now,
            IpEndpoint::new(t.dst.into(), t.dport),
            IpEndpoint::new(t.src.into(), t.sport),
            TcpSeqNumber(cookie as i32),
            TcpSeqNumber(peer_isn as i32),
            d.mss,
            d.window_scale,
            window_shift(self.cfg.tcp.rx_buffer),
            d.sack,
        );
        if rebuilt.is_err() {
            self.recycle(s);
            return false;
        }
        let h = self.buckets[b].add(s);
        self.buckets[b].half_open.push((h, ListenerId(lid as u32), now));
        self.half_open += 1;
        self.stats.syn_cookies_accepted += 1;
        false
    }
}

/// The window scale smoltcp offers for a receive buffer of `cap` bytes.
fn window_shift(cap: usize) -> u8 {
    ((usize::BITS - cap.leading_zeros()) as u8).saturating_sub(16).min(14)
}
