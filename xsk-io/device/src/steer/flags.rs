//! What to steer besides the TCP ports.

use std::fmt;
use std::ops::{BitAnd, BitOr, BitOrAssign};

/// What to steer besides the TCP ports: bit 0 ARP, bit 1 ICMP (the `flags`
/// word of the program's `cfg` map).
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SteerFlags(u32);

impl SteerFlags {
    /// Only the TCP ports.
    pub const NONE: SteerFlags = SteerFlags(0);
    /// ARP frames whose target protocol address is the configured address.
    pub const ARP: SteerFlags = SteerFlags(1 << 0);
    /// ICMP to the configured address, and non-first TCP/ICMP fragments to
    /// it: for an address dedicated to the userspace stack.
    pub const ICMP: SteerFlags = SteerFlags(1 << 1);
    /// Every known flag.
    pub const ALL: SteerFlags = SteerFlags(Self::ARP.0 | Self::ICMP.0);

    /// The raw bits, as the program sees them.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// `None` if `bits` has unknown bits set.
    pub const fn from_bits(bits: u32) -> Option<SteerFlags> {
        if bits & !Self::ALL.0 == 0 {
            Some(SteerFlags(bits))
        } else {
            None
        }
    }

    /// No flags: [`NONE`](Self::NONE).
    pub const fn empty() -> SteerFlags {
        Self::NONE
    }

    /// True if no flag is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// True if every flag of `other` is set in `self`.
    pub const fn contains(self, other: SteerFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// Every flag set in `self` or `other` (also `self | other`).
    pub const fn union(self, other: SteerFlags) -> SteerFlags {
        SteerFlags(self.0 | other.0)
    }
}

impl BitOr for SteerFlags {
    type Output = SteerFlags;
    fn bitor(self, rhs: SteerFlags) -> SteerFlags {
        self.union(rhs)
    }
}

impl BitOrAssign for SteerFlags {
    fn bitor_assign(&mut self, rhs: SteerFlags) {
        *self = self.union(rhs);
    }
}

impl BitAnd for SteerFlags {
    type Output = SteerFlags;
    fn bitand(self, rhs: SteerFlags) -> SteerFlags {
        SteerFlags(self.0 & rhs.0)
    }
}

impl fmt::Debug for SteerFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("NONE");
        }
        let mut sep = "";
        for (flag, name) in [(Self::ARP, "ARP"), (Self::ICMP, "ICMP")] {
            if self.contains(flag) {
                write!(f, "{sep}{name}")?;
                sep = " | ";
            }
        }
        Ok(())
    }
}
