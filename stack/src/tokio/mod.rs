//! Any [`Transport`] inside tokio: [`TcpListener`], [`TcpStream`] and [`Net::connect`], so
//! unmodified tokio servers (hyper, axum, tonic) run on the AF_XDP stack or, for comparison,
//! on the kernel backend. Feature `tokio` (and `axum` / `tonic` for those frameworks' traits).
//!
//! tokio cannot take a custom reactor (tokio issue 1887), so the transport is run by a
//! [`Driver`] task next to the application's tasks, in a current-thread runtime (one per
//! queue: [`serve_per_queue`]). Each pass of the driver takes in I/O with a zero-timeout
//! `poll`, wakes the connections that have events, flushes what the tasks wrote (and makes
//! the TX kick: tokio's epoll sleep does not transmit the AF_XDP ring as the xsk driver's own
//! poll(2) does), then waits for the transport's descriptor ([`Transport::wait_fd`] in an
//! `AsyncFd`), its next timer ([`Transport::next_wake`], a tokio `Sleep`) or a task's write.
//!
//! ```no_run
//! # async fn f() -> std::io::Result<()> {
//! use stack::kernel::{KernelConfig, KernelTransport};
//! use tokio::io::{AsyncReadExt, AsyncWriteExt};
//!
//! let net = stack::tokio::Net::spawn(KernelTransport::new(KernelConfig::default()).unwrap())?;
//! let listener = net.listen(7000)?;
//! let (mut s, _) = listener.accept().await?;
//! let mut buf = [0u8; 1024];
//! let n = s.read(&mut buf).await?;
//! s.write_all(&buf[..n]).await?;
//! # Ok(()) }
//! ```
//!
//! **Backpressure.** A stream keeps at most one `recv`'s worth of received bytes (the
//! transport's socket buffer bounds it) and takes more only once those are read; a write
//! goes straight into the transport's send buffer and waits (`Pending`) while it is full. So
//! a peer that does not read, or sends faster than the application reads, stalls its own
//! connection and grows no memory.
//!
//! **Shutdown.** The driver runs until the runtime drops it; the transport drops with the
//! last [`Net`], listener and stream. The xsk backend resets connections still open when it
//! drops, so call [`Net::drain`] after the server returns to let closed connections deliver
//! their last bytes and FIN.

mod driver;
mod stream;
mod threads;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddrV4;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Waker;
use std::time::Duration;

use bytes::BytesMut;

use crate::transport::{ConnId, Event, ListenerId, Transport, TransportError};

pub use driver::Driver;
pub use stream::{ConnectFuture, TcpListener, TcpStream};
#[cfg(feature = "tonic")]
pub use stream::Incoming;
pub use threads::serve_per_queue;

/// Connections waiting in a listener's queue for `accept`; beyond it new ones are closed at
/// once (an application that stopped accepting must not make the stack hold sockets forever).
const ACCEPT_BACKLOG: usize = 1024;
/// A received-bytes buffer larger than this is given back once the connection goes idle.
const RX_KEEP: usize = 64 * 1024;

/// A handle on a transport run by a [`Driver`]: opens listeners and connections. Cheap to
/// clone; all clones, streams and listeners share the one transport.
#[derive(Clone)]
pub struct Net {
    pub(crate) inner: Arc<Mutex<Shared>>,
}

/// Everything the driver and the streams share. One lock: in a current-thread runtime it is
/// never contended.
pub(crate) struct Shared {
    pub(crate) t: Box<dyn Transport + Send>,
    /// Per connection, indexed by [`ConnId::slot`].
    conns: Vec<Option<ConnState>>,
    /// Per listener, indexed by [`ListenerId`].
    listeners: Vec<ListenState>,
    driver: Option<Waker>,
    /// A wake-up of the driver is already on its way: further ones are not needed.
    driver_woken: bool,
    /// A `recv` found nothing: it may have queued `Closed`, which only `poll` reports.
    pub(crate) poll_owed: bool,
    /// The driver stopped on an error: every operation fails from now on.
    failed: bool,
}

/// Connection `id`'s state in `conns`, if it is still that connection's. A free function so a
/// caller can hold it next to `Shared::t` (disjoint fields).
pub(crate) fn conn_in(conns: &mut [Option<ConnState>], id: ConnId) -> Option<&mut ConnState> {
    conns.get_mut(id.slot())?.as_mut().filter(|c| c.id == id)
}

pub(crate) struct ConnState {
    id: ConnId,
    /// Received, not yet read by the application.
    rx: BytesMut,
    read: Option<Waker>,
    write: Option<Waker>,
    /// `Closed` was reported: a `recv` that returns nothing now means EOF.
    eof: bool,
    connected: bool,
    shut: bool,
}

struct ListenState {
    queue: VecDeque<ConnId>,
    waker: Option<Waker>,
    open: bool,
}

impl Net {
    /// Wraps `t` and spawns its [`Driver`] on the current tokio runtime (which must have IO
    /// and time enabled). Fails outside a runtime's context or if the transport's descriptor
    /// cannot be registered.
    pub fn spawn<T: Transport + Send + 'static>(t: T) -> io::Result<Net> {
        let (net, driver) = Net::new(t)?;
        ::tokio::spawn(async move {
            if let Err(e) = driver.await {
                tracing::error!("tokio adapter: the transport failed: {e}");
            }
        });
        Ok(net)
    }

    /// Wraps `t`; the caller runs the returned [`Driver`] (spawn it, or `select!` on it).
    /// Must be called inside a tokio runtime's context.
    pub fn new<T: Transport + Send + 'static>(t: T) -> io::Result<(Net, Driver)> {
        let fd = t.wait_fd();
        let inner = Arc::new(Mutex::new(Shared {
            t: Box::new(t),
            conns: Vec::new(),
            listeners: Vec::new(),
            driver: None,
            driver_woken: false,
            poll_owed: false,
            failed: false,
        }));
        let driver = Driver::new(inner.clone(), fd)?;
        Ok((Net { inner }, driver))
    }

    /// Listens on `port` (0: the transport picks one; see [`TcpListener::local_addr`]).
    pub fn listen(&self, port: u16) -> io::Result<TcpListener> {
        let mut sh = lock(&self.inner);
        sh.check()?;
        let lid = sh.t.listen(port).map_err(to_io)?;
        let addr = sh.t.local_addr(lid).ok_or_else(|| io::Error::other("listener without an address"))?;
        let i = lid.0 as usize;
        if sh.listeners.len() <= i {
            sh.listeners.resize_with(i + 1, || ListenState { queue: VecDeque::new(), waker: None, open: false });
        }
        sh.listeners[i] = ListenState { queue: VecDeque::with_capacity(64), waker: None, open: true };
        sh.wake_driver();
        Ok(TcpListener::new(self.inner.clone(), lid, addr))
    }

    /// Opens a connection; the future resolves once it is established (or fails with
    /// `ConnectionRefused` if the transport reports it closed first).
    pub fn connect(&self, addr: SocketAddrV4) -> ConnectFuture {
        let r = {
            let mut sh = lock(&self.inner);
            let r = sh.check().and_then(|()| sh.t.connect(addr).map_err(to_io));
            if let Ok(id) = r {
                sh.insert_conn(id, false);
                sh.wake_driver();
            }
            r
        };
        ConnectFuture::new(self.inner.clone(), r, addr)
    }

    /// The backend's name ("xsk" or "kernel").
    pub fn backend(&self) -> &'static str {
        lock(&self.inner).t.name()
    }

    /// Runs `f` on the transport (for its counters, say). Do not poll it from here.
    pub fn with_transport<R>(&self, f: impl FnOnce(&mut dyn Transport) -> R) -> R {
        f(&mut *lock(&self.inner).t)
    }

    /// Waits until the connections the application closed have delivered their data and
    /// FIN ([`Transport::closing`] is 0), at most `limit`. Call it before the runtime ends.
    pub async fn drain(&self, limit: Duration) {
        let until = ::tokio::time::Instant::now() + limit;
        while lock(&self.inner).t.closing() > 0 && ::tokio::time::Instant::now() < until {
            ::tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

impl Shared {
    pub(crate) fn wake_driver(&mut self) {
        if !self.driver_woken {
            if let Some(w) = &self.driver {
                self.driver_woken = true;
                w.wake_by_ref();
            }
        }
    }

    fn insert_conn(&mut self, id: ConnId, connected: bool) {
        let i = id.slot();
        if self.conns.len() <= i {
            self.conns.resize_with(i + 1, || None);
        }
        // A slot's earlier occupant is gone (its id was closed before the transport reused it).
        let rx = self.conns[i].take().map(|c| c.rx).unwrap_or_default();
        self.conns[i] = Some(ConnState { id, rx, read: None, write: None, eof: false, connected, shut: false });
    }

    pub(crate) fn conn(&mut self, id: ConnId) -> Option<&mut ConnState> {
        conn_in(&mut self.conns, id)
    }

    /// The application is done with `id`: the transport closes it gracefully.
    pub(crate) fn drop_conn(&mut self, id: ConnId) {
        if let Some(slot) = self.conns.get_mut(id.slot()) {
            if slot.as_ref().is_some_and(|c| c.id == id) {
                *slot = None;
            }
        }
        self.t.close(id);
        self.wake_driver();
    }

    /// Hands the driver's events to the tasks waiting for them.
    fn dispatch(&mut self, events: &[Event]) {
        for ev in events {
            match *ev {
                Event::Accepted { listener, conn } => {
                    let open = self.listeners.get(listener.0 as usize).is_some_and(|l| l.open && l.queue.len() < ACCEPT_BACKLOG);
                    if !open {
                        self.t.close(conn);
                        continue;
                    }
                    self.insert_conn(conn, true);
                    let l = &mut self.listeners[listener.0 as usize];
                    l.queue.push_back(conn);
                    if let Some(w) = l.waker.take() {
                        w.wake();
                    }
                }
                Event::Connected(c) => {
                    if let Some(cs) = self.conn(c) {
                        cs.connected = true;
                        wake(&mut cs.write);
                    }
                }
                Event::Readable(c) => {
                    if let Some(cs) = self.conn(c) {
                        wake(&mut cs.read);
                    }
                }
                Event::Writable(c) => {
                    if let Some(cs) = self.conn(c) {
                        wake(&mut cs.write);
                    }
                }
                Event::Closed(c) => {
                    if let Some(cs) = self.conn(c) {
                        cs.eof = true;
                        wake(&mut cs.read);
                        wake(&mut cs.write);
                    }
                }
            }
        }
    }

    /// The driver is gone: wakes every waiting task, whose next call then fails.
    fn fail(&mut self) {
        self.failed = true;
        for c in self.conns.iter_mut().flatten() {
            wake(&mut c.read);
            wake(&mut c.write);
        }
        for l in &mut self.listeners {
            wake(&mut l.waker);
        }
    }

    /// `Err` once the driver has stopped.
    pub(crate) fn check(&self) -> io::Result<()> {
        if self.failed {
            Err(io::Error::other("the transport's driver stopped on an error"))
        } else {
            Ok(())
        }
    }

    pub(crate) fn close_listener(&mut self, lid: ListenerId) {
        let Some(l) = self.listeners.get_mut(lid.0 as usize) else { return };
        l.open = false;
        l.waker = None;
        let queued: Vec<ConnId> = l.queue.drain(..).collect();
        for id in queued {
            self.drop_conn(id);
        }
    }
}

fn wake(w: &mut Option<Waker>) {
    if let Some(w) = w.take() {
        w.wake();
    }
}

/// Keeps `slot` holding a waker for `cx` without cloning when it already does.
fn register(slot: &mut Option<Waker>, w: &Waker) {
    match slot {
        Some(old) if old.will_wake(w) => {}
        _ => *slot = Some(w.clone()),
    }
}

/// The shared state, also after a task panicked while holding it (the state stays
/// consistent: every update is a single assignment or a transport call).
pub(crate) fn lock(m: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The transport's errors as the `io::Error`s tokio's traits speak.
pub(crate) fn to_io(e: TransportError) -> io::Error {
    use io::ErrorKind as K;
    match e {
        TransportError::Io(e) => e,
        TransportError::UnknownConn(_) => io::Error::new(K::NotConnected, e),
        TransportError::ConnectionClosed(_) => io::Error::new(K::BrokenPipe, e),
        TransportError::AddrInUse(_) => io::Error::new(K::AddrInUse, e),
        TransportError::InvalidInput(_) | TransportError::UnknownListener(_) => io::Error::new(K::InvalidInput, e),
        e => io::Error::other(e),
    }
}
