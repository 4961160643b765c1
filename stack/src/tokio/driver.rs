//! The task that runs a transport inside tokio.

use std::future::Future;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use ::tokio::io::unix::AsyncFd;
use ::tokio::io::Interest;
use ::tokio::time::{Instant, Sleep};

use super::shared::{lock, register, to_io, Shared};
use crate::transport::Event;

/// A deadline that moved by less than this is left as it was: re-arming tokio's timer on
/// every pass (the retransmission deadline moves with every response) costs more than waking
/// a little early, and tokio's timer has 1 ms resolution anyway.
const SLACK: Duration = Duration::from_micros(500);
/// Events taken per pass are at most what one zero-timeout `poll` returns; this is the
/// reserved room (the vector grows once if a burst needs more, then keeps it).
const EVENTS: usize = 256;

/// Runs the transport behind a [`super::Net`]: a future that never completes unless the
/// transport fails. [`super::Net::spawn`] spawns it; [`super::Net::new`] hands it to you.
pub struct Driver {
    inner: Arc<Mutex<Shared>>,
    /// A duplicate of the transport's descriptor (same open file, so the same readiness),
    /// owned here so tokio's registration can never outlive it.
    fd: Option<AsyncFd<OwnedFd>>,
    sleep: Pin<Box<Sleep>>,
    /// When `sleep` is set to fire, if it is.
    armed: Option<Instant>,
    events: Vec<Event>,
    /// The last pass found `poll` due at once (events left, a timer expired): the next one
    /// polls whatever woke it.
    due: bool,
    /// This pass left the flush to the next one (see `poll`).
    held: bool,
}

impl Driver {
    pub(super) fn new(inner: Arc<Mutex<Shared>>, fd: Option<RawFd>) -> io::Result<Driver> {
        let fd = match fd {
            None => None,
            Some(fd) => {
                // SAFETY: `fd` is the transport's open descriptor, which `inner` keeps alive
                // for this call; the duplicate is then owned by the AsyncFd.
                let owned = unsafe { BorrowedFd::borrow_raw(fd) }.try_clone_to_owned()?;
                // SAFETY: an OwnedFd stays open and refers to the same file until the AsyncFd
                // that owns it is dropped.
                Some(unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) }.map_err(io::Error::from)?)
            }
        };
        Ok(Driver {
            inner,
            fd,
            sleep: Box::pin(::tokio::time::sleep_until(Instant::now())),
            armed: None,
            events: Vec::with_capacity(EVENTS),
            due: false,
            held: false,
        })
    }
}

impl Future for Driver {
    type Output = io::Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match this.pass(cx) {
            Ok(()) => Poll::Pending,
            Err(e) => {
                // Nothing will wake the tasks any more: tell them, rather than leave them
                // waiting forever.
                lock(&this.inner).fail();
                Poll::Ready(Err(e))
            }
        }
    }
}

impl Driver {
    fn pass(&mut self, cx: &mut Context<'_>) -> io::Result<()> {
        let this = self;
        // Readiness is cleared before the transport is polled, so frames that arrive while
        // it runs raise a fresh edge; the second call registers for it.
        let mut io_ready = false;
        if let Some(fd) = &this.fd {
            while let Poll::Ready(r) = fd.poll_read_ready(cx) {
                r?.clear_ready();
                io_ready = true;
            }
        }
        let mut timer = false;
        if this.armed.is_some() && this.sleep.as_mut().poll(cx).is_ready() {
            this.armed = None;
            timer = true;
        }

        let mut guard = lock(&this.inner);
        let sh = &mut *guard;
        sh.driver_woken = false;
        register(&mut sh.driver, cx.waker());
        let owed = std::mem::take(&mut sh.poll_owed) && sh.t.next_wake() == Some(Duration::ZERO);
        let due = std::mem::take(&mut this.due);
        let mut more = false;
        if io_ready || timer || owed || due || this.fd.is_none() {
            this.events.clear();
            sh.t.poll(&mut this.events, Some(Duration::ZERO)).map_err(to_io)?;
            // A poll that returned events may have left input behind (it returns as soon
            // as it has some): come back after the woken tasks ran.
            more = !this.events.is_empty();
            sh.dispatch(&this.events);
        }
        // What the tasks wrote since the last pass goes out, kicked now: tokio's sleep
        // (epoll) will not transmit the TX ring. Not on a pass that just woke tasks with
        // new events, though: they run before the next pass, and their answers then ride on
        // the ACKs of what woke them (one frame and one kick, not a bare ACK and another
        // kick). Every other pass at most, so that a steady stream of events cannot hold
        // back what is already written.
        if more && !this.held {
            this.held = true;
        } else {
            this.held = false;
            sh.t.flush().map_err(to_io)?;
            sh.t.kick().map_err(to_io)?;
        }
        let wake = if more { Some(Duration::ZERO) } else { sh.t.next_wake() };
        drop(guard);

        match wake {
            Some(d) if d.is_zero() => {
                this.due = true;
                cx.waker().wake_by_ref();
            }
            Some(d) => {
                let at = Instant::now() + d;
                let keep = this.armed.is_some_and(|a| a <= at && at - a < SLACK);
                if !keep {
                    this.sleep.as_mut().reset(at);
                    this.armed = Some(at);
                }
                if this.sleep.as_mut().poll(cx).is_ready() {
                    this.armed = None;
                    cx.waker().wake_by_ref();
                }
            }
            None => this.armed = None,
        }
        Ok(())
    }
}
