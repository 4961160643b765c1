//! The `Transport` calls of the io_uring backend: what the application asks, done on the
//! connections' state and the submission queue (the kernel hears of it at the next enter).

use std::net::SocketAddrV4;
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use io_uring::{opcode, types};

use super::conn::{Conn, ShutWrite, State};
use super::{conn_of, user_data, Listener, Op, UringTransport};
use crate::sockets;
use crate::transport::{ConnId, Event, ListenerId, Transport, TransportError};
use crate::wake::Waker;

impl Transport for UringTransport {
    fn listen(&mut self, port: u16) -> Result<ListenerId, TransportError> {
        let fd = sockets::listener(SocketAddrV4::new(self.cfg.bind, port), self.cfg.reuse_port, false)?;
        // Accepted sockets inherit it: no setsockopt per connection.
        sockets::set_int_opt(fd.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)?;
        sockets::listen(fd.as_raw_fd())?;
        let index = self.listeners.len();
        self.listeners.push(Listener { fd, armed: false, closed: false });
        self.arm_accept(index);
        Ok(ListenerId(index as u32))
    }

    fn unlisten(&mut self, listener: ListenerId) {
        let Some(l) = self.listeners.get_mut(listener.0 as usize) else { return };
        l.closed = true;
        // shutdown(2) closes a listening socket (SYNs get a RST) and ends its multishot
        // accept, whose last completion `on_accept` then ignores.
        // SAFETY: shutdown takes no pointers; the descriptor is the listener's own.
        unsafe { libc::shutdown(l.fd.as_raw_fd(), libc::SHUT_RDWR) };
    }

    fn connect(&mut self, addr: SocketAddrV4) -> Result<ConnId, TransportError> {
        let fd = sockets::tcp_socket(false)?;
        sockets::bind_source(fd.as_raw_fd(), self.cfg.bind, self.cfg.sources, self.connects)?;
        self.connects = self.connects.wrapping_add(1);
        sockets::set_int_opt(fd.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)?;
        let mut c = Conn::new(fd, Some(addr), State::Connecting);
        let sa = Box::new(sockets::sockaddr_in(addr).0);
        let (ptr, raw) = (&*sa as *const libc::sockaddr_in, c.raw());
        c.connect_addr = Some(sa);
        let id = self.conns.insert(c)?;
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let e = opcode::Connect::new(types::Fd(raw), ptr.cast(), len).build().user_data(user_data(Op::Connect, id.0));
        self.push(e);
        Ok(id)
    }

    fn poll(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> Result<(), TransportError> {
        self.start()?;
        self.expire_closing();
        let had = !self.pending.is_empty();
        events.append(&mut self.pending);
        self.rearm_all();
        self.push_sends();
        self.bufs.publish();
        let mut timeout = timeout;
        for t in [self.accept_backoff, self.closing_deadlines.front().map(|d| d.0)].into_iter().flatten() {
            let left = t.saturating_duration_since(Instant::now());
            timeout = Some(timeout.map_or(left, |d| d.min(left)));
        }
        let wait = !had && timeout != Some(Duration::ZERO) && !self.core.take();
        self.enter(wait, timeout)?;
        self.reap(events);
        Ok(())
    }

    fn recv(&mut self, id: ConnId, buf: &mut BytesMut) -> Result<usize, TransportError> {
        let c = self.conns.get_mut(id).filter(|c| c.state != State::Closing).ok_or(TransportError::UnknownConn(id))?;
        c.notified = false;
        let mut n = 0;
        if c.held_bytes > 0 {
            buf.reserve(c.held_bytes);
            // What a pause moved out of the buffer ring came first.
            buf.extend_from_slice(&c.spill);
            n += c.spill.len();
            c.spill.clear();
            while let Some((bid, len)) = c.held.pop_front() {
                buf.extend_from_slice(self.bufs.bytes(bid, len));
                self.bufs.give(bid);
                n += len as usize;
            }
            c.held_bytes = 0;
        }
        if c.eof {
            self.report_closed(id);
        } else if c.recv_paused && !c.recv_armed {
            c.recv_paused = false;
            self.queue_rearm(id);
        }
        Ok(n)
    }

    fn send(&mut self, id: ConnId, data: &[u8]) -> Result<usize, TransportError> {
        let cap = self.cfg.send_buffer;
        let c = self.conns.get_mut(id).filter(|c| c.state != State::Closing).ok_or(TransportError::UnknownConn(id))?;
        if c.state == State::Connecting {
            return Ok(0);
        }
        if !c.can_send || c.shut_write != ShutWrite::No {
            return Err(TransportError::ConnectionClosed(id));
        }
        let n = data.len().min(cap.saturating_sub(c.queued()));
        if n < data.len() {
            c.write_blocked = true;
        }
        if n == 0 {
            return Ok(0);
        }
        if c.send_in_ring {
            c.more.extend_from_slice(&data[..n]);
        } else {
            c.out.extend_from_slice(&data[..n]);
        }
        self.mark_dirty(id);
        Ok(n)
    }

    fn close(&mut self, id: ConnId) {
        let Some(c) = self.conns.get_mut(id).filter(|c| c.state != State::Closing) else { return };
        // An event queued for it but not yet delivered would name a dead id.
        self.pending.retain(|ev| conn_of(ev) != Some(id));
        if c.drained() || !c.can_send || c.state == State::Connecting {
            self.finish_close(id);
            return;
        }
        // The queued bytes still go out, then the FIN: finished in the send's completion, or
        // given up (reset) at the deadline. What it received and nobody will read goes back.
        c.state = State::Closing;
        c.spill = Vec::new();
        c.held_bytes = 0;
        while let Some((bid, _)) = c.held.pop_front() {
            self.bufs.give(bid);
        }
        self.closing += 1;
        self.closing_deadlines.push_back((Instant::now() + self.cfg.close_linger, id));
    }

    fn flush(&mut self) -> Result<(), TransportError> {
        // The sends go into the ring with the next poll's enter, which also waits: one
        // system call for both.
        Ok(())
    }

    fn kick(&mut self) -> Result<(), TransportError> {
        self.start()?;
        self.expire_closing();
        self.rearm_all();
        self.push_sends();
        self.bufs.publish();
        self.enter(false, None)?;
        // The sends' completions (and whatever came with them) are read by the next poll,
        // which the completions' eventfd signal brings.
        Ok(())
    }

    fn shutdown_write(&mut self, id: ConnId) -> Result<(), TransportError> {
        let c = self.conns.get_mut(id).filter(|c| c.state != State::Closing).ok_or(TransportError::UnknownConn(id))?;
        if c.state != State::Open || !c.can_send {
            return Err(TransportError::ConnectionClosed(id));
        }
        if c.shut_write == ShutWrite::No {
            c.shut_write = ShutWrite::Pending;
            if c.drained() {
                self.push_shutdown(id);
            }
        }
        Ok(())
    }

    fn recv_drains(&self) -> bool {
        true
    }

    /// An eventfd the kernel signals with each completion (registered on first use; an
    /// edge on every signal, so the loop need not read it).
    fn wait_fd(&self) -> Option<RawFd> {
        self.eventfd
            .get_or_init(|| match self.register_eventfd() {
                Ok(fd) => Some(fd),
                Err(e) => {
                    tracing::warn!(error = %e, "uring backend: no eventfd for an outside loop: it polls on a timer");
                    None
                }
            })
            .as_ref()
            .map(|f| f.as_raw_fd())
    }

    fn next_wake(&mut self) -> Option<Duration> {
        let ready = !self.pending.is_empty() || !self.ring.completion().is_empty();
        if ready {
            Some(Duration::ZERO)
        } else {
            self.accept_backoff.map(|t| t.saturating_duration_since(Instant::now()))
        }
    }

    fn waker(&mut self) -> Result<Waker, TransportError> {
        Ok(Waker::new(Arc::clone(&self.core)))
    }

    fn closing(&self) -> usize {
        self.closing
    }

    fn local_addr(&self, listener: ListenerId) -> Option<SocketAddrV4> {
        let l = self.listeners.get(listener.0 as usize)?;
        let std = std::mem::ManuallyDrop::new(
            // SAFETY: a borrowed view of the listener's descriptor; ManuallyDrop never closes it.
            unsafe { std::net::TcpListener::from_raw_fd(l.fd.as_raw_fd()) },
        );
        crate::sockets::listener_v4(std.local_addr().ok()?)
    }

    fn peer_addr(&self, conn: ConnId) -> Option<SocketAddrV4> {
        self.conns.get(conn).filter(|c| c.state != State::Closing)?.peer
    }

    fn name(&self) -> &'static str {
        "uring"
    }
}

