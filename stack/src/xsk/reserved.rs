//! The stack's ephemeral ports, reserved from the kernel in shared-address mode.

use std::ops::RangeInclusive;

/// The kernel's `ip_local_reserved_ports`, restored on drop.
pub(super) struct ReservedPorts {
    before: String,
}

const RESERVED_PORTS: &str = "/proc/sys/net/ipv4/ip_local_reserved_ports";

impl ReservedPorts {
    pub(super) fn reserve(range: &RangeInclusive<u16>) -> std::io::Result<ReservedPorts> {
        let before = std::fs::read_to_string(RESERVED_PORTS)?.trim().to_string();
        let ours = format!("{}-{}", range.start(), range.end());
        let new = if before.is_empty() { ours } else { format!("{before},{ours}") };
        std::fs::write(RESERVED_PORTS, new)?;
        Ok(ReservedPorts { before })
    }
}

impl Drop for ReservedPorts {
    fn drop(&mut self) {
        let _ = std::fs::write(RESERVED_PORTS, if self.before.is_empty() { "\n" } else { &self.before });
    }
}

