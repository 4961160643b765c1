//! [`Transport`](crate::transport::Transport) over the kernel's TCP through io_uring (feature `uring`): the kernel TCP a
//! performance-minded user would pick, as a baseline for the xsk backend and as a backend of
//! its own.
//!
//! How a pass goes: `poll` puts the sends the application queued since the last pass into the
//! submission queue, then makes one `io_uring_enter` that both submits them and waits for the
//! next completion. Every listener has a multishot accept in the ring and every connection a
//! multishot receive into a provided-buffer ring (`bufring.rs`); their completions become
//! [`Event`]s. `recv` copies a connection's received buffers out and gives them back to the
//! kernel. Sends are made with `MSG_DONTWAIT`, so the kernel completes each one while it
//! submits it, in the same call: the wait counts those completions and sleeps for one more
//! (a request, a new connection, a wake). A send someone waits on (the application's
//! `Writable`, a close) is not counted, so its completion ends the wait; a send that the
//! socket's buffer cuts short fails a NOP linked behind it (`MSG_WAITALL`), whose completion
//! ends the wait too, and the rest waits for POLLOUT in the ring. Nothing per request
//! allocates, and at light load one request costs one system call.
//!
//! The ring is set up with single-issuer and deferred task running where the kernel has them
//! (Linux 6.1), and needs Linux 6.0 (multishot receive with provided buffers): an older kernel
//! gets an error that says so. [`UringConfig::busy_poll`] registers NAPI busy polling with
//! the ring (Linux 6.9).
//!
//! One transport belongs to one thread: the ring is single-issuer, enabled by the first
//! `poll` (or `kick`), and any other thread's poll gets an error. It may be made on one
//! thread and moved to the one that polls it; drop it there too, or its receive buffers
//! (`recv_buffers` times `recv_buffer_size`) are leaked: only that thread can cancel what the
//! ring still has armed into them. Several threads each use their own, with
//! [`UringConfig::reuse_port`] to share a port.
//!
//! `close` sends what was queued, then cancels what the ring has on the socket and closes it
//! in the ring: the FIN leaves when the next `poll` that waits has run the cancel. A closed
//! connection whose peer never takes its last bytes is reset after
//! [`UringConfig::close_linger`]. Received bytes wait in the shared buffer ring until `recv`;
//! a connection that holds more than [`UringConfig::recv_hold`] unread moves them into memory
//! of its own and stops receiving until drained, so a reader that stops does not starve the
//! others of buffers.

mod bufring;
mod calls;
mod complete;
mod config;
mod conn;
mod setup;

use std::collections::VecDeque;
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_uring::{opcode, squeue, types, IoUring};

use self::bufring::BufRing;
use self::conn::{Conn, ShutWrite, State};
pub use self::config::{UringBusyPoll, UringConfig, UringStats};
pub use self::setup::UringFeatures;
use crate::transport::{ConnId, ConnSlab, Event, TransportError};
use crate::wake::Core;

/// The buffer group of the receive buffer ring.
const BUF_GROUP: u16 = 0;

struct Listener {
    fd: OwnedFd,
    /// Its multishot accept is in the ring.
    armed: bool,
    /// `unlisten` shut it: its accept is not armed again.
    closed: bool,
}

/// The io_uring backend. See the module docs.
pub struct UringTransport {
    ring: IoUring,
    /// Unmapped in `drop` only after every request was cancelled (leaked otherwise).
    bufs: ManuallyDrop<BufRing>,
    /// The thread whose first poll enabled the ring (a single-issuer ring is that thread's).
    started: Option<libc::pid_t>,
    features: UringFeatures,
    cfg: UringConfig,
    conns: ConnSlab<Conn>,
    listeners: Vec<Listener>,
    /// Events found outside a completion (`Closed` from `recv`/`send`): the next `poll`
    /// returns them at once.
    pending: Vec<Event>,
    /// Connections with bytes to push at the next poll.
    dirty: Vec<ConnId>,
    /// Connections whose receive must be armed again.
    rearm: Vec<ConnId>,
    /// Sends submitted by the coming enter (each completes during it).
    sends_queued: usize,
    /// Connections the application closed that still send.
    closing: usize,
    /// When each closing connection is given up (reset) if its peer never takes the rest.
    closing_deadlines: VecDeque<(Instant, ConnId)>,
    /// The last warning of a failed accept (at most one a second).
    accept_warned: Option<Instant>,
    /// The waker's timerfd, polled by a multishot poll in the ring.
    core: Arc<Core>,
    wake_armed: bool,
    /// An eventfd the kernel signals on each completion, for a loop that sleeps elsewhere:
    /// made and registered on the first `wait_fd` (None inside: that failed, and was said).
    eventfd: std::cell::OnceCell<Option<OwnedFd>>,
    /// A failed accept is not retried before this instant (no spin on EMFILE).
    accept_backoff: Option<Instant>,
    connects: u32,
    /// Memory a submitted request may still name after its connection went (a send's bytes,
    /// a connect's address), freed after the next enter has consumed the queue.
    retired: Vec<Vec<u8>>,
    // Boxed: a submitted connect points at the address, which must not move when the Vec grows.
    #[allow(clippy::vec_box)]
    retired_addrs: Vec<Box<libc::sockaddr_in>>,
    stats: UringStats,
}

/// What a completion belongs to: the top byte of its user data (the low 32 bits hold the
/// connection id or the listener's index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Op {
    Accept = 1,
    Recv,
    Send,
    Connect,
    PollOut,
    Wake,
    /// Cancels, closes, shutdowns: only a failure posts a completion, which is logged.
    Quiet,
}

const OP_SHIFT: u32 = 56;

fn user_data(op: Op, id: u32) -> u64 {
    (op as u64) << OP_SHIFT | u64::from(id)
}

fn op_of(ud: u64) -> Option<Op> {
    Some(match (ud >> OP_SHIFT) as u8 {
        1 => Op::Accept,
        2 => Op::Recv,
        3 => Op::Send,
        4 => Op::Connect,
        5 => Op::PollOut,
        6 => Op::Wake,
        7 => Op::Quiet,
        _ => return None,
    })
}

impl UringTransport {
    /// A ring for one thread.
    ///
    /// # Errors
    /// A kernel without what the backend needs (before 6.0), io_uring disabled for the
    /// process, or too little locked memory for the ring: each error says which and what to do.
    pub fn new(cfg: UringConfig) -> Result<UringTransport, TransportError> {
        let (ring, bufs, features) = setup::build(&cfg)?;
        let mut t = UringTransport {
            ring,
            bufs: ManuallyDrop::new(bufs),
            started: None,
            features,
            cfg,
            conns: ConnSlab::new(),
            listeners: Vec::new(),
            pending: Vec::new(),
            dirty: Vec::new(),
            rearm: Vec::new(),
            sends_queued: 0,
            closing: 0,
            closing_deadlines: VecDeque::new(),
            accept_warned: None,
            core: Core::new()?,
            wake_armed: false,
            eventfd: std::cell::OnceCell::new(),
            accept_backoff: None,
            connects: 0,
            retired: Vec::new(),
            retired_addrs: Vec::new(),
            stats: UringStats::default(),
        };
        t.arm_wake();
        Ok(t)
    }

    /// What this kernel granted the ring.
    pub fn features(&self) -> &UringFeatures {
        &self.features
    }

    /// The ring's counters.
    pub fn stats(&self) -> UringStats {
        self.stats
    }

    /// Connections open (closing ones included).
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Puts `e` in the submission queue, submitting what is there first if it is full.
    fn push(&mut self, e: squeue::Entry) {
        for _ in 0..64 {
            // SAFETY: every entry pushed names memory that outlives its request: a send reads
            // a connection's `out`, which is neither grown nor freed while `send_in_ring`
            // (Conn's invariant, kept until the send's completion; `retired` keeps it past a
            // close); a connect's address is boxed until its completion (`retired_addrs` past
            // a close); receives use the buffer ring, unmapped only after every request was
            // cancelled (drop).
            if unsafe { self.ring.submission().push(&e) }.is_ok() {
                return;
            }
            if !self.push_submit() {
                break;
            }
        }
        tracing::error!("uring backend: the submission queue stays full: a request was dropped");
    }

    /// Hands a full submission queue to the kernel (from the polling thread: a ring not yet
    /// started is started here); a full completion queue (EBUSY) is drained into the pending
    /// events first. False if the ring cannot be used from this thread.
    fn push_submit(&mut self) -> bool {
        if self.start().is_err() {
            return false;
        }
        self.stats.enters += 1;
        if let Err(err) = self.ring.submit() {
            if err.raw_os_error() == Some(libc::EBUSY) {
                let mut evs = std::mem::take(&mut self.pending);
                self.reap(&mut evs);
                self.pending = evs;
            } else if err.raw_os_error() != Some(libc::EINTR) {
                tracing::warn!(error = %err, "uring backend: submitting a full queue failed");
            }
        }
        true
    }

    /// Enables the ring on the polling thread at its first poll, and registers the ring's fd
    /// with that thread; refuses every other thread after that (a single-issuer ring).
    fn start(&mut self) -> Result<(), TransportError> {
        let tid = thread_id();
        match self.started {
            Some(t) if t == tid => return Ok(()),
            Some(_) => {
                return Err(TransportError::InvalidInput(
                    "a uring transport is polled by one thread: the one that first polled it (its ring is single-issuer)",
                ))
            }
            None => {}
        }
        self.ring.submitter().register_enable_rings()?;
        self.started = Some(tid);
        match self.ring.submitter().register_ring_fd() {
            Ok(_) => self.features.registered_ring = true,
            Err(e) => self.features.missing.push(format!("ring fd not registered ({e})")),
        }
        tracing::info!("uring backend: {}", self.features);
        Ok(())
    }

    fn arm_wake(&mut self) {
        let fd = self.core.fd().as_raw_fd();
        let e = opcode::PollAdd::new(types::Fd(fd), libc::POLLIN as u32).multi(true).build().user_data(user_data(Op::Wake, 0));
        self.push(e);
        self.wake_armed = true;
    }

    fn arm_recv(&mut self, id: ConnId) {
        let Some(c) = self.conns.get_mut(id) else { return };
        c.recv_armed = true;
        let e = opcode::RecvMulti::new(types::Fd(c.raw()), BUF_GROUP).build().user_data(user_data(Op::Recv, id.0));
        self.push(e);
    }

    fn arm_accept(&mut self, index: usize) {
        let fd = self.listeners[index].fd.as_raw_fd();
        self.listeners[index].armed = true;
        let e = opcode::AcceptMulti::new(types::Fd(fd)).flags(libc::SOCK_CLOEXEC).build().user_data(user_data(Op::Accept, index as u32));
        self.push(e);
    }

    /// Puts each dirty connection's bytes into the ring (just before an enter: nothing may
    /// touch `out` between this and the kernel's reading of it but the completion).
    fn push_sends(&mut self) {
        let mut dirty = std::mem::take(&mut self.dirty);
        for id in dirty.drain(..) {
            let Some(c) = self.conns.get_mut(id) else { continue };
            c.dirty = false;
            if !c.can_send && c.state == State::Closing {
                // Reset while it was closing: nothing more will leave.
                self.finish_close(id);
                continue;
            }
            if c.send_in_ring || c.send_blocked || !c.can_send {
                continue;
            }
            if c.out.is_empty() {
                std::mem::swap(&mut c.out, &mut c.more);
            }
            if c.out.is_empty() {
                continue;
            }
            c.send_in_ring = true;
            // The application waits on this send's completion (Writable), or the transport
            // does (a close, a half-close): it must end the wait, so it is not counted.
            let quiet = !c.write_blocked && c.state == State::Open && c.shut_write == ShutWrite::No;
            let len = c.out.len().min(u32::MAX as usize) as u32;
            // MSG_DONTWAIT: the kernel completes the send while the enter submits it (a full
            // socket buffer fails it at once instead of waiting). MSG_WAITALL: a short send
            // counts as failed (with the bytes it sent as its result), which cancels the NOP
            // linked behind it: that second completion ends the wait, so the rest's POLLOUT
            // is armed now. A send that took everything skips the NOP's completion.
            let send = opcode::Send::new(types::Fd(c.raw()), c.out.as_ptr(), len)
                .flags(libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL | libc::MSG_WAITALL)
                .build()
                .flags(squeue::Flags::IO_LINK)
                .user_data(user_data(Op::Send, id.0));
            let nop = opcode::Nop::new().build().flags(squeue::Flags::SKIP_SUCCESS).user_data(user_data(Op::Quiet, 4));
            // Both in one batch: a link cut at the end of a submission would leave the NOP alone.
            let room = {
                let sq = self.ring.submission();
                sq.capacity() - sq.len()
            };
            if room < 2 {
                self.push_submit();
            }
            self.push(send);
            self.push(nop);
            if quiet {
                self.sends_queued += 1;
            }
            self.stats.sends += 1;
        }
        self.dirty = dirty;
    }

    /// Arms again the receives and accepts that stopped, where they can run.
    fn rearm_all(&mut self) {
        if !self.rearm.is_empty() && self.bufs.available() > 0 {
            let mut rearm = std::mem::take(&mut self.rearm);
            for id in rearm.drain(..) {
                let Some(c) = self.conns.get_mut(id) else { continue };
                c.rearm_queued = false;
                if c.state == State::Open && !c.recv_armed && !c.eof && !c.recv_paused {
                    self.stats.recv_rearms += 1;
                    self.arm_recv(id);
                }
            }
            self.rearm = rearm;
        }
        if self.accept_backoff.is_some_and(|t| Instant::now() < t) {
            return;
        }
        self.accept_backoff = None;
        for i in 0..self.listeners.len() {
            if !self.listeners[i].armed && !self.listeners[i].closed {
                self.arm_accept(i);
            }
        }
        if !self.wake_armed {
            self.arm_wake();
        }
    }

    fn queue_rearm(&mut self, id: ConnId) {
        if let Some(c) = self.conns.get_mut(id) {
            if !c.rearm_queued {
                c.rearm_queued = true;
                self.rearm.push(id);
            }
        }
    }

    fn mark_dirty(&mut self, id: ConnId) {
        if let Some(c) = self.conns.get_mut(id) {
            if !c.dirty {
                c.dirty = true;
                self.dirty.push(id);
            }
        }
    }

    /// Queues `Closed` for `id` once.
    fn report_closed(&mut self, id: ConnId) {
        if let Some(c) = self.conns.get_mut(id) {
            if c.state != State::Closing && !c.closed_reported {
                c.closed_reported = true;
                self.pending.push(Event::Closed(id));
            }
        }
    }

    /// Ends a connection the application closed (or a drop): its buffers go back, whatever the
    /// ring still has on its socket is cancelled, and the ring closes the socket (after the
    /// bytes already in it, a FIN).
    fn finish_close(&mut self, id: ConnId) {
        let Some(mut c) = self.conns.remove(id) else { return };
        if c.state == State::Closing {
            self.closing -= 1;
        }
        while let Some((bid, _)) = c.held.pop_front() {
            self.bufs.give(bid);
        }
        let fd = c.fd.into_raw_fd();
        if c.recv_armed || c.send_blocked || c.state == State::Connecting {
            let e = opcode::AsyncCancel2::new(types::CancelBuilder::fd(types::Fd(fd)).all())
                .build()
                .flags(squeue::Flags::SKIP_SUCCESS)
                .user_data(user_data(Op::Quiet, 0));
            self.push(e);
        }
        let e = opcode::Close::new(types::Fd(fd)).build().flags(squeue::Flags::SKIP_SUCCESS).user_data(user_data(Op::Quiet, 1));
        self.push(e);
        // A connect reads its address when it is submitted, a send its bytes while the enter
        // that submits it runs: kept until an enter has emptied the queue.
        if let Some(a) = c.connect_addr.take() {
            self.retired_addrs.push(a);
        }
        if c.send_in_ring {
            self.retired.push(std::mem::take(&mut c.out));
        }
    }

    /// One `io_uring_enter`: submits the queue and, with `wait`, sleeps until a completion
    /// beyond the sends' own (or `timeout`).
    fn enter(&mut self, wait: bool, timeout: Option<Duration>) -> Result<(), TransportError> {
        let sends = std::mem::take(&mut self.sends_queued);
        let (queued, taskrun) = {
            let mut sq = self.ring.submission();
            sq.sync();
            (sq.len(), sq.taskrun() || sq.cq_overflow())
        };
        if !wait && queued == 0 && !taskrun {
            return Ok(());
        }
        let want = if wait { sends + 1 } else { 0 };
        self.stats.enters += 1;
        let submitter = self.ring.submitter();
        let r = match timeout {
            Some(d) if wait => {
                // The kernel's timespec is signed: a day stands for any longer wait (a wait
                // may end early; the caller polls again).
                let ts = types::Timespec::from(d.min(Duration::from_secs(86_400)));
                submitter.submit_with_args(want, &types::SubmitArgs::new().timespec(&ts))
            }
            _ => submitter.submit_and_wait(want),
        };
        let r = match r {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN)) => Ok(()),
            Err(e) => Err(e.into()),
        };
        if (!self.retired.is_empty() || !self.retired_addrs.is_empty()) && self.ring.submission().is_empty() {
            self.retired.clear();
            self.retired_addrs.clear();
        }
        r
    }
}

impl UringTransport {
    /// An eventfd registered with the ring: the kernel signals it with each completion.
    fn register_eventfd(&self) -> std::io::Result<OwnedFd> {
        // SAFETY: plain syscall; the result is checked and then owned.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor owned by nobody else.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        self.ring.submitter().register_eventfd(owned.as_raw_fd())?;
        Ok(owned)
    }

    /// Resets the closing connections whose peer has not taken their last bytes in time
    /// ([`UringConfig::close_linger`]): a peer that never opens its window cannot hold them.
    fn expire_closing(&mut self) {
        // The clock is read only while a closed connection still sends.
        if self.closing_deadlines.is_empty() {
            return;
        }
        let now = Instant::now();
        while let Some(&(at, id)) = self.closing_deadlines.front() {
            if at > now {
                break;
            }
            self.closing_deadlines.pop_front();
            let Some(c) = self.conns.get_mut(id).filter(|c| c.state == State::Closing) else { continue };
            // SO_LINGER 0: the close sends a reset and drops what is unsent.
            let linger = libc::linger { l_onoff: 1, l_linger: 0 };
            // SAFETY: the option value points at `linger`, which outlives the call, with its size.
            unsafe {
                libc::setsockopt(
                    c.raw(),
                    libc::SOL_SOCKET,
                    libc::SO_LINGER,
                    (&linger as *const libc::linger).cast(),
                    std::mem::size_of::<libc::linger>() as libc::socklen_t,
                )
            };
            c.can_send = false;
            if !c.send_in_ring {
                self.finish_close(id);
            }
        }
    }

    fn push_shutdown(&mut self, id: ConnId) {
        let Some(c) = self.conns.get_mut(id) else { return };
        c.shut_write = ShutWrite::Done;
        let e = opcode::Shutdown::new(types::Fd(c.raw()), libc::SHUT_WR)
            .build()
            .flags(squeue::Flags::SKIP_SUCCESS)
            .user_data(user_data(Op::Quiet, 2));
        self.push(e);
    }
}

/// The calling thread's id, asked of the kernel once per thread: every poll checks it, and a
/// `gettid` each time would be a second system call per pass.
fn thread_id() -> libc::pid_t {
    thread_local! {
        static TID: std::cell::Cell<libc::pid_t> = const { std::cell::Cell::new(0) };
    }
    TID.with(|t| {
        if t.get() == 0 {
            // SAFETY: gettid has no preconditions.
            t.set(unsafe { libc::gettid() });
        }
        t.get()
    })
}

/// The connection an event names.
fn conn_of(ev: &Event) -> Option<ConnId> {
    match *ev {
        Event::Accepted { conn, .. } => Some(conn),
        Event::Connected(c) | Event::Readable(c) | Event::Writable(c) | Event::Closed(c) => Some(c),
    }
}

impl Drop for UringTransport {
    fn drop(&mut self) {
        // Every request is cancelled, synchronously (a bounded time): then no receive is armed
        // to take a buffer, and the buffers can go. If that fails (the drop runs on another
        // thread than the single-issuer ring's, or the cancel timed out), the buffers are
        // leaked rather than unmapped under an armed receive. Sends and connects are done
        // with their memory by the end of the enter that submitted them. The sockets close
        // with their connections; the io_uring itself is torn down by the kernel after its fd.
        let ts = types::Timespec::new().sec(1);
        let here = thread_id();
        let cancelled = match self.started {
            // Never enabled: nothing was ever submitted.
            None => Ok(()),
            Some(t) if t == here => self.ring.submitter().register_sync_cancel(Some(ts), types::CancelBuilder::any()),
            // Only the ring's own thread may cancel.
            Some(_) => Err(std::io::Error::from_raw_os_error(libc::EEXIST)),
        };
        match cancelled {
            // ENOENT: nothing was in flight.
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            Err(e) => {
                tracing::debug!(error = %e, "uring backend: requests not cancelled at drop (dropped off the polling thread?): its receive buffers are leaked, not unmapped");
                return;
            }
        }
        // SAFETY: dropped once, here, after every request was cancelled (above).
        unsafe { ManuallyDrop::drop(&mut self.bufs) };
    }
}

#[cfg(test)]
mod tests;
