//! Completions: each one the ring posts becomes a change of a connection's state and, where
//! the application must act, an [`Event`].

use io_uring::cqueue;
use io_uring::{opcode, types};

use super::conn::{Conn, ShutWrite, State};
use super::{op_of, user_data, Op, UringTransport};
use crate::sockets;
use crate::transport::{ConnId, Event};

impl UringTransport {
    /// Takes every completion the ring holds.
    pub(super) fn reap(&mut self, events: &mut Vec<Event>) {
        loop {
            // One completion at a time: handling one may push submissions, which needs the
            // ring, so the completion queue's borrow must end first.
            let Some(cqe) = self.ring.completion().next() else { break };
            self.stats.completions += 1;
            let (ud, res, flags) = (cqe.user_data(), cqe.result(), cqe.flags());
            let id = ConnId(ud as u32);
            match op_of(ud) {
                Some(Op::Recv) => self.on_recv(id, res, flags, events),
                Some(Op::Send) => self.on_send(id, res),
                Some(Op::Accept) => self.on_accept(ud as u32 as usize, res, flags, events),
                Some(Op::Connect) => self.on_connect(id, res, events),
                Some(Op::PollOut) => {
                    if let Some(c) = self.conns.get_mut(id) {
                        c.send_blocked = false;
                        self.mark_dirty(id);
                    }
                }
                Some(Op::Wake) => {
                    let mut buf = [0u8; 8];
                    // SAFETY: reads at most 8 bytes into a live 8-byte buffer (the timerfd's
                    // expiry count; non-blocking).
                    unsafe { libc::read(std::os::fd::AsRawFd::as_raw_fd(&self.core.fd()), buf.as_mut_ptr().cast(), 8) };
                    self.core.take();
                    if !cqueue::more(flags) {
                        self.wake_armed = false;
                    }
                }
                Some(Op::Quiet) => {
                    // ENOENT, EALREADY: a cancel found nothing left to cancel; ECANCELED: the
                    // NOP behind a short send.
                    if res < 0 && ![-libc::ENOENT, -libc::EALREADY, -libc::ECANCELED].contains(&res) {
                        tracing::debug!(error = %std::io::Error::from_raw_os_error(-res), "uring backend: a cancel, close or shutdown failed");
                    }
                }
                None => tracing::warn!(user_data = ud, "uring backend: a completion of no known request"),
            }
        }
    }

    fn on_recv(&mut self, id: ConnId, res: i32, flags: u32, events: &mut Vec<Event>) {
        let bid = cqueue::buffer_select(flags);
        if bid.is_some() {
            self.bufs.taken();
        }
        let more = cqueue::more(flags);
        let hold = self.cfg.recv_hold;
        let Some(c) = self.conns.get_mut(id) else {
            // A receive of a connection already closed: only its buffer matters.
            if let Some(b) = bid {
                self.bufs.give(b);
            }
            return;
        };
        if !more {
            c.recv_armed = false;
        }
        if res > 0 {
            let Some(b) = bid else { return };
            if c.state == State::Closing {
                self.bufs.give(b);
                return;
            }
            c.held.push_back((b, res as u32));
            c.held_bytes += res as usize;
            notify(c, id, events);
            if c.held_bytes > hold {
                // The application reads slower than the peer sends: its bytes move out of
                // the shared buffer ring (the other connections keep receiving), and its
                // receive stops until it has drained (TCP's window then holds the peer).
                while let Some((bid, len)) = c.held.pop_front() {
                    c.spill.extend_from_slice(self.bufs.bytes(bid, len));
                    self.bufs.give(bid);
                }
                let pause = c.recv_armed && !c.recv_paused;
                c.recv_paused = true;
                if pause {
                    let e = opcode::AsyncCancel::new(user_data(Op::Recv, id.0))
                        .build()
                        .flags(io_uring::squeue::Flags::SKIP_SUCCESS)
                        .user_data(user_data(Op::Quiet, 3));
                    self.push(e);
                }
            } else if !more && !c.recv_paused {
                self.queue_rearm(id);
            }
            return;
        }
        if let Some(b) = bid {
            self.bufs.give(b);
        }
        match -res {
            // The buffer ring ran dry: armed again when buffers are back.
            libc::ENOBUFS => {
                self.stats.no_buffers += 1;
                if c.state == State::Open {
                    self.queue_rearm(id);
                }
            }
            // Cancelled: a pause (armed again by `recv`, or here if `recv` already drained
            // while the cancel was on its way) or a close.
            libc::ECANCELED => {
                if c.recv_paused && c.held_bytes <= hold {
                    c.recv_paused = false;
                }
                if c.state == State::Open && !c.recv_paused && !c.eof {
                    self.queue_rearm(id);
                }
            }
            // The peer's FIN. A connection the application closed still sends its rest.
            0 => {
                c.eof = true;
                if c.state != State::Closing {
                    notify(c, id, events);
                }
            }
            e => {
                tracing::debug!(?id, error = %std::io::Error::from_raw_os_error(e), "uring backend: receive failed, closing");
                c.eof = true;
                c.can_send = false;
                if c.state == State::Closing {
                    // Reset: nothing more will leave. A send in the ring finishes it instead.
                    if !c.send_in_ring {
                        self.finish_close(id);
                    }
                } else {
                    notify(c, id, events);
                }
            }
        }
    }

    fn on_send(&mut self, id: ConnId, res: i32) {
        let Some(c) = self.conns.get_mut(id) else { return };
        c.send_in_ring = false;
        if res >= 0 || res == -libc::EAGAIN {
            let n = (res.max(0) as usize).min(c.out.len());
            if n == c.out.len() {
                c.out.clear();
                std::mem::swap(&mut c.out, &mut c.more);
            } else {
                // The socket's buffer is full (a short send, or none at all): the rest waits
                // for room.
                c.out.drain(..n);
                c.out.append(&mut c.more);
                c.send_blocked = true;
                self.stats.short_sends += 1;
                let e = opcode::PollAdd::new(types::Fd(c.raw()), libc::POLLOUT as u32).build().user_data(user_data(Op::PollOut, id.0));
                self.push(e);
                return;
            }
        } else {
            tracing::debug!(?id, error = %std::io::Error::from_raw_os_error(-res), "uring backend: send failed, closing");
            c.can_send = false;
            c.out.clear();
            c.more.clear();
            if c.state == State::Closing {
                self.finish_close(id);
            } else {
                self.report_closed(id);
            }
            return;
        }
        let room = c.queued() < self.cfg.send_buffer;
        if !c.out.is_empty() {
            self.mark_dirty(id);
        } else if c.state == State::Closing {
            self.finish_close(id);
            return;
        } else if c.shut_write == ShutWrite::Pending {
            self.push_shutdown(id);
        }
        if let Some(c) = self.conns.get_mut(id) {
            if c.write_blocked && room && c.state == State::Open {
                c.write_blocked = false;
                self.pending.push(Event::Writable(id));
            }
        }
    }

    fn on_accept(&mut self, index: usize, res: i32, flags: u32, events: &mut Vec<Event>) {
        let Some(l) = self.listeners.get_mut(index) else { return };
        if !cqueue::more(flags) {
            l.armed = false;
        }
        if l.closed {
            // Shut by `unlisten`: its last completions are an error, or a connection that
            // raced the shutdown, which is closed unserved.
            if res >= 0 {
                // SAFETY: the accepted descriptor is ours, and nothing else holds it.
                drop(unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(res) });
            }
            return;
        }
        if res < 0 {
            match -res {
                // Cancelled (the drop), or one peer's connection gone before it was taken:
                // the next accept is armed again at once if this one stopped.
                libc::ECANCELED | libc::ECONNABORTED | libc::EINTR => {}
                e => {
                    // Out of descriptors or memory: retry in 10 ms rather than spin, and say
                    // so at most once a second.
                    let now = std::time::Instant::now();
                    if self.accept_warned.is_none_or(|t| now.duration_since(t) >= std::time::Duration::from_secs(1)) {
                        self.accept_warned = Some(now);
                        tracing::warn!(error = %std::io::Error::from_raw_os_error(e), "uring backend: accept failed; retrying in 10 ms");
                    }
                    self.accept_backoff = Some(now + std::time::Duration::from_millis(10));
                }
            }
            return;
        }
        // SAFETY: the completion hands this side a new descriptor that nobody else owns.
        let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(res) };
        let peer = sockets::peer_of(std::os::fd::AsRawFd::as_raw_fd(&fd)).ok().flatten();
        match self.conns.insert(Conn::new(fd, peer, State::Open)) {
            Ok(id) => {
                self.arm_recv(id);
                events.push(Event::Accepted { listener: crate::ListenerId(index as u32), conn: id });
            }
            Err(e) => tracing::warn!(error = %e, "uring backend: dropping accepted connection"),
        }
    }

    fn on_connect(&mut self, id: ConnId, res: i32, events: &mut Vec<Event>) {
        let Some(c) = self.conns.get_mut(id) else { return };
        c.connect_addr = None;
        if c.state == State::Closing {
            self.finish_close(id);
            return;
        }
        if res < 0 {
            c.can_send = false;
            c.eof = true;
            c.state = State::Open;
            self.report_closed(id);
            return;
        }
        c.state = State::Open;
        events.push(Event::Connected(id));
        self.arm_recv(id);
    }
}

/// Reports `Readable` unless it was and `recv` has not drained since.
fn notify(c: &mut Conn, id: ConnId, events: &mut Vec<Event>) {
    if !c.notified {
        c.notified = true;
        events.push(Event::Readable(id));
    }
}
