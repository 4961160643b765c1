//! [`Server::shutdown`], the graceful stop. What it counts ([`ShutdownStats`]) and the lingering
//! of each connection after its FIN (`linger`) stay with the server's loop in `mod.rs`, which
//! uses them on every event while a shutdown runs.

use std::time::{Duration, Instant};

use super::{Server, ShutdownStats};
use crate::codec::Codec;
use crate::rr::handler::Handler;
use crate::transport::{ConnId, Transport, TransportError};

impl<T: Transport, C: Codec + Clone, H: Handler> Server<T, C, H> {
    /// Stops serving gracefully: accepts nothing more (a connection that arrives is closed at
    /// once, without `on_open`), answers every request already received (all the transport
    /// holds is read at once; responses still go out at the pace the client reads them,
    /// [`ServerConfig::write_high_water`](super::ServerConfig::write_high_water) at a time),
    /// waits for [`Reply::Pending`](crate::rr::Reply::Pending)
    /// completions, then closes each connection with a FIN once its responses are out, reads
    /// and drops what the peer still sends until it closes too (counted in
    /// [`ShutdownStats::unanswered_bytes`]), and calls [`Handler::on_close`] for every
    /// connection. Returns when every connection is
    /// closed and the transport has delivered every FIN ([`Transport::closing`] is 0), or at
    /// `deadline`: connections left then are closed as they are (the transport may reset
    /// them) and counted as forced.
    ///
    /// The server stays shut: later steps close every new connection unserved.
    ///
    /// Dropping a server instead closes every connection at once: on the kernel backend a
    /// connection with unread input is reset, the xsk backend resets all of them, responses
    /// not yet sent are lost, and `on_close` is not called.
    pub fn shutdown(&mut self, deadline: Duration) -> Result<ShutdownStats, TransportError> {
        let end = Instant::now() + deadline;
        let before = self.stats.requests;
        self.stopping = Some(ShutdownStats { open: self.conns.len(), ..ShutdownStats::default() });
        self.refusing = true;
        // What has arrived but not been reported yet is taken in first.
        self.step(Some(Duration::ZERO))?;
        let ids: Vec<ConnId> = self.conns.keys().copied().collect();
        for id in ids {
            if let Some(c) = self.conns.get_mut(&id) {
                // All of it, past the high-water mark: bounded by the transport's buffer.
                while let Ok(n @ 1..) = self.transport.recv(id, &mut c.rbuf) {
                    self.stats.bytes_in += n as u64;
                }
                c.input_done = true;
                self.service(id);
            }
        }
        self.transport.flush()?;
        while !self.conns.is_empty() || self.transport.closing() > 0 {
            let now = Instant::now();
            if now >= end {
                break;
            }
            self.step(Some((end - now).min(Duration::from_millis(10))))?;
        }
        let left: Vec<ConnId> = self.conns.keys().copied().collect();
        if let Some(st) = &mut self.stopping {
            st.forced = left.len();
        }
        for &id in &left {
            self.finish_as(id, false);
        }
        self.transport.flush()?;
        let mut st = self.stopping.take().unwrap_or_default();
        st.answered = self.stats.requests - before;
        Ok(st)
    }
}
