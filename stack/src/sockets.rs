//! The socket calls the kernel-TCP backends share (epoll's and io_uring's): making, binding
//! and listening on IPv4 TCP sockets, and their options.

use std::io;
use std::mem;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The listen backlog: a connection storm of thousands of clients needs the queue (std's
/// `listen` uses a smaller one).
pub(crate) const LISTEN_BACKLOG: libc::c_int = 4096;

pub(crate) fn cvt(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// A TCP socket, close-on-exec, non-blocking if `nonblocking`.
pub(crate) fn tcp_socket(nonblocking: bool) -> io::Result<OwnedFd> {
    let flags = libc::SOCK_STREAM | libc::SOCK_CLOEXEC | if nonblocking { libc::SOCK_NONBLOCK } else { 0 };
    // SAFETY: socket() takes no pointers; the result is checked by cvt.
    let fd = cvt(unsafe { libc::socket(libc::AF_INET, flags, 0) })?;
    // SAFETY: fd was just returned by socket() and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An IPv6 TCP socket.
pub(crate) fn tcp_socket6(nonblocking: bool) -> io::Result<OwnedFd> {
    let flags = libc::SOCK_STREAM | libc::SOCK_CLOEXEC | if nonblocking { libc::SOCK_NONBLOCK } else { 0 };
    // SAFETY: socket() takes no pointers; the result is checked by cvt.
    let fd = cvt(unsafe { libc::socket(libc::AF_INET6, flags, 0) })?;
    // SAFETY: fd was just returned by socket() and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(crate) fn sockaddr_in6(addr: std::net::SocketAddrV6) -> (libc::sockaddr_in6, libc::socklen_t) {
    // SAFETY: a zeroed sockaddr_in6 is a valid value of it.
    let mut sa: libc::sockaddr_in6 = unsafe { mem::zeroed() };
    sa.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    sa.sin6_port = addr.port().to_be();
    sa.sin6_addr.s6_addr = addr.ip().octets();
    sa.sin6_scope_id = addr.scope_id();
    (sa, mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t)
}

pub(crate) fn set_int_opt(fd: RawFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: the option value points at `value`, a c_int that outlives the call, with its size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    cvt(rc).map(drop)
}

#[cfg(all(test, feature = "uring"))]
pub(crate) fn get_int_opt(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut value: libc::c_int = 0;
    let mut len = mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `value` and `len` are live and writable; the kernel writes at most `len` bytes.
    cvt(unsafe { libc::getsockopt(fd, level, name, (&mut value as *mut libc::c_int).cast(), &mut len) })?;
    Ok(value)
}

pub(crate) fn sockaddr_in(addr: SocketAddrV4) -> (libc::sockaddr_in, libc::socklen_t) {
    let sa = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(*addr.ip()).to_be() },
        sin_zero: [0; 8],
    };
    (sa, mem::size_of::<libc::sockaddr_in>() as libc::socklen_t)
}

pub(crate) fn bind(fd: RawFd, addr: SocketAddrV4) -> io::Result<()> {
    let (sa, len) = sockaddr_in(addr);
    // SAFETY: `sa` is a valid sockaddr_in that outlives the call and `len` is its size.
    cvt(unsafe { libc::bind(fd, (&sa as *const libc::sockaddr_in).cast(), len) }).map(drop)
}

pub(crate) fn listen(fd: RawFd) -> io::Result<()> {
    // SAFETY: listen() takes no pointers.
    cvt(unsafe { libc::listen(fd, LISTEN_BACKLOG) }).map(drop)
}

/// The IPv4 peer of a connected socket, also when a dual-stack listener took it (an
/// IPv4-mapped IPv6 address); None for an IPv6 peer.
#[cfg(feature = "uring")]
pub(crate) fn peer_of(fd: RawFd) -> io::Result<Option<SocketAddrV4>> {
    // SAFETY: a zeroed sockaddr_storage is a valid value of it.
    let mut ss: libc::sockaddr_storage = unsafe { mem::zeroed() };
    let mut len = mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `ss` and `len` are live and writable; the kernel writes at most `len` bytes.
    cvt(unsafe { libc::getpeername(fd, (&mut ss as *mut libc::sockaddr_storage).cast(), &mut len) })?;
    if i32::from(ss.ss_family) == libc::AF_INET6 {
        // SAFETY: the family says the storage holds a sockaddr_in6, which it is large enough for.
        let sin6 = unsafe { &*(&ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
        let ip = std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr);
        return Ok(ip.to_ipv4_mapped().map(|a| SocketAddrV4::new(a, u16::from_be(sin6.sin6_port))));
    }
    if i32::from(ss.ss_family) != libc::AF_INET {
        return Ok(None);
    }
    // SAFETY: the family says the storage holds a sockaddr_in, which it is large enough for.
    let sin = unsafe { &*(&ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
    Ok(Some(SocketAddrV4::new(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)), u16::from_be(sin.sin_port))))
}

/// A listening socket on `addr`: SO_REUSEADDR, SO_REUSEPORT if `reuse_port`, the backlog
/// above. `AddrInUse` as the transport error for a taken port. On the unspecified address
/// it serves both families (an IPv6 socket that also takes IPv4, as the xsk backend's
/// listeners do), unless the kernel has no IPv6.
pub(crate) fn listener(addr: SocketAddrV4, reuse_port: bool, nonblocking: bool) -> Result<OwnedFd, crate::TransportError> {
    if addr.ip().is_unspecified() {
        match dual_stack_socket(nonblocking) {
            Ok(fd) => return configure_listener(fd, addr.port(), reuse_port, |fd| bind6_any(fd, addr.port())),
            Err(e) if e.raw_os_error() == Some(libc::EAFNOSUPPORT) => {}
            Err(e) => return Err(e.into()),
        }
    }
    configure_listener(tcp_socket(nonblocking)?, addr.port(), reuse_port, |fd| bind(fd, addr))
}

fn configure_listener(
    fd: OwnedFd,
    port: u16,
    reuse_port: bool,
    bind: impl FnOnce(RawFd) -> io::Result<()>,
) -> Result<OwnedFd, crate::TransportError> {
    set_int_opt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    if reuse_port {
        set_int_opt(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
    }
    bind(fd.as_raw_fd()).map_err(|e| {
        if e.kind() == io::ErrorKind::AddrInUse {
            crate::TransportError::AddrInUse(port)
        } else {
            e.into()
        }
    })?;
    Ok(fd)
}

/// A listener's address as the IPv4 API reports it: a dual-stack listener's `[::]:port`
/// is `0.0.0.0:port`, an IPv4-mapped address the IPv4 one, another IPv6 address none.
pub(crate) fn listener_v4(a: std::net::SocketAddr) -> Option<SocketAddrV4> {
    match a {
        std::net::SocketAddr::V4(a) => Some(a),
        std::net::SocketAddr::V6(a) if a.ip().is_unspecified() => Some(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, a.port())),
        std::net::SocketAddr::V6(a) => a.ip().to_ipv4_mapped().map(|m| SocketAddrV4::new(m, a.port())),
    }
}

/// An IPv6 TCP socket that takes IPv4 too (IPV6_V6ONLY off, whatever the sysctl says).
fn dual_stack_socket(nonblocking: bool) -> io::Result<OwnedFd> {
    let flags = libc::SOCK_STREAM | libc::SOCK_CLOEXEC | if nonblocking { libc::SOCK_NONBLOCK } else { 0 };
    // SAFETY: socket() takes no pointers; the result is checked by cvt.
    let fd = cvt(unsafe { libc::socket(libc::AF_INET6, flags, 0) })?;
    // SAFETY: fd was just returned by socket() and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    set_int_opt(fd.as_raw_fd(), libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 0)?;
    Ok(fd)
}

fn bind6_any(fd: RawFd, port: u16) -> io::Result<()> {
    // SAFETY: a zeroed sockaddr_in6 is the unspecified address, port 0.
    let mut sa: libc::sockaddr_in6 = unsafe { mem::zeroed() };
    sa.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    sa.sin6_port = port.to_be();
    let len = mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t;
    // SAFETY: `sa` is a valid sockaddr_in6 that outlives the call and `len` is its size.
    cvt(unsafe { libc::bind(fd, (&sa as *const libc::sockaddr_in6).cast(), len) }).map(drop)
}

/// Binds an outgoing socket to the `nth` of `sources` addresses from `base` (no-op for the
/// unspecified address), deferring the port to connect() so that the 4-tuple, not the local
/// port alone, must be unique: tens of thousands of connections per source address work.
pub(crate) fn bind_source(fd: RawFd, base: Ipv4Addr, sources: u32, nth: u32) -> io::Result<()> {
    if base.is_unspecified() {
        return Ok(());
    }
    set_int_opt(fd, libc::IPPROTO_IP, libc::IP_BIND_ADDRESS_NO_PORT, 1)?;
    let src = Ipv4Addr::from(u32::from(base).wrapping_add(nth % sources.max(1)));
    bind(fd, SocketAddrV4::new(src, 0))
}
