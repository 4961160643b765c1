//! What the driver, the streams and [`Net`](super::Net) share: the transport and every
//! connection's and listener's state behind one lock, and the helpers around it.

use std::collections::VecDeque;
use std::io;
use std::sync::{Mutex, MutexGuard};
use std::task::Waker;

use bytes::BytesMut;

use crate::transport::{ConnId, Event, ListenerId, Transport, TransportError};

/// Connections waiting in a listener's queue for `accept`; beyond it new ones are closed at
/// once (an application that stopped accepting must not make the stack hold sockets forever).
const ACCEPT_BACKLOG: usize = 1024;
/// A received-bytes buffer larger than this is given back once the connection goes idle.
pub(super) const RX_KEEP: usize = 64 * 1024;

/// Everything the driver and the streams share. One lock: in a current-thread runtime it is
/// never contended.
pub(crate) struct Shared {
    pub(crate) t: Box<dyn Transport + Send>,
    /// Per connection, indexed by [`ConnId::slot`].
    pub(super) conns: Vec<Option<ConnState>>,
    /// Per listener, indexed by [`ListenerId`].
    pub(super) listeners: Vec<ListenState>,
    pub(super) driver: Option<Waker>,
    /// A wake-up of the driver is already on its way: further ones are not needed.
    pub(super) driver_woken: bool,
    /// A `recv` found nothing: it may have queued `Closed`, which only `poll` reports.
    pub(crate) poll_owed: bool,
    /// The driver stopped on an error: every operation fails from now on.
    pub(super) failed: bool,
}

/// Connection `id`'s state in `conns`, if it is still that connection's. A free function so a
/// caller can hold it next to `Shared::t` (disjoint fields).
pub(crate) fn conn_in(conns: &mut [Option<ConnState>], id: ConnId) -> Option<&mut ConnState> {
    conns.get_mut(id.slot())?.as_mut().filter(|c| c.id == id)
}

pub(crate) struct ConnState {
    pub(super) id: ConnId,
    /// Received, not yet read by the application.
    pub(super) rx: BytesMut,
    pub(super) read: Option<Waker>,
    pub(super) write: Option<Waker>,
    /// `Closed` was reported: a `recv` that returns nothing now means EOF.
    pub(super) eof: bool,
    pub(super) connected: bool,
    pub(super) shut: bool,
}

pub(super) struct ListenState {
    pub(super) queue: VecDeque<ConnId>,
    pub(super) waker: Option<Waker>,
    pub(super) open: bool,
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

    pub(super) fn insert_conn(&mut self, id: ConnId, connected: bool) {
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
    pub(super) fn dispatch(&mut self, events: &[Event]) {
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
    pub(super) fn fail(&mut self) {
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
        // New connections are refused from now on, as after tokio's own listener is dropped
        // (before, the transport accepted them and the adapter closed each at once: a client
        // saw a connection with an empty reply).
        self.t.unlisten(lid);
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
pub(super) fn register(slot: &mut Option<Waker>, w: &Waker) {
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
