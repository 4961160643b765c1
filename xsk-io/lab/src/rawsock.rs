//! An AF_PACKET socket on one interface: raw frames in and out, for tests,
//! fault injection and tools that play the peer of a port.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use xsk_io::sys::if_nametoindex;

/// A libc return value as a `Result`: negative means `errno` holds the error.
/// (xsk-io has the same helper but keeps its raw syscall wrappers private.)
fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

const ETH_P_ALL: u16 = 0x0003;

/// An `AF_PACKET`/`SOCK_RAW` socket bound to one interface for every
/// EtherType (`ETH_P_ALL`); closed on drop. Needs `CAP_NET_RAW`.
#[derive(Debug)]
pub struct RawSocket {
    fd: OwnedFd,
    ifindex: u32,
}

impl RawSocket {
    /// Opens a socket bound to `ifname` in the calling thread's network namespace.
    pub fn open(ifname: &str) -> io::Result<RawSocket> {
        let ifindex = if_nametoindex(ifname)?;
        // SAFETY: plain syscall; the fd is checked and then owned.
        let fd = cvt(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, ETH_P_ALL.to_be() as i32) })?;
        // SAFETY: fresh descriptor, owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sockaddr_ll is plain data; zeroed is a valid value.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = ETH_P_ALL.to_be();
        sll.sll_ifindex = ifindex as i32;
        // SAFETY: `sll` is a valid sockaddr_ll of the size we pass.
        cvt(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        })?;
        Ok(RawSocket { fd, ifindex })
    }

    /// Index of the interface it is bound to.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Sends one whole Ethernet frame.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: reads `frame.len()` bytes from a live slice.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Receives one frame into `buf`, waiting at most `timeout`; None on timeout.
    /// Frames this socket itself sent (PACKET_OUTGOING) are skipped.
    pub fn recv(&self, buf: &mut [u8], timeout: Duration) -> io::Result<Option<usize>> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd for the call.
            let r = cvt(unsafe { libc::poll(&mut pfd, 1, left.as_millis().min(i32::MAX as u128) as i32) })?;
            if r == 0 {
                return Ok(None);
            }
            // SAFETY: see above; sockaddr_ll zeroed is valid.
            let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut alen = std::mem::size_of::<libc::sockaddr_ll>() as u32;
            // SAFETY: writes at most buf.len() bytes into `buf` and at most
            // `alen` bytes into `sll`.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                    (&mut sll as *mut libc::sockaddr_ll).cast(),
                    &mut alen,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::WouldBlock {
                    continue;
                }
                return Err(e);
            }
            if sll.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            return Ok(Some(n as usize));
        }
    }
}
