//! Listener and stream: what tokio servers take.

use std::future::Future;
use std::io;
use std::net::{SocketAddr, SocketAddrV4};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use ::tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use bytes::Buf;

use super::shared::{conn_in, lock, register, to_io, Shared, RX_KEEP};
use crate::transport::{ConnId, ListenerId};

/// A listening port on the transport; `accept` hands out [`TcpStream`]s. Dropping it closes
/// the connections still queued and any that arrive later.
pub struct TcpListener {
    inner: Arc<Mutex<Shared>>,
    lid: ListenerId,
    addr: SocketAddrV4,
}

impl TcpListener {
    pub(super) fn new(inner: Arc<Mutex<Shared>>, lid: ListenerId, addr: SocketAddrV4) -> Self {
        TcpListener { inner, lid, addr }
    }

    /// The next inbound connection and its peer.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        std::future::poll_fn(|cx| self.poll_accept(cx)).await
    }

    /// `accept` for hand-written futures.
    pub fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(TcpStream, SocketAddr)>> {
        let mut sh = lock(&self.inner);
        if let Err(e) = sh.check() {
            return Poll::Ready(Err(e));
        }
        let l = &mut sh.listeners[self.lid.0 as usize];
        match l.queue.pop_front() {
            Some(id) => {
                let peer = sh.t.peer_socket_addr(id);
                let stream = TcpStream { inner: self.inner.clone(), id, local: self.addr, peer };
                Poll::Ready(Ok((stream, peer.unwrap_or(SocketAddr::V4(SocketAddrV4::new(0.into(), 0))))))
            }
            None => {
                register(&mut l.waker, cx.waker());
                Poll::Pending
            }
        }
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(SocketAddr::V4(self.addr))
    }

    /// The accepted connections as a stream, for `tonic`'s `serve_with_incoming`.
    #[cfg(feature = "tonic")]
    pub fn into_incoming(self) -> Incoming {
        Incoming(self)
    }
}

impl Drop for TcpListener {
    fn drop(&mut self) {
        lock(&self.inner).close_listener(self.lid);
    }
}

/// A connection on the transport. Reads see EOF after the peer's FIN; `shutdown` sends a
/// FIN and reading goes on; dropping it closes the connection (queued data still goes out).
pub struct TcpStream {
    inner: Arc<Mutex<Shared>>,
    id: ConnId,
    local: SocketAddrV4,
    peer: Option<SocketAddr>,
}

impl TcpStream {
    /// The remote address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.peer.ok_or_else(|| io::ErrorKind::NotConnected.into())
    }

    /// The local address (for a stream from `connect`, the unspecified address with port 0:
    /// the transport does not say which ephemeral port it chose).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(SocketAddr::V4(self.local))
    }
}

fn gone() -> io::Error {
    io::ErrorKind::NotConnected.into()
}

impl AsyncRead for TcpStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let mut guard = lock(&self.inner);
        let sh = &mut *guard;
        if let Err(e) = sh.check() {
            return Poll::Ready(Err(e));
        }
        let Some(cs) = conn_in(&mut sh.conns, self.id) else {
            return Poll::Ready(Err(gone()));
        };
        let mut took = false;
        if cs.rx.is_empty() {
            // Only an empty buffer takes more: at most one recv's worth (the socket buffer)
            // waits here, however slowly the application reads.
            cs.rx.clear();
            match sh.t.recv(self.id, &mut cs.rx) {
                Ok(0) => {
                    if cs.eof {
                        return Poll::Ready(Ok(()));
                    }
                    if cs.rx.capacity() > RX_KEEP {
                        cs.rx = bytes::BytesMut::new();
                    }
                    register(&mut cs.read, cx.waker());
                    sh.poll_owed = true;
                    sh.wake_driver();
                    return Poll::Pending;
                }
                Ok(_) => took = true,
                Err(e) => return Poll::Ready(Err(to_io(e))),
            }
        }
        let n = cs.rx.len().min(buf.remaining());
        buf.put_slice(&cs.rx[..n]);
        cs.rx.advance(n);
        if took {
            // The window opened: the driver sends the update.
            sh.wake_driver();
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for TcpStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let mut guard = lock(&self.inner);
        let sh = &mut *guard;
        if let Err(e) = sh.check() {
            return Poll::Ready(Err(e));
        }
        let Some(cs) = conn_in(&mut sh.conns, self.id) else {
            return Poll::Ready(Err(gone()));
        };
        match sh.t.send(self.id, data) {
            Ok(0) => {
                if cs.shut || (cs.eof && !cs.connected) {
                    return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
                }
                register(&mut cs.write, cx.waker());
                // A full buffer has frames to push: make sure the driver knows.
                sh.wake_driver();
                Poll::Pending
            }
            Ok(n) => {
                sh.wake_driver();
                Poll::Ready(Ok(n))
            }
            Err(e) => Poll::Ready(Err(to_io(e))),
        }
    }

    /// Every write is handed to the transport at once and the driver sends it on its next
    /// pass (woken by the write): nothing to do here.
    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// Sends FIN after what was written; reading goes on until the peer's FIN.
    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut guard = lock(&self.inner);
        let sh = &mut *guard;
        if let Err(e) = sh.check() {
            return Poll::Ready(Err(e));
        }
        let Some(cs) = conn_in(&mut sh.conns, self.id) else {
            return Poll::Ready(Err(gone()));
        };
        if std::mem::replace(&mut cs.shut, true) {
            return Poll::Ready(Ok(()));
        }
        let r = sh.t.shutdown_write(self.id);
        sh.wake_driver();
        match r {
            // Reset or never connected: there is nothing left to half-close.
            Ok(()) | Err(crate::TransportError::ConnectionClosed(_)) => Poll::Ready(Ok(())),
            Err(e) => Poll::Ready(Err(to_io(e))),
        }
    }
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        lock(&self.inner).drop_conn(self.id);
    }
}

/// [`super::Net::connect`]'s future: the stream once the transport reports it connected.
pub struct ConnectFuture {
    inner: Arc<Mutex<Shared>>,
    state: Option<io::Result<ConnId>>,
    peer: SocketAddr,
}

impl ConnectFuture {
    pub(super) fn new(inner: Arc<Mutex<Shared>>, r: io::Result<ConnId>, peer: SocketAddr) -> Self {
        ConnectFuture { inner, state: Some(r), peer }
    }
}

impl Future for ConnectFuture {
    type Output = io::Result<TcpStream>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<TcpStream>> {
        let id = match self.state.take() {
            None => panic!("ConnectFuture polled after it completed"),
            Some(Err(e)) => return Poll::Ready(Err(e)),
            Some(Ok(id)) => id,
        };
        let mut guard = lock(&self.inner);
        let sh = &mut *guard;
        if let Err(e) = sh.check() {
            return Poll::Ready(Err(e));
        }
        let Some(cs) = sh.conn(id) else { return Poll::Ready(Err(gone())) };
        if cs.connected {
            drop(guard);
            let stream = TcpStream { inner: self.inner.clone(), id, local: SocketAddrV4::new(0.into(), 0), peer: Some(self.peer) };
            return Poll::Ready(Ok(stream));
        }
        if cs.eof {
            sh.drop_conn(id);
            return Poll::Ready(Err(io::ErrorKind::ConnectionRefused.into()));
        }
        register(&mut cs.write, cx.waker());
        drop(guard);
        self.state = Some(Ok(id));
        Poll::Pending
    }
}

impl Drop for ConnectFuture {
    /// Given up before it connected: the connection is closed.
    fn drop(&mut self) {
        if let Some(Ok(id)) = self.state.take() {
            lock(&self.inner).drop_conn(id);
        }
    }
}

#[cfg(feature = "axum")]
impl axum::serve::Listener for TcpListener {
    type Io = TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (TcpStream, SocketAddr) {
        loop {
            match TcpListener::accept(self).await {
                Ok(x) => return x,
                // Only a closed stream or a failed transport get here: back off as axum's
                // own listener does on accept errors, rather than spin.
                Err(e) => {
                    tracing::error!("accept: {e}");
                    ::tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        TcpListener::local_addr(self)
    }
}

#[cfg(feature = "tonic")]
impl tonic::transport::server::Connected for TcpStream {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        tonic::transport::server::TcpConnectInfo {
            local_addr: self.local_addr().ok(),
            remote_addr: self.peer_addr().ok(),
        }
    }
}

/// A [`TcpListener`]'s connections as a `Stream`, for `tonic`'s `serve_with_incoming`.
#[cfg(feature = "tonic")]
pub struct Incoming(TcpListener);

#[cfg(feature = "tonic")]
impl futures_core::Stream for Incoming {
    type Item = io::Result<TcpStream>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_accept(cx).map(|r| Some(r.map(|(s, _)| s)))
    }
}
