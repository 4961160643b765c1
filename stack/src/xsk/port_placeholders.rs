//! Shared-address mode: the ports the stack takes from the kernel.
//!
//! The stack and the kernel share one IPv4 address (and IPv6 one, if the stack
//! serves IPv6: the XDP program steers a port in both families), so a TCP port belongs to
//! exactly one of them. The stack steers only the ports it uses (its
//! listening ports and the local ports of its live connections) and holds
//! each one in the kernel with a placeholder socket, bound but never
//! listening: no kernel program can take the port while the stack has it,
//! and a port a kernel program already has is refused to the stack (bind
//! fails) instead of being stolen from under a running connection. Shards
//! share one `PortPlaceholders`, so a listening port held by all of them is
//! released when the last lets go.

use std::collections::HashMap;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

use xsk_device::steer::Steer;

/// The ports the stack holds in the kernel, each with its placeholder sockets.
pub(crate) struct PortPlaceholders {
    addr: Ipv4Addr,
    addr6: Option<Ipv6Addr>,
    held: Mutex<HashMap<u16, Held>>,
}

/// A port's placeholders (IPv4, and IPv6 where the stack has it) and how many shards
/// hold it.
struct Held {
    _v4: OwnedFd,
    _v6: Option<OwnedFd>,
    shards: u32,
}

impl PortPlaceholders {
    pub(crate) fn new(addr: Ipv4Addr, addr6: Option<Ipv6Addr>) -> Arc<PortPlaceholders> {
        Arc::new(PortPlaceholders { addr, addr6, held: Mutex::new(HashMap::new()) })
    }

    /// Takes `port` from the kernel and steers it to the stack. Fails with
    /// `AddrInUse` when a kernel socket has it.
    pub(crate) fn claim(&self, port: u16, steer: Option<&Steer>) -> io::Result<()> {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(h) = held.get_mut(&port) {
            h.shards += 1;
            return Ok(());
        }
        let fd = bind_placeholder(self.addr, port)?;
        let fd6 = match self.addr6.map(|a| bind_placeholder6(a, port)).transpose() {
            Ok(fd) => fd,
            // The address is not usable (still tentative, or gone): no kernel socket can
            // have the port on it either.
            Err(e) if e.raw_os_error() == Some(libc::EADDRNOTAVAIL) => {
                tracing::warn!("port {port}: the kernel's IPv6 address {:?} is not usable yet: {e}", self.addr6);
                None
            }
            Err(e) => return Err(e),
        };
        if let Some(s) = steer {
            s.add_tcp_port(port).map_err(io::Error::other)?;
        }
        held.insert(port, Held { _v4: fd, _v6: fd6, shards: 1 });
        Ok(())
    }

    /// Gives `port` back: unsteered, then the placeholder closed.
    pub(crate) fn release(&self, port: u16, steer: Option<&Steer>) {
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let Some(h) = held.get_mut(&port) else { return };
        h.shards -= 1;
        if h.shards == 0 {
            if let Some(s) = steer {
                let _ = s.remove_tcp_port(port);
            }
            held.remove(&port);
        }
    }

    /// Ports held now.
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) fn held(&self) -> usize {
        self.held.lock().map(|h| h.len()).unwrap_or(0)
    }
}

/// A TCP socket bound to `addr:port` without SO_REUSEADDR, never listening.
fn bind_placeholder(addr: Ipv4Addr, port: u16) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with constant arguments; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let sa = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(addr).to_be() },
        sin_zero: [0; 8],
    };
    // SAFETY: `sa` is a valid sockaddr_in and the length passed is its size.
    let r = unsafe {
        libc::bind(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            &sa as *const libc::sockaddr_in as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// A TCP socket bound to `[addr]:port` (IPv6 only) without SO_REUSEADDR, never listening
/// (the standard library's would listen, and take what reached the kernel).
fn bind_placeholder6(addr: Ipv6Addr, port: u16) -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with constant arguments; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_INET6, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let raw = std::os::fd::AsRawFd::as_raw_fd(&fd);
    let one: libc::c_int = 1;
    // SAFETY: `one` is a c_int and the length passed is its size.
    unsafe {
        libc::setsockopt(
            raw,
            libc::IPPROTO_IPV6,
            libc::IPV6_V6ONLY,
            &one as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    let sa = libc::sockaddr_in6 {
        sin6_family: libc::AF_INET6 as libc::sa_family_t,
        sin6_port: port.to_be(),
        sin6_flowinfo: 0,
        sin6_addr: libc::in6_addr { s6_addr: addr.octets() },
        sin6_scope_id: 0,
    };
    // SAFETY: `sa` is a valid sockaddr_in6 and the length passed is its size.
    let r = unsafe {
        libc::bind(
            raw,
            &sa as *const libc::sockaddr_in6 as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_the_kernel_has_is_refused_and_a_claimed_one_is_held() {
        // Loopback needs no root: a kernel listener takes a port ...
        let l = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let taken = l.local_addr().unwrap().port();
        let c = PortPlaceholders::new(Ipv4Addr::LOCALHOST, None);
        let e = c.claim(taken, None).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        drop(l);
        // ... and once the stack holds a port, the kernel cannot bind it.
        let free = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap().local_addr().unwrap().port();
        c.claim(free, None).unwrap();
        c.claim(free, None).unwrap(); // a second shard
        assert!(std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, free)).is_err());
        c.release(free, None);
        assert!(std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, free)).is_err(), "still held by one shard");
        c.release(free, None);
        assert_eq!(c.held(), 0);
        assert!(std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, free)).is_ok());
    }
}
