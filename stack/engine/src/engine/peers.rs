//! A connection's part in what the engine learns of its peer (the memory
//! itself is `peer_memory`): what a new connection starts from, and what a
//! live one gives and takes before it sends.

use smoltcp::socket::tcp;
use smoltcp::time::Instant;

use super::peer_memory::{AckDelays, PeerMemory};
use super::{Engine, EngineSetup, EngineStats};

impl Engine {
    /// A connection to `ip` starts with what its peer's connections learned
    /// (see `peer_memory`).
    pub(super) fn seed_ack_delay(&self, s: &mut tcp::Socket<'static>, ip: std::net::IpAddr) {
        Self::apply_ack_delays(&self.cfg, s, self.peer_memory.delays_acks(ip));
    }

    /// For a peer known to hold its ACKs: the probe's allowance for such peers,
    /// and once the pooled verdicts show it, the peer's wait as the allowance and
    /// as the timeout's margin (the timeout bounds the probe's time).
    pub(super) fn apply_ack_delays(cfg: &EngineSetup, s: &mut tcp::Socket<'static>, known: AckDelays) {
        match known {
            AckDelays::Unknown => {}
            AckDelays::Remembered => s.set_tail_loss_probe_ack_delay(cfg.tcp.recovery.ack_delay_max.into()),
            AckDelays::Pooled(wait) => {
                s.set_tail_loss_probe_ack_delay(wait.into());
                s.set_rto_margin_min(wait.into());
            }
        }
    }

    /// With `Recovery::timestamps`, or to a peer that holds its ACKs by the pooled
    /// verdicts (whose first exchanges on each connection would else time their
    /// probes by the handshake's RTT), before the connection sends: its latest RTT
    /// sample joins its peer's average, and its estimate is raised to that
    /// average if below it (see `peer_memory`), so that what goes out now is timed
    /// by what all of the peer's connections measured. For a peer that holds its
    /// ACKs, the connection also takes the peer's wait as it is now.
    pub(super) fn share_rtt(peers: &mut PeerMemory, s: &mut tcp::Socket<'static>, now: Instant) {
        let Some(remote) = s.remote_endpoint() else { return };
        let ip = remote.addr.into();
        if let Some(r) = s.take_rtt_sample() {
            peers.sample_rtt(ip, r.into());
        }
        if let Some((srtt, rttvar)) = peers.rtt(ip) {
            s.seed_rtt(srtt.into(), rttvar.into());
        }
        if let Some(wait) = peers.wait(ip, now) {
            s.set_tail_loss_probe_ack_delay(wait.into());
            s.set_rto_margin_min(wait.into());
        }
    }

    /// Before the connection sends: its latest probe verdict joins its peer's
    /// pool, and if a peer came to hold its ACKs since the connection last
    /// looked (`seen`, a `PeerMemory` generation) and it is this one, the
    /// connection takes the allowance for such peers (see `peer_memory`).
    /// `seen`: the generation the connection last looked at, and whether the
    /// pool then showed its peer to hold its ACKs; returns them as of now.
    pub(super) fn share_ack_delay(
        peers: &mut PeerMemory,
        cfg: &EngineSetup,
        stats: &mut EngineStats,
        s: &mut tcp::Socket<'static>,
        seen: (u32, bool),
        now: Instant,
    ) -> (u32, bool) {
        if let Some(v) = s.take_probe_verdict() {
            // A late ACK's delay beyond SRTT: the wait it needed.
            let (needed, late_by) = match v {
                tcp::ProbeVerdict::Needed => (true, None),
                tcp::ProbeVerdict::Late { late_by } => (false, late_by.map(Into::into)),
            };
            if let Some(remote) = s.remote_endpoint() {
                if peers.probe_verdict(remote.addr.into(), needed, late_by, now) {
                    stats.peers_holding_acks += 1;
                    // A peer may come and go many times (a hostile one at will): the
                    // first few are logged, then the 2^k-th, the rest only counted.
                    let n = stats.peers_holding_acks;
                    if n <= 8 || n.is_power_of_two() {
                        tracing::info!(
                            "peer {} holds its ACKs (its probes were late, not lost): its connections wait {:?} for them \
                             ({n} such lessons so far; `peers_holding_acks` counts them all, the log the first 8 and each 2^k-th)",
                            remote.addr,
                            cfg.tcp.recovery.ack_delay_max
                        );
                    }
                }
            }
        }
        let generation = peers.generation();
        if generation == seen.0 {
            return seen;
        }
        let Some(remote) = s.remote_endpoint() else { return (generation, seen.1) };
        let known = peers.delays_acks(remote.addr.into());
        Self::apply_ack_delays(cfg, s, known);
        (generation, seen.1 || matches!(known, AckDelays::Pooled(_)))
    }

    /// Remembers the peer of `s` if the connection learned that it delays
    /// its ACKs. Called while the socket still knows its peer: when the
    /// application closes it, and when it is recycled.
    pub(super) fn remember_ack_delay(peers: &mut PeerMemory, cfg: &EngineSetup, s: &tcp::Socket<'static>) {
        if let (Some(remote), Some(d)) = (s.remote_endpoint(), s.tail_loss_probe_ack_delay()) {
            if d > cfg.tcp.recovery.ack_delay.into() {
                peers.remember_delays_acks(remote.addr.into());
            }
        }
    }
}
