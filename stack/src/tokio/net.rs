//! [`Net`]: the handle the application opens listeners and connections with.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::driver::Driver;
use super::shared::{lock, to_io, ListenState, Shared};
use super::stream::{ConnectFuture, TcpListener};
use crate::transport::Transport;

/// A handle on a transport run by a [`Driver`]: opens listeners and connections. Cheap to
/// clone; all clones, streams and listeners share the one transport.
#[derive(Clone)]
pub struct Net {
    pub(crate) inner: Arc<Mutex<Shared>>,
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
    pub fn new<T: Transport + Send + 'static>(mut t: T) -> io::Result<(Net, Driver)> {
        // Answers are written a few task hops after their request is taken in: the ACK waits
        // for them rather than leave alone (a frame and a TX kick of its own).
        t.set_ack_delay(Some(super::ACK_DELAY));
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

    /// Opens a connection (to an IPv6 address where the transport connects over IPv6:
    /// the kernel backend); the future resolves once it is established (or fails with
    /// `ConnectionRefused` if the transport reports it closed first).
    pub fn connect(&self, addr: impl Into<SocketAddr>) -> ConnectFuture {
        let addr = addr.into();
        let r = {
            let mut sh = lock(&self.inner);
            let r = sh.check().and_then(|()| sh.t.connect_ip(addr).map_err(to_io));
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
