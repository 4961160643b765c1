//! The driver's loop: frames from the port into the engine, the engine's
//! frames out through the port, sleeping in the port's poll(2) (and a
//! timerfd) in between; and the [`Transport`] calls, which the engine answers.
//!
//! The TX kick rides on the sleep: `flush` and the loop's egress only
//! publish the TX ring, and the poll(2) the loop sleeps in transmits it
//! first (copy mode with need_wakeup). At light load a request then costs
//! one syscall, not a sendto and an epoll_wait, and the peer the answer
//! wakes (veth: on this CPU) runs when this thread sleeps instead of
//! preempting it on its way back from sendto. `poll` never returns with a
//! kick owed: without a sleep it makes a sendto (what the kernel could not
//! take then, `Port::tx_pending`, is retried by the next pass or flush).
//! That policy is the port's (`Port::end_pass`, one call where a pass ends,
//! saying whether the loop sleeps in `Port::wait` next); the driver only
//! says which.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use stack_engine::smoltcp::time::Instant as SmolInstant;
use xsk_io::port::Port;

use super::claims::Claims;
use super::device::Device;
use stack_engine::{Engine, PortChange};
use super::stages::Stages;
use super::{backend_err, StackStats};
use crate::transport::{ConnId, Event, ListenerId, Transport, TransportError};

/// How soon to try again while TX is left in the ring (the kernel's budget)
/// or a neighbour is being resolved.
const RETRY: Duration = Duration::from_micros(200);

/// The AF_XDP stack behind the [`Transport`] trait: one port (one RX queue),
/// one engine, one thread. See the [module docs](super).
pub struct XskTransport {
    /// The port and what wraps it: frames in and out (`device.rs`).
    pub(super) dev: Device,
    pub(super) engine: Engine,
    /// Neighbours the kernel's table resolved (shared-address mode), for the engine.
    pub(super) resolved: Vec<(Ipv4Addr, [u8; 6])>,
    /// The engine's time 0 in CLOCK_MONOTONIC nanoseconds: the loop's
    /// clock (one vDSO call and a division per pass) and the clock the XDP
    /// program dates deferred ACKs with.
    pub(super) epoch_ns: u64,
    /// Shared-address mode: the ports held from the kernel.
    pub(super) claims: Option<Arc<Claims>>,
    /// Ends the port's wait for every timeout (the engine's timers, the caller's), and
    /// carries a [`Waker`](crate::Waker)'s wakes (see [`crate::timer`]).
    pub(super) timer: crate::timer::PreciseTimer,
    /// The XDP program's SYN cookies for this queue (None: off or unavailable).
    pub(super) xdp_cookies: Option<xsk_io::syncookies::CookieSlot>,
    /// Where a request's time goes (`XskConfig::stage_times`; None: off).
    pub(super) stages: Option<Stages>,
    /// `DeviceStats::sleeps`, `DeviceStats::timer_wakes`.
    pub(super) sleeps: u64,
    pub(super) timer_wakes: u64,
}

impl XskTransport {
    /// The stack's IPv4 address.
    pub fn addr(&self) -> Ipv4Addr {
        self.engine.addr()
    }

    /// The AF_XDP port (its features and counters).
    pub fn port(&self) -> &Port {
        &self.dev.port
    }

    /// The signal that ends the transport's sleeps for its timers and wakes
    /// (`XskConfig::sleep_signal`), or None when they end on a timerfd (asked
    /// for, or the signal could not be used).
    pub fn sleep_signal(&self) -> Option<libc::c_int> {
        self.timer.signal()
    }

    /// The counters of the engine, the device and the port.
    pub fn stats(&self) -> StackStats {
        let mut engine = self.engine.stats();
        if let Some(f) = &self.dev.faults {
            engine.drops.injected = f.stats.rx_dropped;
        }
        let mut device = self.dev.stats();
        device.xdp_syn_cookies = self.xdp_cookies.as_ref().map_or(0, |c| c.sent());
        device.sleeps = self.sleeps;
        device.timer_wakes = self.timer_wakes;
        StackStats { engine, device, port: self.dev.port.stats(), stages: self.stages.as_ref().map(|s| s.t) }
    }

    /// Listening sockets waiting for a SYN, over all buckets.
    pub fn listening_sockets(&self) -> usize {
        self.engine.stats().listening
    }

    /// Frame accounting of the underlying port (see `Port::audit`).
    pub fn audit(&mut self) -> Result<xsk_io::port::Accounting, String> {
        self.dev.port.audit()
    }

    fn now(&self) -> SmolInstant {
        self.smol_ns(xsk_io::sys::monotonic_ns())
    }

    /// The engine's clock for a CLOCK_MONOTONIC reading.
    fn smol_ns(&self, ns: u64) -> SmolInstant {
        smol_ns(self.epoch_ns, ns)
    }

    /// The batch `Device::recv` took, and the deferred ACKs between and
    /// after its frames, into the engine (see `Device::deliver`).
    fn ingest(&mut self, now: SmolInstant, drained: bool, wall: u64) {
        let (engine, epoch) = (&mut self.engine, self.epoch_ns);
        self.dev.deliver(drained, wall, &mut |arrived, frame, link| {
            let t = arrived.map_or(now, |at| ack_time(epoch, at, now, engine.clock()));
            let _ = engine.ingest(t, frame, link);
        });
    }

    /// Shared mode: answers smoltcp's ARP wishes from the kernel's table
    /// (see `arp.rs`).
    fn neighbours(&mut self, now: SmolInstant) {
        if self.dev.arp.idle() {
            return; // the common case: nothing asked, nothing pending
        }
        let mut found = std::mem::take(&mut self.resolved);
        self.dev.arp.resolve(std::time::Instant::now(), &mut found);
        for (ip, mac) in found.drain(..) {
            // The gateway is on-link; an off-link peer is never resolved
            // (smoltcp asks for its gateway instead).
            self.engine.add_neighbour(now, ip, mac);
        }
        self.resolved = found;
    }

    fn egress(&mut self, now: SmolInstant) -> Result<(), TransportError> {
        let t0 = self.stages.as_ref().map(|_| Stages::now());
        let r = self.egress_untimed(now);
        if let (Some(s), Some(t0)) = (&mut self.stages, t0) {
            s.egress(t0);
        }
        r
    }

    /// The port's kick policy at the end of a pass (`Port::end_pass`): the
    /// kick this pass owes is made now unless the loop sleeps in the port's
    /// wait next, which makes it. The test is inlined (twice per request;
    /// nearly always nothing to do), the kick is not.
    #[inline]
    fn end_pass(&mut self, sleeps: bool) -> Result<(), TransportError> {
        if sleeps || !self.dev.port.kick_owed() {
            return Ok(());
        }
        self.kick_now()
    }

    /// `end_pass` with a kick owed and no sleep to make it.
    #[inline(never)]
    fn kick_now(&mut self) -> Result<(), TransportError> {
        let t0 = self.stages.as_ref().map(|_| Stages::now());
        let kicked = self.dev.port.end_pass(false).map_err(backend_err)?;
        if let (Some(s), Some(t0), true) = (&mut self.stages, t0, kicked) {
            s.kick(t0);
        }
        Ok(())
    }

    /// The TX ring is given to the kernel now (a sendto), whether a kick is
    /// owed or not: to retry what the kernel left in the ring (its budget).
    fn send_now(&mut self) -> Result<(), TransportError> {
        let t0 = self.stages.as_ref().map(|_| Stages::now());
        let r = self.dev.port.flush().map_err(backend_err);
        if let (Some(s), Some(t0)) = (&mut self.stages, t0) {
            s.kick(t0);
        }
        r
    }

    fn egress_untimed(&mut self, now: SmolInstant) -> Result<(), TransportError> {
        self.engine.egress(now, &mut self.dev.link());
        if let Some(a) = &mut self.dev.acks {
            a.allow(self.engine.acks_can_wait());
        }
        self.release_ports();
        // The kick is left to the wait that follows, or made before poll
        // returns (see `poll`).
        self.dev.port.publish().map_err(backend_err)
    }

    /// Ports of finished connections go back to the kernel.
    fn release_ports(&mut self) {
        if !self.engine.has_port_changes() {
            return; // nearly every egress: no connection finished
        }
        let steer = self.dev.port.steer();
        for PortChange::Released(p) in self.engine.port_changes() {
            if let Some(c) = &self.claims {
                c.release(p, steer);
            }
        }
    }

    /// The loop behind [`Transport::poll`]; the kick it leaves owed is made
    /// by the caller when it returns without sleeping.
    fn poll_events(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> Result<(), TransportError> {
        let start = xsk_io::sys::monotonic_ns();
        let busy = self.dev.port.features().busy_poll.is_some();
        let mut first = true;
        loop {
            // One clock read per pass (a vDSO call each; at light load every
            // request costs two passes).
            let wall = if std::mem::take(&mut first) { start } else { xsk_io::sys::monotonic_ns() };
            let now = self.smol_ns(wall);
            self.neighbours(now);
            let rx_start = self.stages.as_ref().map(|_| Stages::now());
            let n = self.dev.recv();
            let rx_end = match (&mut self.stages, rx_start) {
                (Some(s), Some(t0)) if n > 0 => {
                    let t1 = Stages::now();
                    s.rx(t0, t1);
                    Some(t1)
                }
                _ => None,
            };
            let full = self.dev.batch_full(n);
            if n > 0 || self.dev.may_deliver() {
                self.ingest(now, !full, wall);
            }
            if let Some(c) = &mut self.xdp_cookies {
                let want = self.engine.cookies_ahead(now, c.sent());
                if let Err(why) = c.drive(want, wall) {
                    tracing::warn!("{why}");
                }
            }
            // Report what arrived before transmitting anything: the
            // application's answers then ride on the ACKs (its flush()
            // sends both), instead of a bare ACK going out first.
            self.engine.scan_dirty();
            if self.engine.take_events(events) {
                if let (Some(s), Some(t1)) = (&mut self.stages, rx_end) {
                    s.events(t1);
                }
                return Ok(());
            }
            // Nothing to send, no timer due: the completions and fill ring
            // wait for the next flush (a pass before sleeping, at light load
            // one per request, costs no port work then).
            if self.engine.egress_due(now) || self.dev.port.tx_pending() {
                self.egress(now)?;
                if self.engine.take_events(events) {
                    return Ok(());
                }
            }
            if full {
                // More frames waiting: no sleep, so what this pass queued
                // goes out now.
                self.end_pass(false)?;
                if self.timer.take_wake() {
                    return Ok(());
                }
                continue;
            }
            let elapsed = Duration::from_nanos(wall.saturating_sub(start));
            let left = match timeout {
                Some(t) if elapsed >= t => return Ok(()),
                Some(t) => Some(t - elapsed),
                None => None,
            };
            let wait = self.wait_for(now, left);
            if self.dev.port.tx_pending() || self.dev.arp.has_pending() {
                // TX left in the ring (budget) or a neighbour being resolved: come back soon.
                self.send_now()?;
                let w = wait.map_or(RETRY, |w| w.min(RETRY));
                std::thread::sleep(w);
                // A link that stays down keeps this loop here: a wake must still end it.
                if self.timer.take_wake() {
                    return Ok(());
                }
                continue;
            }
            if busy || wait == Some(Duration::ZERO) {
                // No sleep: what this pass queued goes out now.
                self.end_pass(false)?;
                if busy {
                    std::hint::spin_loop();
                }
                if self.timer.take_wake() {
                    return Ok(());
                }
                continue;
            }
            let wait = match &self.dev.acks {
                Some(a) => a.bound_sleep(wait),
                None => wait,
            };
            // The pass's clock reading stands for now: a wait that ends a
            // pass's length early only loops.
            let wait = self.timer.prepare_at(Some(wall), wait);
            // A wake that came before the timer was armed (which may have
            // replaced its expiry): the caller checks its flags now.
            if self.timer.take_wake() {
                return Ok(());
            }
            // Sleeps and makes the kick owed by this pass's egress (or the
            // application's flush) in one syscall; the timer joins the wait
            // when it has a deadline or a waker may end it (a timerfd in the
            // set, or a signalling timer's signal unblocked for the wait).
            let mask = self.timer.wanted_mask();
            if mask.is_some() {
                self.timer.reset_fired();
            }
            self.sleeps += 1;
            match self.dev.port.wait_masked(self.timer.wanted_fd(), wait, mask) {
                Ok(ready) => {
                    if ready.extra {
                        self.timer_wakes += 1;
                        self.timer.clear();
                        if self.timer.take_wake() {
                            return Ok(());
                        }
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                    if !self.timer.take_fired() {
                        // Another signal: the caller looks at its flags.
                        return Ok(());
                    }
                    self.timer_wakes += 1;
                    self.timer.clear_fired();
                    if self.timer.take_wake() {
                        return Ok(());
                    }
                }
                Err(e) => return Err(TransportError::Io(e)),
            }
        }
    }

    /// How long to sleep: until the engine's next timer or the caller's deadline.
    fn wait_for(&mut self, now: SmolInstant, left: Option<Duration>) -> Option<Duration> {
        let timer = self.engine.poll_at().map(|d| {
            if d <= now {
                Duration::ZERO
            } else {
                Duration::from_micros((d - now).total_micros())
            }
        });
        // The XDP program's SYN-ACKs are checked on a pass of this loop, and the
        // SYNs they answer wake nobody.
        let check = self.xdp_cookies.as_ref().and_then(|c| c.check_due()).map(|at| {
            let now_ns = self.epoch_ns + (now.total_micros().max(0) as u64) * 1000;
            Duration::from_nanos(at.saturating_sub(now_ns))
        });
        min_wait(min_wait(left, timer), check)
    }
}

/// The shorter of two waits (None: no limit).
#[inline]
fn min_wait(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A CLOCK_MONOTONIC reading on the engine's clock, which starts at `epoch`.
fn smol_ns(epoch: u64, ns: u64) -> SmolInstant {
    SmolInstant::from_micros((ns.saturating_sub(epoch) / 1000) as i64)
}

/// When a deferred ACK goes in: when it arrived (its RTT sample must not
/// include its wait in the ring), but not after this pass's `now` (it may
/// have arrived since) nor before what the engine has seen.
fn ack_time(epoch: u64, arrived: u64, now: SmolInstant, seen: SmolInstant) -> SmolInstant {
    smol_ns(epoch, arrived).min(now).max(seen)
}

impl Transport for XskTransport {
    fn listen(&mut self, port: u16) -> Result<ListenerId, TransportError> {
        if port != 0 {
            if let Some(c) = &self.claims {
                c.claim(port, self.dev.port.steer()).map_err(|e| match e.kind() {
                    std::io::ErrorKind::AddrInUse => TransportError::AddrInUse(port),
                    _ => TransportError::Io(e),
                })?;
            }
        }
        let lid = match self.engine.listen(port) {
            Ok(l) => l,
            Err(e) => {
                if let (Some(c), true) = (&self.claims, port != 0) {
                    c.release(port, self.dev.port.steer());
                }
                return Err(e);
            }
        };
        let port = self.engine.local_addr(lid).map(|a| a.port()).unwrap_or(port);
        // Steered (shared mode: claimed above) and marked as listening, so the
        // XDP program may answer its SYNs with cookies.
        if let Some(steer) = self.dev.port.steer() {
            steer.add_tcp_listener(port).map_err(backend_err)?;
        }
        Ok(lid)
    }

    fn unlisten(&mut self, listener: ListenerId) {
        // The port stays steered (shared mode: claimed) until the transport goes: its SYNs
        // reach the engine, which answers them with a RST.
        self.engine.unlisten(listener);
    }

    fn connect(&mut self, addr: SocketAddrV4) -> Result<ConnId, TransportError> {
        let (claims, steer) = (self.claims.as_deref(), self.dev.port.steer());
        let mut usable = |p: u16| claims.is_none_or(|c| c.claim(p, steer).is_ok());
        let id = self.engine.connect(addr, &mut usable)?;
        Ok(id)
    }

    /// Frames queued since the last wait go out before this returns: in its
    /// wait (the port's poll(2) transmits before it sleeps), or with a
    /// sendto when it returns without sleeping.
    fn poll(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> Result<(), TransportError> {
        let r = self.poll_events(events, timeout);
        // Returning is not sleeping: the kick is made now.
        let kicked = self.end_pass(false);
        // The loop's own error, if any, is the one to report.
        r?;
        kicked
    }


    fn waker(&mut self) -> Result<crate::Waker, TransportError> {
        Ok(self.timer.waker())
    }

    fn recv(&mut self, conn: ConnId, buf: &mut BytesMut) -> Result<usize, TransportError> {
        self.engine.recv(conn, buf)
    }

    fn send(&mut self, conn: ConnId, data: &[u8]) -> Result<usize, TransportError> {
        self.engine.send(conn, data)
    }

    fn close(&mut self, conn: ConnId) {
        self.engine.close(conn)
    }

    /// The frames go into the TX ring; the kick waits for the next `poll`'s
    /// sleep unless that poll will not sleep: frames are already waiting in
    /// the RX ring (the answers should not wait for the next batch to be
    /// taken in), or the port busy-polls (it never sleeps, and the next
    /// poll's pass would only delay the kick). Kicked now then.
    fn flush(&mut self) -> Result<(), TransportError> {
        if let Some(s) = &mut self.stages {
            s.flush();
        }
        if self.engine.wants_egress() || self.dev.port.tx_pending() {
            let now = self.now();
            self.egress(now)?;
        }
        let sleeps = self.dev.port.sleeps_next();
        self.end_pass(sleeps)
    }

    fn shutdown_write(&mut self, conn: ConnId) -> Result<(), TransportError> {
        self.engine.shutdown_write(conn)
    }

    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::{AsFd, AsRawFd};
        Some(self.dev.port.as_fd().as_raw_fd())
    }

    /// What `poll_events` would sleep for with no caller deadline: the
    /// engine's timers, the deferred-ACK bound, and a short retry while TX
    /// is left in the ring or a neighbour is being resolved.
    fn next_wake(&mut self) -> Option<Duration> {
        if self.engine.has_events() {
            return Some(Duration::ZERO);
        }
        let wait = self.wait_for(self.now(), None);
        let wait = match &self.dev.acks {
            Some(a) => a.bound_sleep(wait),
            None => wait,
        };
        if self.dev.port.tx_pending() || self.dev.arp.has_pending() {
            return Some(wait.map_or(RETRY, |w| w.min(RETRY)));
        }
        wait
    }

    /// The kick `flush` left for the next sleep, made now with a sendto:
    /// an outside loop's sleep (epoll) does not transmit the TX ring as the
    /// port's poll(2) does.
    fn kick(&mut self) -> Result<(), TransportError> {
        if self.dev.port.tx_pending() {
            return self.send_now();
        }
        self.end_pass(false)
    }

    fn closing(&self) -> usize {
        self.engine.closing()
    }

    /// The engine's `recv` reads until smoltcp's buffer is empty.
    fn recv_drains(&self) -> bool {
        true
    }

    fn local_addr(&self, listener: ListenerId) -> Option<SocketAddrV4> {
        self.engine.local_addr(listener)
    }

    fn peer_addr(&self, conn: ConnId) -> Option<SocketAddrV4> {
        self.engine.peer_addr(conn)
    }

    fn name(&self) -> &'static str {
        "xsk"
    }
}

impl Drop for XskTransport {
    fn drop(&mut self) {
        // Tell peers we are gone rather than leaving half-open connections.
        let now = self.now();
        self.engine.abort_all(now, &mut self.dev.link());
        let _ = self.dev.port.flush();
        let _ = self.dev.port.drain_tx(Duration::from_millis(100));
        // Placeholders close with `claims` (dropped after this).
    }
}
