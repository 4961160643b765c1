// Heads up! Before working on this file you should read, at least,
// the parts of RFC 1122 that discuss ARP.

use crate::config::IFACE_NEIGHBOR_CACHE_COUNT;
use crate::time::{Duration, Instant};
use crate::wire::{HardwareAddress, IpAddress};

/// A cached neighbor.
///
/// A neighbor mapping translates from a protocol address to a hardware address,
/// and contains the timestamp past which the mapping should be discarded.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Neighbor {
    hardware_addr: HardwareAddress,
    expires_at: Instant,
}

/// An answer to a neighbor cache lookup.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub(crate) enum Answer {
    /// The neighbor address is in the cache and not expired.
    Found(HardwareAddress),
    /// The neighbor address is not in the cache, or has expired.
    NotFound,
    /// The neighbor address is not in the cache, or has expired,
    /// and a lookup has been made recently.
    RateLimited,
}

impl Answer {
    /// Returns whether a valid address was found.
    pub(crate) fn found(&self) -> bool {
        match self {
            Answer::Found(_) => true,
            _ => false,
        }
    }
}

// [xsk-stack patch: neighbor-cache] A hashed table in place of the linear map.
/// Slots a lookup or a fill looks at, from the one an address hashes to: an
/// entry lives within this many slots of its home. A table this small or
/// smaller is searched whole, as the linear map was.
const PROBE: usize = if IFACE_NEIGHBOR_CACHE_COUNT < 8 {
    IFACE_NEIGHBOR_CACHE_COUNT
} else {
    8
};

// [xsk-stack patch: neighbor-rate] Addresses asked for recently, each with the time
// until which it is not asked for again: at most this many at once.
const ASKED_COUNT: usize = if IFACE_NEIGHBOR_CACHE_COUNT < 64 {
    IFACE_NEIGHBOR_CACHE_COUNT
} else {
    64
};

/// A neighbor cache backed by a hashed table with bounded linear probing.
///
/// [xsk-stack patch: neighbor-cache] Upstream keeps a `LinearMap`: every
/// lookup and fill compares against every entry, and a fill into a full map
/// scans it all for the entry to evict, so a cache large enough for a busy
/// flat network costs a scan per packet. Here an address is looked for in
/// at most `PROBE` slots from its hash, and a fill into a full window evicts
/// the entry there that expires first (upstream: in the whole map).
#[derive(Debug)]
pub struct Cache {
    storage: [Option<(IpAddress, Neighbor)>; IFACE_NEIGHBOR_CACHE_COUNT],
    /// [xsk-stack patch: neighbor-rate] Upstream keeps one `silent_until` for the whole
    /// cache: after a request for any address, no other address is asked for during
    /// `SILENT_TIME`, so a client resolving many neighbors learns one a second, and one
    /// that never answers can starve the others for good (upstream issue 1101). RFC 1122
    /// (2.3.2.1) asks for at most one request a second per destination: this is that.
    asked: [Option<(IpAddress, Instant)>; ASKED_COUNT],
}

impl Cache {
    /// Minimum delay between discovery requests, in milliseconds.
    pub(crate) const SILENT_TIME: Duration = Duration::from_millis(1_000);

    /// Neighbor entry lifetime, in milliseconds.
    pub(crate) const ENTRY_LIFETIME: Duration = Duration::from_millis(60_000);

    /// Create a cache.
    pub fn new() -> Self {
        Self {
            storage: [None; IFACE_NEIGHBOR_CACHE_COUNT],
            asked: [None; ASKED_COUNT],
        }
    }

    /// The slot `protocol_addr` hashes to in a table of `len` slots: a
    /// multiplicative (Fibonacci) hash of the address, scaled to the length.
    fn home(protocol_addr: &IpAddress, len: usize) -> usize {
        let x: u32 = match protocol_addr {
            #[cfg(feature = "proto-ipv4")]
            IpAddress::Ipv4(a) => u32::from_be_bytes(a.octets()),
            #[cfg(feature = "proto-ipv6")]
            IpAddress::Ipv6(a) => {
                let o = a.octets();
                let w = |i: usize| u32::from_be_bytes([o[i], o[i + 1], o[i + 2], o[i + 3]]);
                w(0) ^ w(4).rotate_left(7) ^ w(8).rotate_left(14) ^ w(12).rotate_left(21)
            }
        };
        let h = x.wrapping_mul(0x9E37_79B9);
        ((h as u64 * len as u64) >> 32) as usize
    }

    /// The slots of `protocol_addr`'s window in a table of `len` slots, home first:
    /// `PROBE` of them, or all when the table is smaller.
    fn window_in(protocol_addr: &IpAddress, len: usize) -> impl Iterator<Item = usize> {
        let home = Self::home(protocol_addr, len);
        (0..PROBE.min(len)).map(move |i| {
            let s = home + i;
            if s >= len { s - len } else { s }
        })
    }

    /// The slots of `protocol_addr`'s window in `storage`.
    fn window(protocol_addr: &IpAddress) -> impl Iterator<Item = usize> {
        Self::window_in(protocol_addr, IFACE_NEIGHBOR_CACHE_COUNT)
    }

    /// The slot holding `protocol_addr`. Slots are only ever emptied all at
    /// once (`flush`), and a fill takes the first empty slot of the window,
    /// so an address is never found past an empty slot: the search stops there.
    // [xsk-stack patch: ipv4-cost] Inlined: every segment in refreshes its sender here.
    #[inline(always)]
    fn find(&self, protocol_addr: &IpAddress) -> Option<usize> {
        for s in Self::window(protocol_addr) {
            match &self.storage[s] {
                Some((a, _)) if a == protocol_addr => return Some(s),
                Some(_) => {}
                None => return None,
            }
        }
        None
    }

    // [xsk-stack patch: ipv4-cost] Inlined into the fast path in, which calls it for
    // every segment.
    #[inline(always)]
    pub fn reset_expiry_if_existing(
        &mut self,
        protocol_addr: IpAddress,
        source_hardware_addr: HardwareAddress,
        timestamp: Instant,
    ) {
        if let Some(s) = self.find(&protocol_addr)
            && let Some((
                _,
                Neighbor {
                    expires_at,
                    hardware_addr,
                },
            )) = &mut self.storage[s]
            && source_hardware_addr == *hardware_addr
        {
            *expires_at = timestamp + Self::ENTRY_LIFETIME;
        }
    }

    pub fn fill(
        &mut self,
        protocol_addr: IpAddress,
        hardware_addr: HardwareAddress,
        timestamp: Instant,
    ) {
        debug_assert!(protocol_addr.is_unicast());
        debug_assert!(hardware_addr.is_unicast());

        let expires_at = timestamp + Self::ENTRY_LIFETIME;
        self.fill_with_expiration(protocol_addr, hardware_addr, expires_at);
    }

    pub fn fill_with_expiration(
        &mut self,
        protocol_addr: IpAddress,
        hardware_addr: HardwareAddress,
        expires_at: Instant,
    ) {
        debug_assert!(protocol_addr.is_unicast());
        debug_assert!(hardware_addr.is_unicast());

        let neighbor = Neighbor {
            expires_at,
            hardware_addr,
        };
        // The address's own slot, else the window's first empty one, else
        // the window's entry that expires first.
        let mut victim: Option<(usize, Instant)> = None;
        for s in Self::window(&protocol_addr) {
            match &self.storage[s] {
                Some((a, _old)) if *a == protocol_addr => {
                    if _old.hardware_addr != hardware_addr {
                        net_trace!(
                            "replaced {} => {} (was {})",
                            protocol_addr,
                            hardware_addr,
                            _old.hardware_addr
                        );
                    }
                    self.storage[s] = Some((protocol_addr, neighbor));
                    return;
                }
                Some((_, n)) => {
                    if victim.is_none_or(|(_, e)| n.expires_at < e) {
                        victim = Some((s, n.expires_at));
                    }
                }
                None => {
                    net_trace!("filled {} => {} (was empty)", protocol_addr, hardware_addr);
                    self.storage[s] = Some((protocol_addr, neighbor));
                    return;
                }
            }
        }
        // If we're here, the window is full, and we need to evict an entry.
        let (v, _) = victim.expect("empty neighbor cache storage");
        let _old = self.storage[v].replace((protocol_addr, neighbor));
        if let Some((_old_protocol_addr, _old_neighbor)) = _old {
            net_trace!(
                "filled {} => {} (evicted {} => {})",
                protocol_addr,
                hardware_addr,
                _old_protocol_addr,
                _old_neighbor.hardware_addr
            );
        }
    }

    pub(crate) fn lookup(&self, protocol_addr: &IpAddress, timestamp: Instant) -> Answer {
        assert!(protocol_addr.is_unicast());

        if let Some(s) = self.find(protocol_addr)
            && let Some((
                _,
                Neighbor {
                    expires_at,
                    hardware_addr,
                },
            )) = self.storage[s]
            && timestamp < expires_at
        {
            return Answer::Found(hardware_addr);
        }

        // [xsk-stack patch: neighbor-rate] Asked for within SILENT_TIME: wait.
        if self.asked(protocol_addr, timestamp) {
            Answer::RateLimited
        } else {
            Answer::NotFound
        }
    }

    /// [xsk-stack patch: neighbor-rate] Whether a request for `protocol_addr` went out
    /// less than `SILENT_TIME` before `timestamp`.
    pub(crate) fn asked(&self, protocol_addr: &IpAddress, timestamp: Instant) -> bool {
        Self::window_in(protocol_addr, ASKED_COUNT).any(|s| {
            matches!(self.asked[s], Some((a, until)) if a == *protocol_addr && timestamp < until)
        })
    }

    /// [xsk-stack patch: neighbor-rate] A request for `protocol_addr` went out at
    /// `timestamp`: it is not asked for again during `SILENT_TIME`. Its slot, else the
    /// window's first free or quiet again one, else the one whose silence ends first.
    pub(crate) fn limit_rate(&mut self, protocol_addr: IpAddress, timestamp: Instant) {
        let until = timestamp + Self::SILENT_TIME;
        let mut victim: Option<(usize, Instant)> = None;
        for s in Self::window_in(&protocol_addr, ASKED_COUNT) {
            match self.asked[s] {
                Some((a, _)) if a == protocol_addr => {
                    self.asked[s] = Some((protocol_addr, until));
                    return;
                }
                Some((_, t)) if t > timestamp => {
                    if victim.is_none_or(|(_, v)| t < v) {
                        victim = Some((s, t));
                    }
                }
                // Empty, or its silence is over: as good as empty.
                _ => {
                    if victim.is_none_or(|(_, v)| v > timestamp) {
                        victim = Some((s, timestamp));
                    }
                }
            }
        }
        if let Some((s, _)) = victim {
            self.asked[s] = Some((protocol_addr, until));
        }
    }

    pub(crate) fn flush(&mut self) {
        self.storage = [None; IFACE_NEIGHBOR_CACHE_COUNT];
        self.asked = [None; ASKED_COUNT];
    }

    /// [xsk-stack patch: fast-route] The slot that holds `protocol_addr` now, for
    /// [`found_at`](Self::found_at).
    pub(crate) fn slot_of(&self, protocol_addr: &IpAddress) -> Option<usize> {
        self.find(protocol_addr)
    }

    /// [xsk-stack patch: fast-route] `lookup`'s `Found` answer when `slot` holds
    /// `protocol_addr` with an entry fresh at `timestamp`; None otherwise (the slot
    /// was emptied, taken by another address, or the entry expired: ask `lookup`).
    /// The entry is read, not remembered, so a fill that changed it is seen.
    pub(crate) fn found_at(
        &self,
        slot: usize,
        protocol_addr: &IpAddress,
        timestamp: Instant,
    ) -> Option<HardwareAddress> {
        match self.storage.get(slot) {
            Some(Some((a, n))) if a == protocol_addr && timestamp < n.expires_at => {
                Some(n.hardware_addr)
            }
            _ => None,
        }
    }
}

#[cfg(feature = "medium-ethernet")]
#[cfg(test)]
mod test {
    use super::*;
    #[cfg(all(feature = "proto-ipv4", not(feature = "proto-ipv6")))]
    use crate::wire::ipv4::test::{MOCK_IP_ADDR_1, MOCK_IP_ADDR_2, MOCK_IP_ADDR_3, MOCK_IP_ADDR_4};
    #[cfg(feature = "proto-ipv6")]
    use crate::wire::ipv6::test::{MOCK_IP_ADDR_1, MOCK_IP_ADDR_2, MOCK_IP_ADDR_3, MOCK_IP_ADDR_4};

    use crate::wire::EthernetAddress;

    const HADDR_A: HardwareAddress = HardwareAddress::Ethernet(EthernetAddress([0, 0, 0, 0, 0, 1]));
    const HADDR_B: HardwareAddress = HardwareAddress::Ethernet(EthernetAddress([0, 0, 0, 0, 0, 2]));
    const HADDR_C: HardwareAddress = HardwareAddress::Ethernet(EthernetAddress([0, 0, 0, 0, 0, 3]));
    const HADDR_D: HardwareAddress = HardwareAddress::Ethernet(EthernetAddress([0, 0, 0, 0, 0, 4]));

    #[test]
    fn test_fill() {
        let mut cache = Cache::new();

        assert!(
            !cache
                .lookup(&MOCK_IP_ADDR_1.into(), Instant::from_millis(0))
                .found()
        );
        assert!(
            !cache
                .lookup(&MOCK_IP_ADDR_2.into(), Instant::from_millis(0))
                .found()
        );

        cache.fill(MOCK_IP_ADDR_1.into(), HADDR_A, Instant::from_millis(0));
        assert_eq!(
            cache.lookup(&MOCK_IP_ADDR_1.into(), Instant::from_millis(0)),
            Answer::Found(HADDR_A)
        );
        assert!(
            !cache
                .lookup(&MOCK_IP_ADDR_2.into(), Instant::from_millis(0))
                .found()
        );
        assert!(
            !cache
                .lookup(
                    &MOCK_IP_ADDR_1.into(),
                    Instant::from_millis(0) + Cache::ENTRY_LIFETIME * 2
                )
                .found(),
        );

        cache.fill(MOCK_IP_ADDR_1.into(), HADDR_A, Instant::from_millis(0));
        assert!(
            !cache
                .lookup(&MOCK_IP_ADDR_2.into(), Instant::from_millis(0))
                .found()
        );
    }

    #[test]
    fn test_expire() {
        let mut cache = Cache::new();

        cache.fill(MOCK_IP_ADDR_1.into(), HADDR_A, Instant::from_millis(0));
        assert_eq!(
            cache.lookup(&MOCK_IP_ADDR_1.into(), Instant::from_millis(0)),
            Answer::Found(HADDR_A)
        );
        assert!(
            !cache
                .lookup(
                    &MOCK_IP_ADDR_1.into(),
                    Instant::from_millis(0) + Cache::ENTRY_LIFETIME * 2
                )
                .found(),
        );
    }

    #[test]
    fn test_replace() {
        let mut cache = Cache::new();

        cache.fill(MOCK_IP_ADDR_1.into(), HADDR_A, Instant::from_millis(0));
        assert_eq!(
            cache.lookup(&MOCK_IP_ADDR_1.into(), Instant::from_millis(0)),
            Answer::Found(HADDR_A)
        );
        cache.fill(MOCK_IP_ADDR_1.into(), HADDR_B, Instant::from_millis(0));
        assert_eq!(
            cache.lookup(&MOCK_IP_ADDR_1.into(), Instant::from_millis(0)),
            Answer::Found(HADDR_B)
        );
    }

    #[test]
    fn test_evict() {
        let mut cache = Cache::new();

        cache.fill(MOCK_IP_ADDR_1.into(), HADDR_A, Instant::from_millis(100));
        cache.fill(MOCK_IP_ADDR_2.into(), HADDR_B, Instant::from_millis(50));
        cache.fill(MOCK_IP_ADDR_3.into(), HADDR_C, Instant::from_millis(200));
        assert_eq!(
            cache.lookup(&MOCK_IP_ADDR_2.into(), Instant::from_millis(1000)),
            Answer::Found(HADDR_B)
        );
        assert!(
            !cache
                .lookup(&MOCK_IP_ADDR_4.into(), Instant::from_millis(1000))
                .found()
        );

        cache.fill(MOCK_IP_ADDR_4.into(), HADDR_D, Instant::from_millis(300));
        assert!(
            !cache
                .lookup(&MOCK_IP_ADDR_2.into(), Instant::from_millis(1000))
                .found()
        );
        assert_eq!(
            cache.lookup(&MOCK_IP_ADDR_4.into(), Instant::from_millis(1000)),
            Answer::Found(HADDR_D)
        );
    }

    #[test]
    fn test_hush() {
        let mut cache = Cache::new();

        assert_eq!(
            cache.lookup(&MOCK_IP_ADDR_1.into(), Instant::from_millis(0)),
            Answer::NotFound
        );

        cache.limit_rate(MOCK_IP_ADDR_1.into(), Instant::from_millis(0));
        assert_eq!(
            cache.lookup(&MOCK_IP_ADDR_1.into(), Instant::from_millis(100)),
            Answer::RateLimited
        );
        // [xsk-stack patch: neighbor-rate] Per destination: another address is asked
        // for at once.
        assert_eq!(
            cache.lookup(&MOCK_IP_ADDR_2.into(), Instant::from_millis(100)),
            Answer::NotFound
        );
        assert_eq!(
            cache.lookup(&MOCK_IP_ADDR_1.into(), Instant::from_millis(2000)),
            Answer::NotFound
        );
    }

    #[test]
    fn test_flush() {
        let mut cache = Cache::new();

        cache.fill(MOCK_IP_ADDR_1.into(), HADDR_A, Instant::from_millis(0));
        assert_eq!(
            cache.lookup(&MOCK_IP_ADDR_1.into(), Instant::from_millis(0)),
            Answer::Found(HADDR_A)
        );
        assert!(
            !cache
                .lookup(&MOCK_IP_ADDR_2.into(), Instant::from_millis(0))
                .found()
        );

        cache.flush();
        assert!(
            !cache
                .lookup(&MOCK_IP_ADDR_1.into(), Instant::from_millis(0))
                .found()
        );
        assert!(
            !cache
                .lookup(&MOCK_IP_ADDR_1.into(), Instant::from_millis(0))
                .found()
        );
    }

    /// [xsk-stack patch: fast-route] A slot remembered from any earlier moment answers
    /// as `lookup` does or not at all, through fills, replacements, evictions, expiry
    /// and flushes; the slot `slot_of` gives now answers exactly as `lookup` does.
    #[cfg(feature = "proto-ipv4")]
    #[test]
    fn test_found_at_agrees_with_lookup() {
        use crate::wire::Ipv4Address;
        let mut cache = Cache::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        // More addresses than slots: evictions.
        let addrs: std::vec::Vec<IpAddress> = (0..(3 * IFACE_NEIGHBOR_CACHE_COUNT + 3).min(250))
            .map(|i| IpAddress::Ipv4(Ipv4Address::new(198, 18, 1, i as u8)))
            .collect();
        let macs = [HADDR_A, HADDR_B, HADDR_C, HADDR_D];
        let mut remembered: std::vec::Vec<(IpAddress, usize)> = std::vec::Vec::new();
        let mut now = Instant::from_millis(0);
        let (mut hits, mut misses) = (0, 0);
        for step in 0..20_000 {
            match next(100) {
                0 => cache.flush(),
                1..=9 => now += Duration::from_secs(next(30)),
                _ => {
                    let a = addrs[next(addrs.len() as u64) as usize];
                    cache.fill(a, macs[next(4) as usize], now);
                }
            }
            for &a in &addrs {
                let found = match cache.lookup(&a, now) {
                    Answer::Found(h) => Some(h),
                    _ => None,
                };
                if let Some(s) = cache.slot_of(&a) {
                    assert_eq!(cache.found_at(s, &a, now), found, "step {step}");
                    if remembered.len() < 64 {
                        remembered.push((a, s));
                    } else {
                        remembered[next(64) as usize] = (a, s);
                    }
                }
            }
            for &(a, s) in &remembered {
                match cache.found_at(s, &a, now) {
                    Some(h) => {
                        assert_eq!(cache.lookup(&a, now), Answer::Found(h), "step {step}");
                        hits += 1;
                    }
                    None => misses += 1,
                }
            }
        }
        assert!(hits > 1000 && misses > 1000, "hits {hits} misses {misses}");
    }
}
