//! Addresses of an interface, as the calling thread's network namespace sees
//! them (ioctl and getifaddrs, not sysfs), and MAC address text.
//!
//! The lookups fail with the OS error: `InvalidInput` for an empty or too
//! long name, `ENODEV` for no such interface in this namespace.

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

fn ifreq(ifname: &str) -> io::Result<libc::ifreq> {
    if ifname.is_empty() || ifname.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("bad interface name {ifname:?}")));
    }
    // SAFETY: ifreq is plain data; all-zero is a valid value.
    let mut r: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in r.ifr_name.iter_mut().zip(ifname.bytes()) {
        *d = s as libc::c_char;
    }
    Ok(r)
}

fn ioctl(ifname: &str, req: libc::c_ulong) -> io::Result<libc::ifreq> {
    ioctl_with(ifreq(ifname)?, req)
}

fn ioctl_with(mut r: libc::ifreq, req: libc::c_ulong) -> io::Result<libc::ifreq> {
    // SAFETY: plain socket call; the fd is checked and owned.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fresh descriptor owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: `r` is a valid ifreq for the SIOC[GS]IF* requests used here,
    // which read and write only inside it.
    if unsafe { libc::ioctl(fd.as_raw_fd(), req as _, &mut r) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r)
}

/// The interface's MAC address (`SIOCGIFHWADDR`).
pub fn mac(ifname: &str) -> io::Result<[u8; 6]> {
    let r = ioctl(ifname, libc::SIOCGIFHWADDR)?;
    // SAFETY: SIOCGIFHWADDR filled the ifru_hwaddr member of the union.
    let sa = unsafe { r.ifr_ifru.ifru_hwaddr };
    let mut m = [0u8; 6];
    for (d, s) in m.iter_mut().zip(sa.sa_data.iter()) {
        *d = *s as u8;
    }
    Ok(m)
}

/// The interface's MTU in bytes (`SIOCGIFMTU`): the largest IP packet, L2
/// header not included.
pub fn mtu(ifname: &str) -> io::Result<u32> {
    let r = ioctl(ifname, libc::SIOCGIFMTU)?;
    // SAFETY: SIOCGIFMTU filled the ifru_mtu member of the union.
    Ok(unsafe { r.ifr_ifru.ifru_mtu } as u32)
}

/// Sets the interface's MTU (`SIOCSIFMTU`, like `ip link set dev IF mtu N`).
/// Crate-internal: every change the crate makes to a device goes through the
/// tuning and its crash-safe record.
pub(crate) fn set_mtu(ifname: &str, mtu: u32) -> io::Result<()> {
    let mut r = ifreq(ifname)?;
    r.ifr_ifru.ifru_mtu = i32::try_from(mtu).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "mtu too large"))?;
    ioctl_with(r, libc::SIOCSIFMTU).map(drop)
}

/// The first IPv4 address and prefix length on the interface; `Ok(None)` if
/// it has none (or does not exist: `getifaddrs` lists only what is there).
pub fn ipv4(ifname: &str) -> io::Result<Option<(Ipv4Addr, u8)>> {
    Ok(ipv4_all()?.into_iter().find(|(n, _, _)| n == ifname).map(|(_, a, p)| (a, p)))
}

/// The first global IPv6 address (not link-local, loopback or multicast) and prefix
/// length on the interface; `Ok(None)` if it has none.
pub fn ipv6(ifname: &str) -> io::Result<Option<(Ipv6Addr, u8)>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut found = None;
    let mut p = head;
    while !p.is_null() && found.is_none() {
        // SAFETY: `p` walks the list getifaddrs returned; every node, name
        // and sockaddr stays valid until freeifaddrs.
        unsafe {
            let ifa = &*p;
            if !ifa.ifa_addr.is_null()
                && (*ifa.ifa_addr).sa_family as i32 == libc::AF_INET6
                && std::ffi::CStr::from_ptr(ifa.ifa_name).to_bytes() == ifname.as_bytes()
            {
                let a = Ipv6Addr::from((*(ifa.ifa_addr as *const libc::sockaddr_in6)).sin6_addr.s6_addr);
                let prefix = if ifa.ifa_netmask.is_null() {
                    128
                } else {
                    let m = (*(ifa.ifa_netmask as *const libc::sockaddr_in6)).sin6_addr.s6_addr;
                    u128::from_be_bytes(m).count_ones() as u8
                };
                let link_local = a.segments()[0] & 0xffc0 == 0xfe80;
                if !link_local && !a.is_loopback() && !a.is_multicast() && !a.is_unspecified() {
                    found = Some((a, prefix));
                }
            }
            p = ifa.ifa_next;
        }
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(found)
}

/// The interfaces in the calling thread's network namespace that have `addr` (none when
/// they cannot be listed): for a dedicated address that must not be the kernel's.
pub fn owners_of(addr: Ipv4Addr) -> Vec<String> {
    ipv4_all().unwrap_or_default().into_iter().filter(|(_, a, _)| *a == addr).map(|(n, _, _)| n).collect()
}

/// Every IPv4 address in the calling thread's network namespace, as
/// (interface, address, prefix length), in `getifaddrs` order.
pub fn ipv4_all() -> io::Result<Vec<(String, Ipv4Addr, u8)>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut found = Vec::new();
    let mut p = head;
    while !p.is_null() {
        // SAFETY: `p` walks the list getifaddrs returned; every node, name
        // and sockaddr stays valid until freeifaddrs.
        unsafe {
            let ifa = &*p;
            if !ifa.ifa_addr.is_null() && (*ifa.ifa_addr).sa_family as i32 == libc::AF_INET {
                let name = std::ffi::CStr::from_ptr(ifa.ifa_name).to_string_lossy().into_owned();
                let a = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                let prefix = if ifa.ifa_netmask.is_null() {
                    32
                } else {
                    u32::from_be((*(ifa.ifa_netmask as *const libc::sockaddr_in)).sin_addr.s_addr).count_ones() as u8
                };
                found.push((name, Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)), prefix));
            }
            p = ifa.ifa_next;
        }
    }
    // SAFETY: `head` came from getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(found)
}

/// Whether the interface has a carrier (`/sys/class/net/IF/carrier`; sysfs must show the
/// calling thread's namespace: `ip netns exec` remounts it). `None` when it cannot be read
/// (also for an interface that is down). `IFF_RUNNING` from [`flags`] is the operational
/// state instead, which lags the carrier and stays off on some links that pass traffic.
pub fn carrier(ifname: &str) -> Option<bool> {
    let s = std::fs::read_to_string(format!("/sys/class/net/{ifname}/carrier")).ok()?;
    Some(s.trim() == "1")
}

/// The interface's flags (`SIOCGIFFLAGS`: `libc::IFF_UP`, `IFF_RUNNING`
/// (carrier), `IFF_LOOPBACK`, ...).
pub fn flags(ifname: &str) -> io::Result<i32> {
    let r = ioctl(ifname, libc::SIOCGIFFLAGS)?;
    // SAFETY: SIOCGIFFLAGS filled the ifru_flags member of the union.
    Ok(i32::from(unsafe { r.ifr_ifru.ifru_flags }) & 0xffff)
}

/// Parses `"aa:bb:cc:dd:ee:ff"` (six hex bytes, colon-separated, either
/// case); the error names the input.
pub fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(format!("bad MAC address {s:?}"));
    }
    let mut m = [0u8; 6];
    for (o, p) in m.iter_mut().zip(parts) {
        *o = u8::from_str_radix(p, 16).map_err(|_| format!("bad MAC address {s:?}"))?;
    }
    Ok(m)
}

/// Formats a MAC address as `"aa:bb:cc:dd:ee:ff"` (lower case).
pub fn format_mac(m: &[u8; 6]) -> String {
    m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

#[cfg(test)]
mod tests {
    #[test]
    fn loopback_has_127_0_0_1() {
        let (a, p) = super::ipv4("lo").unwrap().expect("lo has an IPv4 address");
        assert_eq!(a, std::net::Ipv4Addr::LOCALHOST);
        assert_eq!(p, 8);
        assert_eq!(super::mtu("lo").unwrap(), 65536);
        assert!(super::mac("nonexistent0").is_err());
        let f = super::flags("lo").unwrap();
        assert!(f & libc::IFF_LOOPBACK != 0 && f & libc::IFF_UP != 0, "lo is up and loopback: {f:#x}");
    }
}
