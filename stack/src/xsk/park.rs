//! The park: where the driver's work ends and the thread waits. Every rule about when
//! the frames in the TX ring leave and how the driver sleeps is in this file.
//!
//! **The kick rides on the sleep.** The loop's egress and `flush` only publish the TX
//! ring; the port's poll(2), which the loop sleeps in, transmits it first (copy mode with
//! need_wakeup: `xsk_poll` drives TX). At light load a request then costs one syscall,
//! not a sendto and a wait, and the peer the answer wakes (veth: on this CPU) runs once
//! this thread sleeps instead of preempting it on its way back from sendto. Whenever the
//! thread does not sleep next, the kick is made with a sendto before it goes on:
//! - a full RX batch (more frames wait: the next pass takes them at once);
//! - the port busy-polls, or a deadline is already due (no sleep);
//! - TX left in the ring (the kernel's budget) or a neighbour being resolved: sent
//!   again and retried after a short sleep;
//! - `poll` returns to its caller (events, a wake, its timeout), or an application's
//!   `flush` whose loop will not sleep next (frames already wait in the RX ring);
//! - an outside loop that sleeps elsewhere (tokio's epoll) asks for it ([`Park::kick`]).
//!
//! **The sleep** lasts until the RX ring has frames, the earliest deadline (the engine's
//! timers, the caller's timeout, the XDP program's SYN-cookie check) or a
//! [`Waker`](crate::Waker)'s wake, bounded while deferred ACKs wait in their ring
//! (`acks.rs`); the deadlines and wakes reach it through [`WaitTimer`]'s timerfd, in the
//! poll(2) beside the XSK socket only when one may end the sleep.

use std::time::Duration;

use xsk_io::syncookies::CookieSlot;

use super::backend_err;
use super::device::Device;
use super::stages::Stages;
use crate::timer::WaitTimer;
use crate::transport::TransportError;

/// How soon to try again while TX is left in the ring (the kernel's budget)
/// or a neighbour is being resolved.
const RETRY: Duration = Duration::from_micros(200);

/// How a pass of the loop ends.
pub(crate) enum Until {
    /// The RX ring had a full batch: no sleep, the next pass comes at once.
    NextPass,
    /// Sleep until frames arrive or this long at most (None: no limit but the park's own).
    Wait(Option<Duration>),
}

/// What the loop does after [`Park::park`].
#[derive(PartialEq, Eq)]
pub(crate) enum Then {
    /// Another pass.
    Pass,
    /// Return to `poll`'s caller: a wake (its flags), or another signal.
    Return,
}

/// The kick policy and the sleep. See the module docs.
pub(crate) struct Park {
    /// Ends the port's wait for every deadline, and carries a [`Waker`](crate::Waker)'s
    /// wakes (see [`crate::timer`]).
    pub(crate) timer: WaitTimer,
    /// The XDP program's SYN cookies for this queue (None: off or unavailable): checked on a
    /// pass of the loop, and the SYNs they answer wake nobody, so their check is a deadline.
    pub(crate) cookies: Option<CookieSlot>,
    /// The port busy-polls: the loop never sleeps.
    busy: bool,
    /// `DeviceStats::sleeps`, `DeviceStats::timer_wakes`.
    pub(crate) sleeps: u64,
    pub(crate) timer_wakes: u64,
}

impl Park {
    pub(crate) fn new(timer: WaitTimer, cookies: Option<CookieSlot>, dev: &Device) -> Park {
        Park { timer, cookies, busy: dev.port.features().busy_poll.is_some(), sleeps: 0, timer_wakes: 0 }
    }

    /// Ends a pass of the loop: the kick, then the sleep (or none). `wall`: the pass's
    /// CLOCK_MONOTONIC reading, which stands for now (a wait that ends a pass's length
    /// early only loops).
    pub(crate) fn park(&mut self, dev: &mut Device, wall: u64, until: Until, stages: &mut Option<Stages>) -> Result<Then, TransportError> {
        let wait = match until {
            Until::NextPass => return self.go_on(dev, stages),
            Until::Wait(w) => min_wait(w, self.cookie_wait(wall)),
        };
        if dev.port.tx_pending() || dev.arp.has_pending() {
            // TX left in the ring (budget) or a neighbour being resolved: come back soon.
            send_now(dev, stages)?;
            std::thread::sleep(wait.map_or(RETRY, |w| w.min(RETRY)));
            // A link that stays down keeps the loop here: a wake must still end it.
            return Ok(if self.timer.take_wake() { Then::Return } else { Then::Pass });
        }
        if self.busy || wait == Some(Duration::ZERO) {
            if self.busy {
                std::hint::spin_loop();
            }
            return self.go_on(dev, stages);
        }
        let wait = match &dev.acks {
            Some(a) => a.bound_sleep(wait),
            None => wait,
        };
        let wait = self.timer.prepare_at(Some(wall), wait);
        // A wake that came before the timer was armed (which may have replaced its
        // expiry): the caller checks its flags now.
        if self.timer.take_wake() {
            return Ok(Then::Return);
        }
        // Sleeps and makes the kick this pass owes in one syscall; the timerfd joins the
        // wait when it has a deadline or a waker may end it.
        self.sleeps += 1;
        match dev.port.wait(self.timer.wanted_fd(), wait) {
            Ok(ready) if ready.extra => {
                self.timer_wakes += 1;
                self.timer.clear();
            }
            Ok(_) => return Ok(Then::Pass),
            // A signal: the caller looks at its flags.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => return Ok(Then::Return),
            Err(e) => return Err(TransportError::Io(e)),
        }
        Ok(if self.timer.take_wake() { Then::Return } else { Then::Pass })
    }

    /// No sleep before the next pass: what this pass queued goes out now.
    fn go_on(&mut self, dev: &mut Device, stages: &mut Option<Stages>) -> Result<Then, TransportError> {
        end_pass(dev, false, stages)?;
        Ok(if self.timer.take_wake() { Then::Return } else { Then::Pass })
    }

    /// `poll` returns to its caller: returning is not sleeping, so the kick is made now.
    #[inline]
    pub(crate) fn leave(&mut self, dev: &mut Device, stages: &mut Option<Stages>) -> Result<(), TransportError> {
        end_pass(dev, false, stages)
    }

    /// The application's `flush` put frames in the TX ring: the kick waits for the next
    /// `poll`'s sleep unless that poll will not sleep: frames already wait in the RX ring
    /// (the answers should not wait for the next batch to be taken in), or the port
    /// busy-polls (the next pass would only delay the kick).
    #[inline]
    pub(crate) fn after_flush(&mut self, dev: &mut Device, stages: &mut Option<Stages>) -> Result<(), TransportError> {
        let sleeps = dev.port.sleeps_next();
        end_pass(dev, sleeps, stages)
    }

    /// An outside loop is about to sleep elsewhere (epoll, which does not transmit the TX
    /// ring as the port's poll(2) does): the kick `flush` left, made now with a sendto, and
    /// what the kernel left in the ring sent again.
    pub(crate) fn kick(&mut self, dev: &mut Device, stages: &mut Option<Stages>) -> Result<(), TransportError> {
        if dev.port.tx_pending() {
            return send_now(dev, stages);
        }
        end_pass(dev, false, stages)
    }

    /// What [`park`](Self::park) would sleep for with `wait` the engine's: for an outside
    /// loop's sleep (`Transport::next_wake`).
    pub(crate) fn next_wake(&self, dev: &Device, wall: u64, wait: Option<Duration>) -> Option<Duration> {
        let wait = min_wait(wait, self.cookie_wait(wall));
        let wait = match &dev.acks {
            Some(a) => a.bound_sleep(wait),
            None => wait,
        };
        if dev.port.tx_pending() || dev.arp.has_pending() {
            return Some(wait.map_or(RETRY, |w| w.min(RETRY)));
        }
        wait
    }

    /// Until the XDP program's SYN-ACKs are due to be checked.
    fn cookie_wait(&self, wall: u64) -> Option<Duration> {
        let at = self.cookies.as_ref()?.check_due()?;
        Some(Duration::from_nanos(at.saturating_sub(wall)))
    }
}

/// The port's kick policy at the end of a pass (`Port::end_pass`): the kick this pass owes
/// is made now unless the loop sleeps in the port's wait next, which makes it. The test is
/// inlined (twice per request; nearly always nothing to do), the kick is not.
#[inline]
fn end_pass(dev: &mut Device, sleeps: bool, stages: &mut Option<Stages>) -> Result<(), TransportError> {
    if sleeps || !dev.port.kick_deferred() {
        return Ok(());
    }
    kick_now(dev, stages)
}

/// `end_pass` with a kick owed and no sleep to make it.
#[inline(never)]
fn kick_now(dev: &mut Device, stages: &mut Option<Stages>) -> Result<(), TransportError> {
    let t0 = stages.as_ref().map(|_| Stages::now());
    let kicked = dev.port.end_pass(false).map_err(backend_err)?;
    if let (Some(s), Some(t0), true) = (stages, t0, kicked) {
        s.kick(t0);
    }
    Ok(())
}

/// The TX ring is given to the kernel now (a sendto), whether a kick is owed or not: to
/// retry what the kernel left in the ring (its budget).
fn send_now(dev: &mut Device, stages: &mut Option<Stages>) -> Result<(), TransportError> {
    let t0 = stages.as_ref().map(|_| Stages::now());
    let r = dev.port.flush().map_err(backend_err);
    if let (Some(s), Some(t0)) = (stages, t0) {
        s.kick(t0);
    }
    r
}

/// The shorter of two waits (None: no limit).
#[inline]
pub(crate) fn min_wait(a: Option<Duration>, b: Option<Duration>) -> Option<Duration> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
