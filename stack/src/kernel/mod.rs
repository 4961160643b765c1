//! [`Transport`] over the kernel's TCP stack: non-blocking sockets, one edge-triggered mio `Poll`.
//!
//! Readiness bookkeeping that implements the contract in [`crate::transport`]:
//! - `readable` flag: set by an epoll edge, cleared when a `recv` hits EAGAIN *or* returns a short
//!   read. With edge-triggered epoll a short read means the queue was empty at that instant, and
//!   any later arrival raises a fresh edge, so the next `recv` can answer `Ok(0)` without a
//!   syscall. That saves the trailing EAGAIN `read()` per request, which matters for RR. The
//!   shortcut is disabled once the peer hung up (`eof_pending`): EOF can come with the final
//!   data and raises no further edge.
//! - `write_blocked` flag: set by a short `send`. Only then is an epoll write edge reported as
//!   `Writable`. Otherwise every readable edge (epoll reports the full mask) would carry a
//!   spurious `Writable`.
//! - `Closed` found inside `recv`/`send` is queued in `pending` and returned by the next `poll`,
//!   which then does not block.

use std::io;
use std::mem;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use bytes::BytesMut;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

use crate::sockets::{self, sockaddr_in};
use crate::timer::WaitTimer;
use crate::wake::Waker;
use crate::transport::{ConnId, ConnSlab, Event, ListenerId, Transport, TransportError};

mod busy;
pub use busy::{
    BusyReport, EpollBusy, EpollParams, KernelBusyPoll, SocketBusy, DEFAULT_BUSY_POLL_BUDGET, UNPRIVILEGED_MAX_BUDGET,
};
use busy::BusyState;

/// Listener tokens live above every possible `ConnId` (which is a u32) so one `Token` space
/// serves both.
const LISTENER_TOKEN_BASE: usize = 1 << 40;
/// The wait timer's timerfd ([`WaitTimer`]).
const TIMER_TOKEN: usize = usize::MAX - 1;
/// Minimum free space offered to `read()`. Smaller reads would make large messages cost many
/// syscalls. Larger ones waste memory per idle connection.
const MIN_READ_SPACE: usize = 32 * 1024;

/// Settings for [`KernelTransport`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct KernelConfig {
    /// Local address for listeners and the source address of outgoing connections.
    /// `UNSPECIFIED` = all interfaces / let routing pick.
    pub bind: Ipv4Addr,
    /// `SO_BUSY_POLL` microseconds on every socket (opt-in: burns CPU in the kernel's receive
    /// path, needs CAP_NET_ADMIN above `net.core.busy_read`). The plain form: ignored when
    /// [`busy`](Self::busy) is set.
    pub busy_poll: Option<u32>,
    /// The kernel's busy polling in full: `SO_BUSY_POLL`, `SO_BUSY_POLL_BUDGET` and
    /// `SO_PREFER_BUSY_POLL` on every socket, and the same on the epoll instance through
    /// `EPIOCSPARAMS` (Linux 6.9+; without it the transport falls back to the socket options
    /// and warns once). [`KernelTransport::busy_report`] tells what was applied. Takes
    /// precedence over [`busy_poll`](Self::busy_poll).
    pub busy: Option<KernelBusyPoll>,
    /// Capacity of the epoll event batch.
    pub event_capacity: usize,
    /// `SO_REUSEPORT` on listeners, so several transports (one per thread) can listen on the
    /// same port and the kernel spreads connections over them.
    pub reuse_port: bool,
    /// Outgoing connections take their source address in turn from this many consecutive
    /// addresses starting at `bind` (a load generator standing in for many clients; the
    /// addresses must be on an interface). 1: `bind` only.
    pub sources: u32,
}

/// Builders: each sets one field and gives the config back, so a caller outside this
/// crate (where the struct is `#[non_exhaustive]`) writes `KernelConfig::default().with_bind(Ipv4Addr::UNSPECIFIED)`.
impl KernelConfig {
    /// With `bind` set to `v`.
    pub fn with_bind(mut self, v: Ipv4Addr) -> Self {
        self.bind = v;
        self
    }

    /// With `busy_poll` set to `v`.
    pub fn with_busy_poll(mut self, v: Option<u32>) -> Self {
        self.busy_poll = v;
        self
    }

    /// With `busy` set to `v`: e.g. `Some(KernelBusyPoll::new(50))`, or
    /// `Some(KernelBusyPoll::irq_suspension())` next to [`crate::napi::NapiTuning`].
    pub fn with_busy(mut self, v: Option<KernelBusyPoll>) -> Self {
        self.busy = v;
        self
    }

    /// With `event_capacity` set to `v`.
    pub fn with_event_capacity(mut self, v: usize) -> Self {
        self.event_capacity = v;
        self
    }

    /// With `reuse_port` set to `v`.
    pub fn with_reuse_port(mut self, v: bool) -> Self {
        self.reuse_port = v;
        self
    }

    /// With `sources` set to `v`.
    pub fn with_sources(mut self, v: u32) -> Self {
        self.sources = v;
        self
    }
}

impl Default for KernelConfig {
    /// Loopback by default: the safe choice for tests and local benchmarks.
    fn default() -> Self {
        KernelConfig {
            bind: Ipv4Addr::LOCALHOST,
            busy_poll: None,
            busy: None,
            event_capacity: 1024,
            reuse_port: false,
            sources: 1,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Non-blocking connect in flight. Waiting for the write edge.
    Connecting,
    Open,
    /// `Closed` has been queued. Only `close()` is meaningful now.
    Done,
}

#[derive(Debug)]
struct Conn {
    stream: TcpStream,
    /// The remote address, from `accept` or `connect` (an IPv4-mapped one unmapped):
    /// `peer_addr` costs no getpeername.
    peer: Option<SocketAddr>,
    state: State,
    readable: bool,
    /// Peer hung up or the socket has an error: keep reading until EOF, ignoring short reads.
    eof_pending: bool,
    write_blocked: bool,
    /// False after a reset/error/failed connect. A FIN from the peer alone keeps this true
    /// (half-close: we may still answer).
    can_send: bool,
}

impl Conn {
    fn new(stream: TcpStream, peer: Option<SocketAddr>, state: State) -> Self {
        Conn { stream, peer, state, readable: false, eof_pending: false, write_blocked: false, can_send: true }
    }
}

/// Kernel-TCP backend. See the module docs for how it meets the [`Transport`] contract.
pub struct KernelTransport {
    cfg: KernelConfig,
    poll: Poll,
    mio_events: Events,
    listeners: Vec<TcpListener>,
    conns: ConnSlab<Conn>,
    /// Events found outside `poll` (EOF/reset seen in `recv`/`send`), delivered by the next one.
    pending: Vec<Event>,
    /// Ends epoll's wait for every timeout, and carries a [`Waker`]'s wakes (see
    /// [`crate::timer`]).
    timer: WaitTimer,
    /// Outgoing connections made so far: the next one's source is `bind` plus this modulo `sources`.
    connects: u32,
    /// Busy polling: what was applied, and the options each new socket gets.
    busy: BusyState,
    stats: KernelStats,
}

/// The epoll backend's counters ([`KernelTransport::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct KernelStats {
    /// System calls on the request path: `epoll_wait`, `accept4`, `recv` and `send` (a timer's
    /// arming, made only when a wait must end earlier, and connection setup are not counted).
    pub syscalls: u64,
}

impl KernelTransport {
    /// An epoll instance with its wait timer (a timerfd); no sockets yet. Needs no privileges.
    /// Fails with [`TransportError::Io`] if epoll or timerfd cannot be created (e.g. out of
    /// file descriptors). With [`KernelConfig::busy`] it sets the epoll instance's busy-poll
    /// parameters; a kernel that refuses them is not an error (see [`Self::busy_report`]).
    pub fn new(cfg: KernelConfig) -> Result<Self, TransportError> {
        let poll = Poll::new()?;
        let timer = WaitTimer::new()?;
        timer.register(poll.registry(), Token(TIMER_TOKEN))?;
        let busy = BusyState::new(poll.as_raw_fd(), cfg.busy, cfg.busy_poll);
        Ok(KernelTransport {
            busy,
            poll,
            timer,
            mio_events: Events::with_capacity(cfg.event_capacity.max(16)),
            listeners: Vec::new(),
            conns: ConnSlab::with_capacity(1024),
            pending: Vec::with_capacity(64),
            cfg,
            connects: 0,
            stats: KernelStats::default(),
        })
    }

    /// The backend's counters.
    pub fn stats(&self) -> KernelStats {
        self.stats
    }

    /// The settings it was created with.
    pub fn config(&self) -> &KernelConfig {
        &self.cfg
    }

    /// The busy polling in force: the epoll parameters as the kernel holds them (or why not),
    /// and whether the sockets got their options. Print it with `{}`.
    pub fn busy_report(&self) -> &BusyReport {
        self.busy.report()
    }

    /// Number of connections the application has not closed yet.
    pub fn open_connections(&self) -> usize {
        self.conns.len()
    }

    fn queue_closed(pending: &mut Vec<Event>, id: ConnId, conn: &mut Conn) {
        if conn.state != State::Done {
            conn.state = State::Done;
            conn.readable = false;
            pending.push(Event::Closed(id));
        }
    }

    fn accept_all(&mut self, index: usize, events: &mut Vec<Event>) {
        let listener_id = ListenerId(index as u32);
        loop {
            self.stats.syscalls += 1;
            let (stream, peer) = match self.listeners[index].accept() {
                Ok((stream, SocketAddr::V4(peer))) => (stream, Some(SocketAddr::V4(peer))),
                // A dual-stack listener's IPv4 peers come as IPv4-mapped addresses.
                Ok((stream, SocketAddr::V6(peer))) => (
                    stream,
                    Some(match peer.ip().to_ipv4_mapped() {
                        Some(a) => SocketAddr::V4(SocketAddrV4::new(a, peer.port())),
                        None => SocketAddr::V6(peer),
                    }),
                ),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                // The peer gave up between SYN and accept: not our problem, try the next one.
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted || e.kind() == io::ErrorKind::Interrupted => {
                    continue
                }
                Err(e) => {
                    // EMFILE/ENFILE/ENOBUFS: leave the rest in the backlog. The next SYN raises a
                    // new edge and we retry then.
                    tracing::warn!(error = %e, "accept failed");
                    return;
                }
            };
            match self.add_stream(stream, peer, State::Open) {
                Ok(conn) => events.push(Event::Accepted { listener: listener_id, conn }),
                Err(e) => tracing::warn!(error = %e, "dropping accepted connection"),
            }
        }
    }

    /// Configures a socket, registers it and gives it an id. On failure the socket is dropped
    /// (closed) and the slot released.
    fn add_stream(&mut self, stream: TcpStream, peer: Option<SocketAddr>, state: State) -> Result<ConnId, TransportError> {
        stream.set_nodelay(true)?;
        self.busy.configure(stream.as_raw_fd())?;
        let id = self.conns.insert(Conn::new(stream, peer, state))?;
        let conn = self.conns.get_mut(id).expect("just inserted");
        let reg = self.poll.registry().register(
            &mut conn.stream,
            Token(id.0 as usize),
            Interest::READABLE | Interest::WRITABLE,
        );
        if let Err(e) = reg {
            self.conns.remove(id);
            return Err(e.into());
        }
        Ok(id)
    }

    fn handle_conn_event(&mut self, id: ConnId, ev: &mio::event::Event, events: &mut Vec<Event>) {
        // Stale token: the connection was closed (and maybe the slot reused) after the kernel
        // queued this event. The generation in the token makes the lookup fail.
        let Some(conn) = self.conns.get_mut(id) else { return };
        match conn.state {
            State::Connecting => {
                if !(ev.is_writable() || ev.is_error() || ev.is_write_closed() || ev.is_read_closed()) {
                    return;
                }
                // mio's recipe: an error shows up in SO_ERROR; otherwise peer_addr() tells
                // "connected" apart from a spurious wake-up (ENOTCONN).
                let failed = match conn.stream.take_error() {
                    Ok(Some(_)) | Err(_) => true,
                    Ok(None) => match conn.stream.peer_addr() {
                        Ok(_) => false,
                        Err(e) if e.kind() == io::ErrorKind::NotConnected => return,
                        Err(_) => true,
                    },
                };
                if failed {
                    conn.can_send = false;
                    conn.state = State::Done;
                    events.push(Event::Closed(id));
                    return;
                }
                conn.state = State::Open;
                events.push(Event::Connected(id));
                if ev.is_readable() || ev.is_read_closed() {
                    conn.readable = true;
                    conn.eof_pending |= ev.is_read_closed();
                    events.push(Event::Readable(id));
                }
            }
            State::Open => {
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    conn.readable = true;
                    conn.eof_pending |= ev.is_read_closed() || ev.is_error();
                    events.push(Event::Readable(id));
                }
                if conn.write_blocked && (ev.is_writable() || ev.is_write_closed() || ev.is_error()) {
                    conn.write_blocked = false;
                    events.push(Event::Writable(id));
                }
            }
            State::Done => {}
        }
    }
}

impl Transport for KernelTransport {
    fn listen(&mut self, port: u16) -> Result<ListenerId, TransportError> {
        let fd = sockets::listener(SocketAddrV4::new(self.cfg.bind, port), self.cfg.reuse_port, true)?;
        self.busy.configure(fd.as_raw_fd())?;
        sockets::listen(fd.as_raw_fd())?;
        let mut listener = TcpListener::from_std(std::net::TcpListener::from(fd));
        let index = self.listeners.len();
        self.poll.registry().register(&mut listener, Token(LISTENER_TOKEN_BASE + index), Interest::READABLE)?;
        self.listeners.push(listener);
        Ok(ListenerId(index as u32))
    }

    fn unlisten(&mut self, listener: ListenerId) {
        let Some(l) = self.listeners.get_mut(listener.0 as usize) else { return };
        let _ = self.poll.registry().deregister(l);
        // shutdown(2) on a listening socket closes it (Linux: inet_shutdown disconnects a
        // listener): SYNs get a RST, as after close, while the index stays valid.
        // SAFETY: shutdown takes no pointers; the descriptor is the listener's own.
        unsafe { libc::shutdown(l.as_raw_fd(), libc::SHUT_RDWR) };
    }

    fn connect_ip(&mut self, addr: SocketAddr) -> Result<ConnId, TransportError> {
        let SocketAddr::V6(a6) = addr else {
            let SocketAddr::V4(a) = addr else { unreachable!() };
            return self.connect(a);
        };
        let fd = sockets::tcp_socket6(true)?;
        let (sa, len) = sockets::sockaddr_in6(a6);
        // SAFETY: `sa` is a valid sockaddr_in6 that outlives the call and `len` is its size.
        let rc = unsafe { libc::connect(fd.as_raw_fd(), (&sa as *const libc::sockaddr_in6).cast(), len) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINPROGRESS) {
                return Err(e.into());
            }
        }
        let stream = TcpStream::from_std(std::net::TcpStream::from(fd));
        self.add_stream(stream, Some(addr), State::Connecting)
    }

    fn connect(&mut self, addr: SocketAddrV4) -> Result<ConnId, TransportError> {
        let fd = sockets::tcp_socket(true)?;
        sockets::bind_source(fd.as_raw_fd(), self.cfg.bind, self.cfg.sources, self.connects)?;
        self.connects = self.connects.wrapping_add(1);
        let (sa, len) = sockaddr_in(addr);
        // SAFETY: `sa` is a valid sockaddr_in that outlives the call and `len` is its size.
        let rc = unsafe { libc::connect(fd.as_raw_fd(), (&sa as *const libc::sockaddr_in).cast(), len) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINPROGRESS) {
                return Err(e.into());
            }
        }
        let stream = TcpStream::from_std(std::net::TcpStream::from(fd));
        self.add_stream(stream, Some(SocketAddr::V4(addr)), State::Connecting)
    }

    fn poll(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> Result<(), TransportError> {
        // Events found during recv/send must not wait behind a blocking epoll_wait.
        let timeout = if self.pending.is_empty() { timeout } else { Some(Duration::ZERO) };
        events.append(&mut self.pending);
        let timeout = self.timer.prepare(timeout);
        // A wake that came before the timer was armed (which may have replaced its expiry).
        let timeout = if self.timer.take_wake() { Some(Duration::ZERO) } else { timeout };
        self.stats.syscalls += 1;
        match self.poll.poll(&mut self.mio_events, timeout) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        // Swap the batch out so the handlers can borrow `self` mutably. Nothing is allocated.
        let mio_events = mem::replace(&mut self.mio_events, Events::with_capacity(0));
        for ev in mio_events.iter() {
            let token = ev.token().0;
            if token == TIMER_TOKEN {
                // An expiry, or a wake: either way this poll returns now.
                self.timer.clear();
                self.timer.take_wake();
            } else if token >= LISTENER_TOKEN_BASE {
                self.accept_all(token - LISTENER_TOKEN_BASE, events);
            } else {
                self.handle_conn_event(ConnId(token as u32), ev, events);
            }
        }
        self.mio_events = mio_events;
        Ok(())
    }

    fn recv(&mut self, id: ConnId, buf: &mut BytesMut) -> Result<usize, TransportError> {
        let conn = self.conns.get_mut(id).ok_or_else(|| TransportError::UnknownConn(id))?;
        if !conn.readable || conn.state != State::Open {
            return Ok(0);
        }
        if buf.capacity() - buf.len() < MIN_READ_SPACE {
            buf.reserve(MIN_READ_SPACE);
        }
        let spare = buf.spare_capacity_mut();
        let (ptr, want) = (spare.as_mut_ptr(), spare.len());
        loop {
            // SAFETY: recv writes at most `want` bytes into the buffer's spare capacity, and
            // set_len below only covers the bytes the kernel reported as written.
            let n = unsafe { libc::recv(conn.stream.as_raw_fd(), ptr.cast(), want, 0) };
            self.stats.syscalls += 1;
            if n > 0 {
                let n = n as usize;
                // SAFETY: the kernel initialised these n bytes of spare capacity (n <= want).
                unsafe { buf.set_len(buf.len() + n) };
                if n < want && !conn.eof_pending {
                    conn.readable = false;
                }
                return Ok(n);
            }
            if n == 0 {
                // EOF. Everything before the FIN has been handed out.
                Self::queue_closed(&mut self.pending, id, conn);
                return Ok(0);
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => {
                    conn.readable = false;
                    return Ok(0);
                }
                _ => {
                    tracing::debug!(?id, error = %err, "recv error, closing");
                    conn.can_send = false;
                    Self::queue_closed(&mut self.pending, id, conn);
                    return Ok(0);
                }
            }
        }
    }

    fn send(&mut self, id: ConnId, data: &[u8]) -> Result<usize, TransportError> {
        let conn = self.conns.get_mut(id).ok_or_else(|| TransportError::UnknownConn(id))?;
        if conn.state == State::Connecting {
            // Connected will follow: it is the writable notification.
            return Ok(0);
        }
        if !conn.can_send {
            return Err(TransportError::ConnectionClosed(id));
        }
        if data.is_empty() {
            return Ok(0);
        }
        loop {
            // MSG_NOSIGNAL: a reset peer must produce EPIPE, not kill the process with SIGPIPE.
            // SAFETY: send() reads at most data.len() bytes from the live slice `data`.
            let n =
                unsafe { libc::send(conn.stream.as_raw_fd(), data.as_ptr().cast(), data.len(), libc::MSG_NOSIGNAL) };
            self.stats.syscalls += 1;
            if n >= 0 {
                let n = n as usize;
                if n < data.len() {
                    conn.write_blocked = true;
                }
                return Ok(n);
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => {
                    conn.write_blocked = true;
                    return Ok(0);
                }
                _ => {
                    tracing::debug!(?id, error = %err, "send error, closing");
                    conn.can_send = false;
                    Self::queue_closed(&mut self.pending, id, conn);
                    return Err(TransportError::ConnectionClosed(id));
                }
            }
        }
    }

    fn close(&mut self, id: ConnId) {
        // Dropping the socket closes the fd, which also removes it from the epoll set (we never
        // dup it). The kernel still delivers queued data and then sends FIN.
        if let Some(conn) = self.conns.remove(id) {
            drop(conn);
            // A Closed queued but not yet delivered would refer to a dead id: drop it.
            self.pending.retain(|ev| *ev != Event::Closed(id));
        }
    }

    fn shutdown_write(&mut self, id: ConnId) -> Result<(), TransportError> {
        let conn = self.conns.get_mut(id).ok_or_else(|| TransportError::UnknownConn(id))?;
        match conn.stream.shutdown(std::net::Shutdown::Write) {
            Ok(()) => Ok(()),
            // Not connected (yet, or any more): nothing to half-close.
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Err(TransportError::ConnectionClosed(id)),
            Err(e) => Err(e.into()),
        }
    }

    fn waker(&mut self) -> Result<Waker, TransportError> {
        Ok(self.timer.waker())
    }

    /// The epoll instance: readable while it holds events.
    fn wait_fd(&self) -> Option<RawFd> {
        Some(self.poll.as_raw_fd())
    }

    /// The kernel keeps its own timers: only I/O, or events found by
    /// `recv`/`send`, make `poll` due.
    fn next_wake(&mut self) -> Option<Duration> {
        if self.pending.is_empty() {
            None
        } else {
            Some(Duration::ZERO)
        }
    }

    fn local_addr(&self, listener: ListenerId) -> Option<SocketAddrV4> {
        sockets::listener_v4(self.listeners.get(listener.0 as usize)?.local_addr().ok()?)
    }

    fn peer_addr(&self, conn: ConnId) -> Option<SocketAddrV4> {
        match self.conns.get(conn)?.peer? {
            SocketAddr::V4(a) => Some(a),
            SocketAddr::V6(_) => None,
        }
    }

    fn peer_socket_addr(&self, conn: ConnId) -> Option<SocketAddr> {
        self.conns.get(conn)?.peer
    }

    fn name(&self) -> &'static str {
        "kernel"
    }
}

#[cfg(test)]
mod tests;
