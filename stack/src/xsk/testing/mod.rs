//! The stack without an operating system (feature `testing`): the in-memory
//! engine of `stack_engine::testing` behind [`Transport`], so the
//! request/response layer runs over it, and the fuzzer (`fuzz`, for
//! `stack-fuzz`) that drives both. Frame builders are `stack_engine`'s,
//! re-exported here for the integration tests.

pub mod fuzz;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use bytes::BytesMut;
use stack_engine::smoltcp::time::Instant;

pub use stack_engine::testing::{config, frames, mac_of, MemLink, MemTransport, Pair, Rng};

use crate::transport::{ConnId, Event, ListenerId, Transport, TransportError};

/// The engine in memory, behind the trait the request/response layer runs on.
impl Transport for MemTransport {
    fn listen(&mut self, port: u16) -> Result<ListenerId, TransportError> {
        MemTransport::listen(self, port)
    }

    fn unlisten(&mut self, listener: ListenerId) {
        self.engine.unlisten(listener)
    }

    fn connect(&mut self, addr: SocketAddrV4) -> Result<ConnId, TransportError> {
        MemTransport::connect(self, addr)
    }

    fn poll(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> Result<(), TransportError> {
        MemTransport::poll(self, events, timeout)
    }

    fn recv(&mut self, conn: ConnId, buf: &mut BytesMut) -> Result<usize, TransportError> {
        MemTransport::recv(self, conn, buf)
    }

    fn send(&mut self, conn: ConnId, data: &[u8]) -> Result<usize, TransportError> {
        MemTransport::send(self, conn, data)
    }

    fn close(&mut self, conn: ConnId) {
        MemTransport::close(self, conn)
    }

    fn shutdown_write(&mut self, conn: ConnId) -> Result<(), TransportError> {
        MemTransport::shutdown_write(self, conn)
    }

    fn recv_drains(&self) -> bool {
        MemTransport::recv_drains(self)
    }

    fn flush(&mut self) -> Result<(), TransportError> {
        MemTransport::flush(self)
    }

    fn set_ack_delay(&mut self, delay: Option<Duration>) {
        self.engine.set_ack_delay(delay)
    }

    fn local_addr(&self, listener: ListenerId) -> Option<SocketAddrV4> {
        MemTransport::local_addr(self, listener)
    }

    fn peer_addr(&self, conn: ConnId) -> Option<SocketAddrV4> {
        MemTransport::peer_addr(self, conn)
    }

    fn peer_socket_addr(&self, conn: ConnId) -> Option<std::net::SocketAddr> {
        MemTransport::peer_socket_addr(self, conn)
    }

    fn name(&self) -> &'static str {
        MemTransport::name(self)
    }
}

/// The engine's answer to the SYN `syn` when it answers every SYN with a
/// cookie (`SynCookies::Always`), at `at` on its clock, and what the XDP
/// program needs to answer the same SYN the same way (`epoch_ns` left 0 for
/// the caller). The engine has address 198.18.0.1 (and 2001:2::1) and MAC
/// `02:00:00:00:00:01` ([`frames::TcpSpec`]'s default destination), takes
/// partial TCP checksums if `accept_partial`, and listens on `syn`'s
/// destination port; `None` if it sent nothing. For the root test that runs
/// the XDP program on the same SYNs.
pub fn cookie_answer(syn: &[u8], at: Duration, accept_partial: bool) -> (Option<Vec<u8>>, xsk_io::syncookies::CookieParams) {
    let mut cfg = config(Ipv4Addr::new(198, 18, 0, 1));
    cfg.tcp.syn_cookies = stack_engine::SynCookies::Always;
    cfg.accept_partial_csum = accept_partial;
    let mut t = MemTransport::new(cfg);
    if let Some(s) = frames::parse_tcp(syn).or_else(|| frames::parse_tcp6(syn).map(|(_, _, s)| s)) {
        let _ = t.listen(s.dport);
    }
    t.now = Instant::from_micros(at.as_micros() as i64);
    t.take_sent();
    t.inbox.push_back(syn.to_vec());
    t.ingest();
    let sent = t.take_sent().into_iter().next();
    (sent, super::open::cookie_params(&t.engine, t.link.mtu, 0))
}
