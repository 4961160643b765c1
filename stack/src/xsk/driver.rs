//! The driver's loop: frames from the port into the engine, the engine's
//! frames out through the port, and the park in between (`park.rs`: when the TX
//! ring's frames leave, and the sleep); and the [`Transport`] calls, which the
//! engine answers. No protocol logic and no kick rule lives here.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use stack_engine::smoltcp::time::Instant as SmolInstant;
use xsk_io::port::Port;

use super::port_placeholders::PortPlaceholders;
use super::device::Device;
use stack_engine::{Engine, PortChange};
use super::park::{min_wait, Park, Then, Until};
use super::stages::Stages;
use super::{backend_err, StackStats};
use crate::transport::{ConnId, Event, ListenerId, Transport, TransportError};

/// The AF_XDP stack behind the [`Transport`] trait: one port (one RX queue),
/// one engine, one thread. See the [module docs](super).
pub struct XskTransport {
    /// The port and what wraps it: frames in and out (`device.rs`).
    pub(super) dev: Device,
    pub(super) engine: Engine,
    /// Neighbours the kernel's table resolved (shared-address mode), for the engine.
    pub(super) resolved: Vec<(IpAddr, [u8; 6])>,
    /// The engine's time 0 in CLOCK_MONOTONIC nanoseconds: the loop's
    /// clock (one vDSO call and a division per pass) and the clock the XDP
    /// program dates deferred ACKs with.
    pub(super) epoch_ns: u64,
    /// Shared-address mode: the ports held from the kernel.
    pub(super) port_placeholders: Option<Arc<PortPlaceholders>>,
    /// The kick policy and the sleep, with the timer and the XDP program's SYN cookies.
    pub(super) park: Park,
    /// Where a request's time goes (`XskConfig::stage_times`; None: off).
    pub(super) stages: Option<Stages>,
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

    /// The counters of the engine, the device and the port.
    pub fn stats(&self) -> StackStats {
        let mut engine = self.engine.stats();
        if let Some(f) = &self.dev.faults {
            engine.drops.injected = f.stats.rx_dropped;
        }
        let mut device = self.dev.stats();
        device.xdp_syn_cookies = self.park.cookies.as_ref().map_or(0, |c| c.sent());
        device.sleeps = self.park.sleeps;
        device.timer_wakes = self.park.timer_wakes;
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

    /// Shared mode: answers smoltcp's ARP and neighbour solicitations from the
    /// kernel's tables (see `arp.rs`).
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

    fn egress_untimed(&mut self, now: SmolInstant) -> Result<(), TransportError> {
        self.engine.egress(now, &mut self.dev.link());
        self.publish()
    }

    /// What an egress leaves to the port, or `send`'s answers went to the TX ring with:
    /// the ACK policy's input, finished connections' ports, the frames published.
    fn publish(&mut self) -> Result<(), TransportError> {
        if let Some(a) = &mut self.dev.acks {
            a.allow(self.engine.acks_can_wait());
        }
        self.release_ports();
        // The kick is left to the wait that follows, or made before poll
        // returns (see `poll`).
        self.dev.port.flush_before_wait().map_err(backend_err)
    }

    /// Ports of finished connections go back to the kernel.
    fn release_ports(&mut self) {
        if !self.engine.has_port_changes() {
            return; // nearly every egress: no connection finished
        }
        let steer = self.dev.iface.steer();
        for PortChange::Released(p) in self.engine.port_changes() {
            if let Some(c) = &self.port_placeholders {
                c.release(p, steer);
            }
        }
    }

    /// The loop behind [`Transport::poll`]: receive, deliver, events, egress, park. The
    /// kick it leaves owed is made by the caller when it returns without sleeping.
    fn poll_events(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> Result<(), TransportError> {
        let start = xsk_io::sys::monotonic_ns();
        let mut wall = start; // one clock read per pass (a vDSO call)
        loop {
            let now = self.smol_ns(wall);
            self.neighbours(now);
            let (n, rx_end) = self.receive();
            let full = self.dev.batch_full(n);
            // Frames still waiting hold back the timers' retransmissions until read.
            self.engine.set_receive_queue(full.then(|| self.dev.port.rx_positions()));
            if n > 0 || self.dev.may_deliver() {
                self.ingest(now, !full, wall);
            }
            self.drive_cookies(now, wall);
            // Report what arrived before transmitting anything: the application's
            // answers then ride on the ACKs (its flush() sends both), not a bare ACK first.
            self.engine.scan_dirty();
            if self.engine.take_events(events) {
                if let (Some(s), Some(t1)) = (&mut self.stages, rx_end) {
                    s.events(t1);
                }
                return Ok(());
            }
            // Nothing to send, no timer due: the completions and fill ring wait for the
            // next flush (the pass before a sleep, at light load one per request).
            if self.engine.egress_due(now) || self.dev.port.tx_pending() {
                self.egress(now)?;
                if self.engine.take_events(events) {
                    return Ok(());
                }
            }
            let until = if full {
                Until::NextPass
            } else {
                let elapsed = Duration::from_nanos(wall.saturating_sub(start));
                match timeout {
                    Some(t) if elapsed >= t => return Ok(()),
                    left => Until::Wait(min_wait(left.map(|t| t - elapsed), self.engine_wait(now))),
                }
            };
            if self.park.park(&mut self.dev, wall, until, &mut self.stages)? == Then::Return {
                return Ok(());
            }
            wall = xsk_io::sys::monotonic_ns();
        }
    }

    /// A batch from the RX ring: how many frames, and when `recv` ended (stage times on).
    #[inline]
    fn receive(&mut self) -> (usize, Option<u64>) {
        let Some(s) = &mut self.stages else { return (self.dev.recv(), None) };
        let t0 = Stages::now();
        let n = self.dev.recv();
        if n == 0 {
            return (0, None);
        }
        let t1 = Stages::now();
        s.rx(t0, t1);
        (n, Some(t1))
    }

    /// The XDP program's SYN cookies: switched on while the engine answers with cookies.
    fn drive_cookies(&mut self, now: SmolInstant, wall: u64) {
        if let Some(c) = &mut self.park.cookies {
            let want = self.engine.steering_answers_syns(now, c.sent());
            if let Err(why) = c.drive(want, wall) {
                tracing::warn!("{why}");
            }
        }
    }

    /// Until the engine's next timer.
    fn engine_wait(&mut self, now: SmolInstant) -> Option<Duration> {
        self.engine.poll_at().map(|d| if d <= now { Duration::ZERO } else { Duration::from_micros((d - now).total_micros()) })
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
            if let Some(c) = &self.port_placeholders {
                c.claim(port, self.dev.iface.steer()).map_err(|e| match e.kind() {
                    std::io::ErrorKind::AddrInUse => TransportError::AddrInUse(port),
                    _ => TransportError::Io(e),
                })?;
            }
        }
        let lid = match self.engine.listen(port) {
            Ok(l) => l,
            Err(e) => {
                if let (Some(c), true) = (&self.port_placeholders, port != 0) {
                    c.release(port, self.dev.iface.steer());
                }
                return Err(e);
            }
        };
        let port = self.engine.local_addr(lid).map(|a| a.port()).unwrap_or(port);
        // Steered (shared mode: claimed above) and marked as listening, so the
        // XDP program may answer its SYNs with cookies.
        if let Some(steer) = self.dev.iface.steer() {
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
        self.connect_ip(addr.into())
    }

    /// Over IPv6 too, when the stack has an IPv6 address: in shared mode the kernel's
    /// neighbour table resolves the peer (or the gateway), as for IPv4 (`arp.rs`).
    fn connect_ip(&mut self, addr: SocketAddr) -> Result<ConnId, TransportError> {
        let (placeholders, steer) = (self.port_placeholders.as_deref(), self.dev.iface.steer());
        let mut usable = |p: u16| placeholders.is_none_or(|c| c.claim(p, steer).is_ok());
        self.engine.connect(addr, &mut usable)
    }

    /// Frames queued since the last wait go out before this returns: in its
    /// wait (the port's poll(2) transmits before it sleeps), or with a
    /// sendto when it returns without sleeping.
    fn poll(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> Result<(), TransportError> {
        let r = self.poll_events(events, timeout);
        let kicked = self.park.leave(&mut self.dev, &mut self.stages);
        // The loop's own error, if any, is the one to report.
        r?;
        kicked
    }


    fn waker(&mut self) -> Result<crate::Waker, TransportError> {
        Ok(self.park.timer.waker())
    }

    fn recv(&mut self, conn: ConnId, buf: &mut BytesMut) -> Result<usize, TransportError> {
        self.engine.recv(conn, buf)
    }

    /// An answer to an idle connection goes to the TX ring now (`Engine::send_now`); it
    /// is published and kicked with the next `flush`.
    fn send(&mut self, conn: ConnId, data: &[u8]) -> Result<usize, TransportError> {
        let t0 = self.stages.as_ref().map(|_| Stages::now());
        let epoch = self.epoch_ns;
        let r = self.engine.send_now(conn, data, &mut self.dev.link(), || smol_ns(epoch, xsk_io::sys::monotonic_ns()));
        if let (Some(s), Some(t0)) = (&mut self.stages, t0) {
            s.send(t0);
        }
        r
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
        if self.engine.wants_egress() {
            let now = self.now();
            self.egress(now)?;
        } else if self.dev.port.tx_pending() {
            // The answers `send` sent, nothing left for an egress (due timers wait for
            // the next pass, which looks before it sleeps).
            self.publish()?;
        }
        self.park.after_flush(&mut self.dev, &mut self.stages)
    }

    fn shutdown_write(&mut self, conn: ConnId) -> Result<(), TransportError> {
        self.engine.shutdown_write(conn)
    }

    fn wait_fd(&self) -> Option<std::os::fd::RawFd> {
        use std::os::fd::{AsFd, AsRawFd};
        Some(self.dev.port.as_fd().as_raw_fd())
    }

    /// What `poll_events` would sleep for with no caller deadline (`Park::next_wake`).
    fn next_wake(&mut self) -> Option<Duration> {
        if self.engine.has_events() {
            return Some(Duration::ZERO);
        }
        let wall = xsk_io::sys::monotonic_ns();
        let wait = self.engine_wait(self.smol_ns(wall));
        self.park.next_wake(&self.dev, wall, wait)
    }

    /// The kick `flush` left for the next sleep, made now (`Park::kick`).
    fn kick(&mut self) -> Result<(), TransportError> {
        self.park.kick(&mut self.dev, &mut self.stages)
    }

    /// `EngineConfig::ack_delay`, for every socket from now on.
    fn set_ack_delay(&mut self, delay: Option<Duration>) {
        self.engine.set_ack_delay(delay)
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

    fn peer_socket_addr(&self, conn: ConnId) -> Option<SocketAddr> {
        self.engine.peer_socket_addr(conn)
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
        // Placeholders close with `port_placeholders` (dropped after this).
    }
}
