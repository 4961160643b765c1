//! [`ClientReport`]: what one [`Client::run`](super::Client::run) measured, mergeable across
//! client threads, and printable as a one-line summary.

use std::fmt;
use std::time::Duration;

use hdrhistogram::Histogram;

/// Result of [`Client::run`](super::Client::run).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ClientReport {
    /// Backend name of the client's transport.
    pub backend: &'static str,
    /// Connections used.
    pub connections: usize,
    /// Responses received and matched to a request (passed or failed the check).
    pub requests: u64,
    /// Failed checks, unparseable or unexpected responses, and connections that died mid-run.
    pub errors: u64,
    /// Requests sent that never got a response (connection died or drain timeout).
    pub lost: u64,
    /// Bytes sent, framing included.
    pub bytes_sent: u64,
    /// Bytes received, framing included.
    pub bytes_received: u64,
    /// From the first request until the last response (or the end of the drain).
    pub duration: Duration,
    /// Per-response latency in nanoseconds (for a churn or storm run: from the connect
    /// call to the response, handshake included).
    pub latency: Histogram<u64>,
    /// Churn and storm runs: connections opened (connect calls).
    pub opened: u64,
    /// Churn and storm runs: connects refused, reset, or not established within the connect
    /// timeout.
    pub failed_connects: u64,
    /// Churn and storm runs: from the connect call until the connection was established, in
    /// nanoseconds (empty otherwise).
    pub setup: Histogram<u64>,
}

impl ClientReport {
    pub(super) fn empty(backend: &'static str, connections: usize) -> Self {
        ClientReport {
            backend,
            connections,
            requests: 0,
            errors: 0,
            lost: 0,
            bytes_sent: 0,
            bytes_received: 0,
            duration: Duration::ZERO,
            // 1 ns .. 100 s at 3 significant digits. Larger values are clamped by
            // saturating_record.
            latency: Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("static histogram bounds are valid"),
            opened: 0,
            failed_connects: 0,
            setup: Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("static histogram bounds are valid"),
        }
    }

    /// Responses per second over [`ClientReport::duration`].
    pub fn requests_per_sec(&self) -> f64 {
        let secs = self.duration.as_secs_f64();
        if secs > 0.0 {
            self.requests as f64 / secs
        } else {
            0.0
        }
    }

    /// Latency at quantile `q` in 0.0..=1.0.
    pub fn latency_at(&self, q: f64) -> Duration {
        Duration::from_nanos(self.latency.value_at_quantile(q))
    }

    /// Adds another run's counts (e.g. from a client thread) to this one. The duration is the
    /// longer of the two, since the runs are assumed to be concurrent.
    pub fn merge(&mut self, other: &ClientReport) {
        self.connections += other.connections;
        self.requests += other.requests;
        self.errors += other.errors;
        self.lost += other.lost;
        self.bytes_sent += other.bytes_sent;
        self.bytes_received += other.bytes_received;
        self.duration = self.duration.max(other.duration);
        // Same bounds on both sides, so adding cannot fail. Ignore the impossible error
        // rather than panic.
        let _ = self.latency.add(&other.latency);
        self.opened += other.opened;
        self.failed_connects += other.failed_connects;
        let _ = self.setup.add(&other.setup);
    }

    /// Connection setup time at quantile `q` (churn and storm runs).
    pub fn setup_at(&self, q: f64) -> Duration {
        Duration::from_nanos(self.setup.value_at_quantile(q))
    }
}

impl fmt::Display for ClientReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let us = |q| self.latency_at(q).as_nanos() as f64 / 1000.0;
        write!(
            f,
            "{}: {} conns, {} req in {:.2?} = {:.0} req/s, errors {}, lost {}, latency us p50 {:.1} p90 {:.1} p99 {:.1} p99.9 {:.1} max {:.1}",
            self.backend,
            self.connections,
            self.requests,
            self.duration,
            self.requests_per_sec(),
            self.errors,
            self.lost,
            us(0.5),
            us(0.9),
            us(0.99),
            us(0.999),
            self.latency.max() as f64 / 1000.0,
        )?;
        if self.opened > 0 {
            let us = |q| self.setup_at(q).as_nanos() as f64 / 1000.0;
            write!(
                f,
                "; {} connections opened, {} failed, setup us p50 {:.1} p99 {:.1} max {:.1}",
                self.opened,
                self.failed_connects,
                us(0.5),
                us(0.99),
                self.setup.max() as f64 / 1000.0
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_merge_and_display() {
        let mut a = ClientReport::empty("kernel", 2);
        a.requests = 10;
        a.duration = Duration::from_secs(1);
        a.latency.record(1_000).unwrap();
        let mut b = ClientReport::empty("kernel", 3);
        b.requests = 5;
        b.duration = Duration::from_secs(2);
        b.latency.record(3_000).unwrap();
        a.merge(&b);
        assert_eq!((a.connections, a.requests, a.duration), (5, 15, Duration::from_secs(2)));
        assert_eq!(a.latency.len(), 2);
        assert!(a.to_string().contains("15 req"));
    }
}
