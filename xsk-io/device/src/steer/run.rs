//! The program run unattached on frames of one's own (`BPF_PROG_RUN`), for
//! tests of its answers.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use libbpf_rs::{MapCore, MapFlags, ObjectBuilder};

use super::error::{missing, SteerError};
use super::flags::SteerFlags;
use super::maps::{check_queue, encode_cfg, port_key, sum_percpu};
use super::object::{
    route_libbpf_logs, CNT_NO_SOCKET, MAP_ACK_STATE, MAP_CFG, MAP_COUNTERS, MAP_SYN_COOKIES, MAP_TCP_PORTS, PROG_NAME,
    STEER_ACKS_OBJ,
};

/// What the program did with a frame (its XDP action).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// XDP_ABORTED.
    Aborted,
    /// XDP_DROP.
    Drop,
    /// XDP_PASS: to the kernel.
    Pass,
    /// XDP_TX: sent back out of the interface (a SYN answered).
    Tx,
    /// XDP_REDIRECT: into an AF_XDP socket.
    Redirect,
    /// Anything else.
    Other(u32),
}

/// The steering program (with deferred ACKs and SYN cookies) loaded but not
/// attached, run on frames of one's own through `BPF_PROG_RUN`: tests of
/// what it answers, to the byte. Needs what loading needs (root, or
/// `CAP_BPF` and `CAP_NET_ADMIN`). No AF_XDP socket is registered, so a
/// frame it would steer comes back as [`Verdict::Pass`].
pub struct SteerRun {
    obj: libbpf_rs::Object,
}

impl fmt::Debug for SteerRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SteerRun")
    }
}

impl SteerRun {
    /// Loads the program.
    pub fn load() -> Result<SteerRun, SteerError> {
        route_libbpf_logs();
        let obj = ObjectBuilder::default()
            .name("xsk_steer_run")
            .and_then(|b| b.open_memory(&STEER_ACKS_OBJ.0))
            .and_then(|open| open.load())
            .map_err(SteerError::Load)?;
        Ok(SteerRun { obj })
    }

    fn update(&self, name: &'static str, key: &[u8], value: &[u8]) -> Result<(), SteerError> {
        let m = self.obj.maps().find(|m| m.name() == name).ok_or_else(|| missing(format!("map {name}")))?;
        m.update(key, value, MapFlags::ANY).map_err(|source| SteerError::Map { map: name, op: "test setup".into(), source })
    }

    /// Our address and what to steer besides TCP ports, as [`Steer::set_addr`](super::Steer::set_addr).
    pub fn set_addr(&self, addr: Ipv4Addr, flags: SteerFlags) -> Result<(), SteerError> {
        self.update(MAP_CFG, &0u32.to_ne_bytes(), &encode_cfg(addr, flags, None, None))
    }

    /// Our addresses (IPv6 too, as [`Steer::set_addr6`](super::Steer::set_addr6)), flags
    /// and a steered port range, if any.
    pub fn set_addrs(&self, addr: Ipv4Addr, addr6: Option<Ipv6Addr>, flags: SteerFlags, range: Option<(u16, u16)>) -> Result<(), SteerError> {
        self.update(MAP_CFG, &0u32.to_ne_bytes(), &encode_cfg(addr, flags, range, addr6))
    }

    /// Runs the program on `frame` and tells whether it would have steered it into the
    /// queue's socket: with none registered, such a frame passes, but is counted as
    /// steered-without-a-socket rather than as the kernel's.
    pub fn would_steer(&mut self, frame: &[u8]) -> Result<(Verdict, bool), SteerError> {
        let before = self.no_socket()?;
        let (v, _) = self.run(frame)?;
        Ok((v, self.no_socket()? > before))
    }

    fn no_socket(&self) -> Result<u64, SteerError> {
        let m = self.obj.maps().find(|m| m.name() == MAP_COUNTERS).ok_or_else(|| missing(format!("map {MAP_COUNTERS}")))?;
        let percpu = m
            .lookup_percpu(&CNT_NO_SOCKET.to_ne_bytes(), MapFlags::ANY)
            .map_err(|source| SteerError::Map { map: MAP_COUNTERS, op: "read".into(), source })?;
        Ok(percpu.as_deref().map(sum_percpu).unwrap_or(0))
    }

    /// Our address and flags with a steered port range, as [`Steer::set_addr`](super::Steer::set_addr) followed
    /// by [`Steer::add_tcp_port_range`](super::Steer::add_tcp_port_range).
    pub fn set_addr_and_range(&self, addr: Ipv4Addr, flags: SteerFlags, range: (u16, u16)) -> Result<(), SteerError> {
        self.update(MAP_CFG, &0u32.to_ne_bytes(), &encode_cfg(addr, flags, Some(range), None))
    }

    /// A listening port, as [`Steer::add_tcp_listener`](super::Steer::add_tcp_listener).
    pub fn add_tcp_listener(&self, port: u16) -> Result<(), SteerError> {
        self.update(MAP_TCP_PORTS, &port_key(port), &[3])
    }

    /// A steered port that is not listening, as [`Steer::add_tcp_port`](super::Steer::add_tcp_port).
    pub fn add_tcp_port(&self, port: u16) -> Result<(), SteerError> {
        self.update(MAP_TCP_PORTS, &port_key(port), &[1])
    }

    /// Queue `queue`'s SYN cookies: their parameters, and on or off.
    pub fn set_cookies(&self, queue: u32, params: &xsk_io::syncookies::CookieParams, on: bool) -> Result<(), SteerError> {
        check_queue(queue)?;
        self.update(MAP_SYN_COOKIES, &queue.to_ne_bytes(), &params.encode())?;
        let mut slot = [0u8; xsk_io::acks::SLOT_BYTES];
        slot[xsk_io::acks::SLOT_COOKIES_ON] = u8::from(on);
        self.update(MAP_ACK_STATE, &queue.to_ne_bytes(), &slot)
    }

    /// Runs the program once on `frame` (received on queue 0): what it did,
    /// and the frame as it left it.
    pub fn run(&mut self, frame: &[u8]) -> Result<(Verdict, Vec<u8>), SteerError> {
        let prog = self.obj.progs_mut().find(|p| p.name() == PROG_NAME).ok_or_else(|| missing(format!("program {PROG_NAME}")))?;
        let mut out = vec![0u8; frame.len() + 256];
        let input = libbpf_rs::ProgramInput { data_in: Some(frame), data_out: Some(&mut out), ..Default::default() };
        let o = prog.test_run(input).map_err(|source| SteerError::Map { map: "-", op: "BPF_PROG_RUN".into(), source })?;
        let verdict = match o.return_value {
            0 => Verdict::Aborted,
            1 => Verdict::Drop,
            2 => Verdict::Pass,
            3 => Verdict::Tx,
            4 => Verdict::Redirect,
            v => Verdict::Other(v),
        };
        let data = o.data.map(|d| d.to_vec()).unwrap_or_default();
        Ok((verdict, data))
    }
}
