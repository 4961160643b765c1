//! Where a request's time goes inside the transport (`XskConfig::stage_times`): the
//! instrument behind the studies' per-stage breakdowns (e.g. `docs/2026-12-03-egress/`).
//!
//! A request/response exchange through [`XskTransport`](super::XskTransport) is a
//! *cycle*: a loop pass takes frames from the RX ring (`rx`), the engine takes them in
//! and reports events (`ingest`); the application handles them between `poll` and its
//! `flush` (`app`: reading, decoding, the handler); `send` and `flush` write into the
//! sockets, build the frames and put them in the TX ring (`egress`: `send` puts an answer
//! to an idle connection there at once, `flush` the rest); a `sendto` makes the kernel
//! send them (`kick`: in copy mode the kernel's generic transmit, and on veth the peer's
//! XDP receive too, run inside this call). What is left of the time between cycles is
//! spent waiting for the peer (`wait`), the network and the other side included.
//! A driver that sleeps makes its kick in the sleep's poll(2): that one is not
//! separable and lands in `wait`; with busy polling every kick is a `sendto`.
//!
//! Each stage costs two CLOCK_MONOTONIC reads (vDSO); off, nothing is read.

use serde::Serialize;

/// The stages' total times (nanoseconds) and counts since start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct StageTimes {
    /// Polls that returned events after taking frames in: requests or responses seen.
    pub cycles: u64,
    /// Loop passes that took frames from the RX ring.
    pub rx_passes: u64,
    /// Their time in `Port::recv` (ring read, fill ring refilled).
    pub rx_ns: u64,
    /// Time from the end of `recv` to events ready (engine, smoltcp, deferred ACKs).
    pub ingest_ns: u64,
    /// Time between a poll that returned events and the next flush: the application's.
    pub app_ns: u64,
    /// Egress runs (`flush`, the loop's own, and each `send`).
    pub egress_runs: u64,
    /// Their time: data into the sockets, frames built and put in the TX ring.
    pub egress_ns: u64,
    /// `sendto` calls that made the kernel transmit.
    pub kicks: u64,
    /// Their time (in copy mode the kernel's transmit; on veth the peer's receive too).
    pub kick_ns: u64,
    /// Time from the first cycle to the last, for `wait` = this minus the stages.
    pub span_ns: u64,
}

impl StageTimes {
    /// Mean nanoseconds per cycle of each stage, and the rest (`wait`), in that order:
    /// rx, ingest, app, egress, kick, wait. None before two cycles.
    pub fn per_cycle(&self) -> Option<[f64; 6]> {
        if self.cycles < 2 {
            return None;
        }
        let c = self.cycles as f64;
        let parts = [self.rx_ns, self.ingest_ns, self.app_ns, self.egress_ns, self.kick_ns];
        let busy: u64 = parts.iter().sum();
        let wait = self.span_ns.saturating_sub(busy);
        let mut out = [0.0; 6];
        for (o, p) in out.iter_mut().zip(parts.iter().chain(std::iter::once(&wait))) {
            *o = *p as f64 / c;
        }
        Some(out)
    }
}

impl std::fmt::Display for StageTimes {
    /// One line: the mean microseconds per cycle of each stage.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Some(p) = self.per_cycle() else { return write!(f, "{} cycles: too few to split", self.cycles) };
        write!(f, "{} cycles, us each:", self.cycles)?;
        for (name, v) in ["rx", "ingest", "app", "egress", "kick", "wait"].iter().zip(p) {
            write!(f, " {name} {:.2}", v / 1000.0)?;
        }
        write!(f, " (egress runs {}, kicks {})", self.egress_runs, self.kicks)
    }
}

/// The clock behind [`StageTimes`].
#[derive(Debug, Default)]
pub(crate) struct Stages {
    pub(crate) t: StageTimes,
    /// When the last poll returned events (the application's turn began).
    app_since: Option<u64>,
    /// Time of the `send`s in the application's turn (egress, not the application's).
    sent_in_turn: u64,
    first_cycle: Option<u64>,
}

impl Stages {
    pub(crate) fn now() -> u64 {
        xsk_io::sys::monotonic_ns()
    }

    /// A pass took frames: `start` before `Port::recv`, `end` after it.
    pub(crate) fn rx(&mut self, start: u64, end: u64) {
        self.t.rx_passes += 1;
        self.t.rx_ns += end.saturating_sub(start);
    }

    /// Events are ready for the application: `since` is the end of the `recv` that
    /// brought their frames.
    pub(crate) fn events(&mut self, since: u64) {
        let now = Self::now();
        self.t.ingest_ns += now.saturating_sub(since);
        self.t.cycles += 1;
        let first = *self.first_cycle.get_or_insert(now);
        self.t.span_ns = now - first;
        self.app_since = Some(now);
    }

    /// The application flushes: its turn ends.
    pub(crate) fn flush(&mut self) {
        if let Some(s) = self.app_since.take() {
            self.t.app_ns += Self::now().saturating_sub(s).saturating_sub(self.sent_in_turn);
        }
        self.sent_in_turn = 0;
    }

    /// A `send` that began at `start` ended: egress time, taken out of the application's.
    pub(crate) fn send(&mut self, start: u64) {
        let d = Self::now().saturating_sub(start);
        self.t.egress_runs += 1;
        self.t.egress_ns += d;
        if self.app_since.is_some() {
            self.sent_in_turn += d;
        }
    }

    pub(crate) fn egress(&mut self, start: u64) {
        self.t.egress_runs += 1;
        self.t.egress_ns += Self::now().saturating_sub(start);
    }

    pub(crate) fn kick(&mut self, start: u64) {
        self.t.kicks += 1;
        self.t.kick_ns += Self::now().saturating_sub(start);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_cycle_splits_the_span_into_stages_and_wait() {
        let t = StageTimes {
            cycles: 4,
            rx_ns: 400,
            ingest_ns: 800,
            app_ns: 1200,
            egress_ns: 1600,
            kick_ns: 2000,
            span_ns: 10_000,
            ..StageTimes::default()
        };
        let p = t.per_cycle().unwrap();
        assert_eq!(p, [100.0, 200.0, 300.0, 400.0, 500.0, 1000.0]);
        assert_eq!(p.iter().sum::<f64>() * 4.0, 10_000.0);
        assert_eq!(StageTimes { cycles: 1, ..t }.per_cycle(), None);
        // Stages longer than the span (a last cycle's stages after its start): no negative wait.
        assert_eq!(StageTimes { span_ns: 1000, ..t }.per_cycle().unwrap()[5], 0.0);
    }

    #[test]
    fn the_application_turn_runs_from_events_to_flush_once() {
        let mut s = Stages::default();
        s.flush(); // no events yet: nothing counted
        assert_eq!(s.t.app_ns, 0);
        s.events(Stages::now());
        std::thread::sleep(std::time::Duration::from_millis(2));
        s.flush();
        let app = s.t.app_ns;
        assert!(app >= 2_000_000, "{app}");
        s.flush(); // a second flush without events in between adds nothing
        assert_eq!(s.t.app_ns, app);
        assert_eq!(s.t.cycles, 1);
    }

    /// A `send` in the application's turn is egress time, not the application's.
    #[test]
    fn a_send_is_egress_and_leaves_the_application_turn() {
        let mut s = Stages::default();
        s.events(Stages::now());
        let t0 = Stages::now();
        std::thread::sleep(std::time::Duration::from_millis(3));
        s.send(t0);
        s.flush();
        assert!(s.t.egress_ns >= 3_000_000 && s.t.egress_runs == 1, "{:?}", s.t);
        assert!(s.t.app_ns < 3_000_000, "{:?}", s.t);
    }
}
