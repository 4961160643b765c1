//! The kernel's IPv6 neighbour table, for shared mode (`arp.rs`): IPv4's is a text file
//! (`/proc/net/arp`), IPv6's is only in rtnetlink, so this asks for it (an RTM_GETNEIGH
//! dump). Message layout from include/uapi/linux/netlink.h, rtnetlink.h and
//! neighbour.h: `nlmsghdr` (16 bytes), `ndmsg` (12), then attributes (`rtattr`: u16
//! length, u16 type, payload padded to 4 bytes).

use std::collections::HashMap;
use std::io;
use std::net::Ipv6Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const NLMSG_HDRLEN: usize = 16;
const NDMSG_LEN: usize = 12;
const NDA_DST: u16 = 1;
const NDA_LLADDR: u16 = 2;
/// States whose link-layer address is usable: REACHABLE, STALE, DELAY, PROBE, NOARP,
/// PERMANENT (not INCOMPLETE, FAILED or NONE).
const NUD_VALID: u16 = 0x02 | 0x04 | 0x08 | 0x10 | 0x40 | 0x80;

/// The IPv6 neighbours of interface `ifname` with a usable MAC, in this thread's
/// network namespace.
pub(crate) fn kernel_table6(ifname: &str) -> io::Result<HashMap<Ipv6Addr, [u8; 6]>> {
    let name = std::ffi::CString::new(ifname).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: the name is a live NUL-terminated string.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if ifindex == 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: socket() takes no pointers; the result is checked below.
    let fd = unsafe { libc::socket(libc::AF_NETLINK, libc::SOCK_RAW | libc::SOCK_CLOEXEC, libc::NETLINK_ROUTE) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just returned by socket() and is owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = Vec::with_capacity(NLMSG_HDRLEN + NDMSG_LEN);
    req.extend_from_slice(&((NLMSG_HDRLEN + NDMSG_LEN) as u32).to_ne_bytes());
    req.extend_from_slice(&libc::RTM_GETNEIGH.to_ne_bytes());
    req.extend_from_slice(&((libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16).to_ne_bytes());
    req.extend_from_slice(&1u32.to_ne_bytes()); // sequence number
    req.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel's
    req.push(libc::AF_INET6 as u8);
    req.extend_from_slice(&[0; NDMSG_LEN - 1]);
    // SAFETY: the buffer is live for the call and its length is passed.
    if unsafe { libc::send(fd.as_raw_fd(), req.as_ptr().cast(), req.len(), 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut table = HashMap::new();
    let mut buf = vec![0u8; 32 << 10];
    loop {
        // SAFETY: the buffer is live for the call and its length is passed.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 || parse_dump(&buf[..n as usize], ifindex, &mut table)? {
            return Ok(table);
        }
    }
}

/// The neighbours in one buffer of the dump's answer into `table`; true at its end.
fn parse_dump(mut data: &[u8], ifindex: u32, table: &mut HashMap<Ipv6Addr, [u8; 6]>) -> io::Result<bool> {
    let proto = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("rtnetlink neighbour dump: {what}"));
    while data.len() >= NLMSG_HDRLEN {
        let len = u32::from_ne_bytes(data[0..4].try_into().unwrap_or_default()) as usize;
        let ty = u16::from_ne_bytes([data[4], data[5]]);
        if len < NLMSG_HDRLEN || len > data.len() {
            return Err(proto("message length"));
        }
        let body = &data[NLMSG_HDRLEN..len];
        data = &data[align4(len).min(data.len())..];
        match ty as libc::c_int {
            libc::NLMSG_DONE => return Ok(true),
            libc::NLMSG_ERROR => {
                let err = body.get(0..4).map_or(0, |b| i32::from_ne_bytes(b.try_into().unwrap_or_default()));
                return Err(io::Error::from_raw_os_error(-err));
            }
            t if t == libc::RTM_NEWNEIGH as libc::c_int && body.len() >= NDMSG_LEN => {
                let family = body[0];
                let index = u32::from_ne_bytes(body[4..8].try_into().unwrap_or_default());
                let state = u16::from_ne_bytes([body[8], body[9]]);
                if family != libc::AF_INET6 as u8 || index != ifindex || state & NUD_VALID == 0 {
                    continue;
                }
                let (mut dst, mut mac) = (None, None);
                let mut attrs = &body[NDMSG_LEN..];
                while attrs.len() >= 4 {
                    let alen = u16::from_ne_bytes([attrs[0], attrs[1]]) as usize;
                    let aty = u16::from_ne_bytes([attrs[2], attrs[3]]);
                    if alen < 4 || alen > attrs.len() {
                        break;
                    }
                    let payload = &attrs[4..alen];
                    match aty {
                        NDA_DST => dst = <[u8; 16]>::try_from(payload).ok().map(Ipv6Addr::from),
                        NDA_LLADDR => mac = <[u8; 6]>::try_from(payload).ok(),
                        _ => {}
                    }
                    attrs = &attrs[align4(alen).min(attrs.len())..];
                }
                if let (Some(ip), Some(mac)) = (dst, mac) {
                    table.insert(ip, mac);
                }
            }
            _ => {}
        }
    }
    Ok(false)
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One RTM_NEWNEIGH message: family, ifindex, state, then the attributes.
    fn neigh(ifindex: u32, state: u16, dst: Ipv6Addr, mac: Option<[u8; 6]>) -> Vec<u8> {
        let mut body = vec![libc::AF_INET6 as u8, 0, 0, 0];
        body.extend_from_slice(&ifindex.to_ne_bytes());
        body.extend_from_slice(&state.to_ne_bytes());
        body.extend_from_slice(&[0, 0]);
        body.extend_from_slice(&20u16.to_ne_bytes());
        body.extend_from_slice(&NDA_DST.to_ne_bytes());
        body.extend_from_slice(&dst.octets());
        if let Some(m) = mac {
            body.extend_from_slice(&10u16.to_ne_bytes());
            body.extend_from_slice(&NDA_LLADDR.to_ne_bytes());
            body.extend_from_slice(&m);
            body.extend_from_slice(&[0, 0]);
        }
        let mut m = ((NLMSG_HDRLEN + body.len()) as u32).to_ne_bytes().to_vec();
        m.extend_from_slice(&libc::RTM_NEWNEIGH.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(&body);
        m
    }

    #[test]
    fn parses_usable_neighbours_of_one_interface() {
        let (a, b, c, d): (Ipv6Addr, Ipv6Addr, Ipv6Addr, Ipv6Addr) =
            ("2001:2::1".parse().unwrap(), "2001:2::2".parse().unwrap(), "2001:2::3".parse().unwrap(), "2001:2::4".parse().unwrap());
        let mut dump = neigh(5, 0x02, a, Some([2, 0, 0, 0, 0, 1]));
        dump.extend(neigh(5, 0x01, b, None)); // INCOMPLETE: no MAC yet
        dump.extend(neigh(6, 0x04, c, Some([2, 0, 0, 0, 0, 3]))); // another interface
        dump.extend(neigh(5, 0x04, d, Some([2, 0, 0, 0, 0, 4]))); // STALE: still usable
        let mut t = HashMap::new();
        assert!(!parse_dump(&dump, 5, &mut t).unwrap());
        assert_eq!(t.len(), 2, "{t:?}");
        assert_eq!((t[&a], t[&d]), ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 4]));
        let mut done = 20u32.to_ne_bytes().to_vec();
        done.extend_from_slice(&(libc::NLMSG_DONE as u16).to_ne_bytes());
        done.extend_from_slice(&[0; 14]);
        assert!(parse_dump(&done, 5, &mut t).unwrap());
        // Cut anywhere: an error or fewer entries, never a panic.
        for cut in 0..dump.len() {
            let _ = parse_dump(&dump[..cut], 5, &mut HashMap::new());
        }
    }

    /// The loopback interface has no IPv6 neighbours, but the dump answers; a missing
    /// interface is an error.
    #[test]
    fn dumps_the_kernels_table() {
        assert!(kernel_table6("lo").is_ok());
        assert!(kernel_table6("no-such-if0").is_err());
    }
}
