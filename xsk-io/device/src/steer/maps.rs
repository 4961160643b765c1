//! How userspace writes the program's maps: queue ids checked against the
//! socket map, the port map's keys, the config value, per-CPU sums.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::error::SteerError;
use super::flags::SteerFlags;
use super::object::MAX_QUEUES;

pub(super) fn check_queue(queue_id: u32) -> Result<(), SteerError> {
    if queue_id >= MAX_QUEUES {
        return Err(SteerError::QueueOutOfRange {
            queue_id,
            max: MAX_QUEUES,
        });
    }
    Ok(())
}

/// Key of `tcp_ports`: the port in host order, as a `u32`.
pub(super) fn port_key(port: u16) -> [u8; 4] {
    u32::from(port).to_ne_bytes()
}

/// Bytes of `struct steer_cfg`.
pub(super) const CFG_BYTES: usize = 32;

/// Value of `cfg[0]`: `struct steer_cfg { __be32 addr; __u32 flags; __u16
/// port_lo; __u16 port_hi; __u32 v6; __u8 addr6[16]; }` (ports in host order;
/// `port_hi` 0: no range; `v6` 1 with `addr6` when IPv6 is steered, all-zero
/// `addr6`: any address).
pub(super) fn encode_cfg(addr: Ipv4Addr, flags: SteerFlags, range: Option<(u16, u16)>, addr6: Option<Ipv6Addr>) -> [u8; CFG_BYTES] {
    let mut v = [0u8; CFG_BYTES];
    v[..4].copy_from_slice(&addr.octets()); // network order
    v[4..8].copy_from_slice(&flags.bits().to_ne_bytes());
    if let Some((lo, hi)) = range {
        // Port 0 is no TCP port: a range from 0 starts at 1, and one that
        // is only port 0 is none.
        let lo = lo.max(1);
        if hi >= lo {
            v[8..10].copy_from_slice(&lo.to_ne_bytes());
            v[10..12].copy_from_slice(&hi.to_ne_bytes());
        }
    }
    if let Some(a) = addr6 {
        v[12..16].copy_from_slice(&1u32.to_ne_bytes());
        v[16..32].copy_from_slice(&a.octets());
    }
    v
}

/// The one range the config holds, extended by `new`: Some if `new` is the
/// first range or overlaps or touches the current one, None if it cannot be
/// one range with it.
pub(super) fn merge_range(cur: Option<(u16, u16)>, new: (u16, u16)) -> Option<(u16, u16)> {
    match cur {
        None => Some(new),
        Some((lo, hi)) => {
            let touches = u32::from(new.0) <= u32::from(hi) + 1 && u32::from(lo) <= u32::from(new.1) + 1;
            touches.then(|| (lo.min(new.0), hi.max(new.1)))
        }
    }
}

/// Sum of per-CPU `u64` values (each as native-endian bytes).
pub(super) fn sum_percpu(values: &[Vec<u8>]) -> u64 {
    values
        .iter()
        .filter_map(|v| v.get(..8))
        .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
        .fold(0u64, u64::wrapping_add)
}
