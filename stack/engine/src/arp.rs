//! What the engine and the driver read of ARP frames themselves: the target
//! of a request smoltcp sends (the driver's shared-address mode answers it
//! from the kernel's table).

use std::net::Ipv4Addr;

/// An Ethernet/IPv4 ARP frame (14 + 28 bytes): all smoltcp sends.
pub const FRAME_LEN: usize = 42;

/// The target of an ARP request frame.
pub fn request_target(f: &[u8]) -> Option<Ipv4Addr> {
    (is_arp(f) && f[20..22] == [0, 1]).then(|| Ipv4Addr::new(f[38], f[39], f[40], f[41]))
}

/// Whether `f` is an Ethernet ARP frame at least [`FRAME_LEN`] long.
pub fn is_arp(f: &[u8]) -> bool {
    f.len() >= FRAME_LEN && f[12..14] == [0x08, 0x06]
}
