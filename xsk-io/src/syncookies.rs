//! SYN cookies answered by the steering program: the port's side (see the
//! comment at the top of `xsk-io/device/src/bpf/steer.bpf.c`).
//!
//! Under a SYN flood every SYN that reaches the AF_XDP socket takes a frame
//! of the fill ring, a slot of the RX ring and the stack's time, however
//! cheaply the stack then answers it. The program can answer a SYN to a
//! listening port itself, with the SYN-ACK the stack would send: the same
//! SYN cookie (the stack's key, clock and encoding, in the program's
//! `syn_cookies` map) and the same options, sent back with XDP_TX. The ACK
//! that completes the handshake reaches the stack, which checks the cookie
//! as it checks its own. The stack decides when (it turns the slot on while
//! it would answer SYNs with cookies anyway); this module holds the switch
//! and the count, and watches that the device really sends what XDP_TX
//! hands it.
//!
//! Native XDP_TX does not work everywhere: a veth sends it into its peer
//! only while the peer runs NAPI (GRO on, or an XDP program of its own),
//! and veth's default is neither; the frames are then dropped and counted
//! in the device's `xdp_tx_errors`. So while the switch is on, the slot
//! reads the device's XDP_TX error counters (`ethtool -S`): once a
//! millisecond until some of the program's SYN-ACKs went out, then once a
//! second. If every SYN-ACK since the last look failed (at first: any; then
//! at least [`PROOF_LATER`] of them, as a peer that falls behind a flood
//! drops some), it turns off for good and [`CookieSlot::drive`] says why
//! once; the stack answers SYNs itself again.

use std::io;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::acks::{QueueState, SLOT_BYTES, SLOT_COOKIES_ON, SLOT_COOKIES_SENT};
use crate::mmap::AtomicMap;

/// What the program needs to answer a SYN exactly as the stack would
/// (`struct cookie_cfg`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CookieParams {
    /// The SipHash-2-4 key of the stack's cookies.
    pub k0: u64,
    /// The second half of the key.
    pub k1: u64,
    /// `CLOCK_MONOTONIC` nanoseconds at the stack's time 0: the program
    /// dates cookies on the stack's clock.
    pub epoch_ns: u64,
    /// Our MSS, sent in every SYN-ACK. 0 leaves SYNs to the stack.
    pub mss: u16,
    /// The SYN-ACK's window (unscaled, as in any SYN).
    pub window: u16,
    /// Our window scale, sent when the peer offers one.
    pub window_shift: u8,
    /// Our MAC: a SYN to another is left to the stack (which drops it).
    pub mac: [u8; 6],
    /// Our address and the prefix of our subnet (sources the stack refuses
    /// are left to it: its own address, the subnet broadcast, ...).
    pub addr: std::net::Ipv4Addr,
    /// The prefix length of our subnet.
    pub prefix_len: u8,
    /// Whether a TCP checksum left partial by the sender (checksum offload on
    /// veth, virtio_net) is accepted, as the stack decides for the device.
    pub accept_partial: bool,
    /// Our IPv6 address: SYNs to it are answered too (an MSS 20 bytes less).
    pub addr6: Option<std::net::Ipv6Addr>,
}

/// Bytes of `struct cookie_cfg`.
pub const PARAMS_BYTES: usize = 64;

impl CookieParams {
    /// `struct cookie_cfg` as the program's `syn_cookies` map holds it.
    pub fn encode(&self) -> [u8; PARAMS_BYTES] {
        let mut v = [0u8; PARAMS_BYTES];
        v[0..8].copy_from_slice(&self.k0.to_ne_bytes());
        v[8..16].copy_from_slice(&self.k1.to_ne_bytes());
        v[16..24].copy_from_slice(&self.epoch_ns.to_ne_bytes());
        v[24..26].copy_from_slice(&self.mss.to_ne_bytes());
        v[26..28].copy_from_slice(&self.window.to_ne_bytes());
        v[28] = self.window_shift;
        v[29] = u8::from(self.accept_partial);
        v[30] = self.prefix_len;
        v[32..36].copy_from_slice(&self.addr.octets()); // network order
        v[36..42].copy_from_slice(&self.mac);
        v[48..64].copy_from_slice(&self.addr6.map_or([0; 16], |a| a.octets()));
        v
    }
}

/// The device's count of frames XDP_TX failed to send (on veth and
/// virtio_net, the `ethtool -S` counters ending in `xdp_tx_errors` or
/// `xdp_tx_drops`; the `xsk-device` crate reads them).
pub trait TxErrorCount: Send + std::fmt::Debug {
    /// The count now.
    fn read(&self) -> io::Result<u64>;
    /// The device's name, for messages.
    fn device(&self) -> &str;
}

/// How often the XDP_TX error counters are read while the switch is on:
/// right after the program's first SYN-ACKs (a millisecond), while it has
/// sent none yet (doubling up to 100 ms, so an idle stack with cookies
/// always on is not woken a thousand times a second), and once they went out.
const CHECK_NEW_NS: u64 = 1_000_000;
const CHECK_IDLE_MAX_NS: u64 = 100_000_000;
const CHECK_NS: u64 = 1_000_000_000;
/// Once XDP_TX has worked: SYN-ACKs that must all fail within one look
/// before it counts as not working (a flood's peer drops some when it falls
/// behind; that is loss, not a device that cannot send).
pub const PROOF_LATER: u64 = 64;

/// One queue's cookie switch and count in the program's per-queue slot:
/// off until [`set_on`](Self::set_on), off again when dropped.
#[derive(Debug)]
pub struct CookieSlot {
    state: Arc<AtomicMap>,
    slot: usize,
    on: bool,
    /// The device's XDP_TX error counters (None: it has none, or the program
    /// runs in skb mode, whose XDP_TX goes through the device's ordinary
    /// transmit path).
    errors: Option<Box<dyn TxErrorCount>>,
    /// Errors and SYN-ACKs sent at the last look, and when to look next.
    seen: (u64, u64),
    next_check: u64,
    /// The wait before that look.
    interval: u64,
    /// Some SYN-ACKs went out since it turned on.
    proven: bool,
    /// XDP_TX failed: off for good.
    broken: bool,
}

impl CookieSlot {
    /// The switch of `queue` in the program's slots `state`, off;
    /// `errors` reads the device's XDP_TX failures (None: it has no such
    /// counter, or the program runs in skb mode, whose XDP_TX goes through
    /// the device's ordinary transmit path).
    pub fn new(state: &QueueState, queue: u32, errors: Option<Box<dyn TxErrorCount>>) -> CookieSlot {
        let state = state.memory();
        let slot = queue as usize * SLOT_BYTES;
        state.u32(slot + SLOT_COOKIES_ON).store(0, Ordering::SeqCst);
        CookieSlot {
            state,
            slot,
            on: false,
            errors,
            seen: (0, 0),
            next_check: 0,
            interval: CHECK_NEW_NS,
            proven: false,
            broken: false,
        }
    }

    /// [`set_on`](Self::set_on)`(want)` at `now_ns` (`CLOCK_MONOTONIC`),
    /// unless XDP_TX turned out not to work on this device: then off for
    /// good, and `Err` once with what the device reported and the likely
    /// fix. Returns whether the program answers SYNs now. Cheap while
    /// nothing is due: call it once per pass.
    pub fn drive(&mut self, want: bool, now_ns: u64) -> Result<bool, String> {
        if self.broken {
            return Ok(false);
        }
        let turned_on = want && !self.on;
        self.set_on(want);
        let Some(errors) = &self.errors else { return Ok(self.on) };
        if !self.on || (!turned_on && now_ns < self.next_check) {
            return Ok(self.on);
        }
        let (count, sent) = match errors.read() {
            Ok(n) => (n, self.sent()),
            Err(_) => {
                // Unreadable for now: look again later, keep what is.
                self.next_check = now_ns + CHECK_NS;
                return Ok(self.on);
            }
        };
        let (failed, made) = (count.saturating_sub(self.seen.0), sent.wrapping_sub(self.seen.1));
        if turned_on {
            self.seen = (count, sent);
        } else {
            match judge(failed, made, self.proven) {
                Verdict::Wait => {}
                Verdict::Works => {
                    self.proven = true;
                    self.seen = (count, sent);
                }
                Verdict::Broken => {
                    let why = format!(
                        "{}: the XDP program's SYN-ACKs were not sent ({failed} XDP_TX errors for {made} SYN-ACKs); \
                         SYN cookies are answered by the stack from now on. On veth the peer must run an XDP \
                         program for XDP_TX to reach it",
                        errors.device(),
                    );
                    self.broken = true;
                    self.set_on(false);
                    return Err(why);
                }
            }
        }
        self.interval = if turned_on { CHECK_NEW_NS } else { next_interval(self.interval, made, self.proven) };
        self.next_check = now_ns + self.interval;
        Ok(self.on)
    }

    /// Whether the program answers this queue's SYNs to listening ports
    /// from now on (a plain store into the mapped slot: free to call often).
    #[inline]
    pub fn set_on(&mut self, on: bool) {
        if on != self.on {
            self.state.u32(self.slot + SLOT_COOKIES_ON).store(u32::from(on), Ordering::SeqCst);
            self.on = on;
        }
    }

    /// When [`drive`](Self::drive) next wants to read the device's XDP_TX
    /// error counters (`CLOCK_MONOTONIC` ns), if it reads them at all: a
    /// stack that sleeps must wake for it (the SYNs the program answers wake
    /// nobody).
    pub fn check_due(&self) -> Option<u64> {
        (self.on && self.errors.is_some() && !self.broken).then_some(self.next_check)
    }

    /// Whether the program answers SYNs now.
    #[inline]
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// SYN-ACKs the program sent for this queue since it was loaded.
    #[inline]
    pub fn sent(&self) -> u64 {
        self.state.u64(self.slot + SLOT_COOKIES_SENT).load(Ordering::Relaxed)
    }
}

/// What the XDP_TX error counters say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    /// Too few SYN-ACKs since the last look to tell.
    Wait,
    /// Some went out.
    Works,
    /// Every one failed.
    Broken,
}

/// `failed` XDP_TX errors for `made` SYN-ACKs since the last look; `proven`:
/// some went out before.
fn judge(failed: u64, made: u64, proven: bool) -> Verdict {
    if made < if proven { PROOF_LATER } else { 1 } {
        Verdict::Wait
    } else if failed >= made {
        Verdict::Broken
    } else {
        Verdict::Works
    }
}

/// The wait before the next look at the error counters, after a look that
/// waited `interval` and found `made` SYN-ACKs since the one before.
fn next_interval(interval: u64, made: u64, proven: bool) -> u64 {
    if proven {
        CHECK_NS
    } else if made == 0 {
        (interval * 2).min(CHECK_IDLE_MAX_NS)
    } else {
        CHECK_NEW_NS
    }
}

impl Drop for CookieSlot {
    fn drop(&mut self) {
        self.state.u32(self.slot + SLOT_COOKIES_ON).store(0, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xdp_tx_counts_as_broken_only_when_every_syn_ack_failed() {
        // At first any SYN-ACK decides: a device that drops them all is found at once.
        assert_eq!(judge(0, 0, false), Verdict::Wait);
        assert_eq!(judge(1, 1, false), Verdict::Broken);
        assert_eq!(judge(16, 16, false), Verdict::Broken);
        assert_eq!(judge(15, 16, false), Verdict::Works);
        assert_eq!(judge(0, 3, false), Verdict::Works);
        // Once it worked, a flood's peer may drop most of them; only a whole look of
        // failures, and enough of them, counts.
        assert_eq!(judge(63, 63, true), Verdict::Wait);
        assert_eq!(judge(900, 1000, true), Verdict::Works);
        assert_eq!(judge(1000, 1000, true), Verdict::Broken);
        // Errors from before the look are not in `failed`; more than made is still broken.
        assert_eq!(judge(70, 64, true), Verdict::Broken);
    }

    #[test]
    fn an_idle_check_backs_off_and_a_busy_one_does_not() {
        let mut i = CHECK_NEW_NS;
        let mut waits = Vec::new();
        for _ in 0..10 {
            i = next_interval(i, 0, false);
            waits.push(i / 1_000_000);
        }
        assert_eq!(waits, [2, 4, 8, 16, 32, 64, 100, 100, 100, 100]);
        assert_eq!(next_interval(CHECK_IDLE_MAX_NS, 3, false), CHECK_NEW_NS, "SYN-ACKs to judge: look again soon");
        assert_eq!(next_interval(CHECK_NEW_NS, 3, true), CHECK_NS);
        assert_eq!(next_interval(CHECK_NEW_NS, 0, true), CHECK_NS);
    }

    #[test]
    fn params_encode_as_the_programs_struct() {
        let p = CookieParams {
            k0: 1,
            k1: 2,
            epoch_ns: 3,
            mss: 1460,
            window: 4096,
            window_shift: 7,
            mac: [2, 0, 0, 0, 0, 1],
            addr: std::net::Ipv4Addr::new(198, 18, 0, 1),
            prefix_len: 24,
            accept_partial: true,
            addr6: Some("2001:2::1".parse().unwrap()),
        };
        let v = p.encode();
        assert_eq!(u64::from_ne_bytes(v[0..8].try_into().unwrap()), 1);
        assert_eq!(u64::from_ne_bytes(v[8..16].try_into().unwrap()), 2);
        assert_eq!(u64::from_ne_bytes(v[16..24].try_into().unwrap()), 3);
        assert_eq!(u16::from_ne_bytes([v[24], v[25]]), 1460);
        assert_eq!(u16::from_ne_bytes([v[26], v[27]]), 4096);
        assert_eq!(&v[28..32], &[7, 1, 24, 0]);
        assert_eq!(&v[32..36], &[198, 18, 0, 1]);
        assert_eq!(&v[36..42], &[2, 0, 0, 0, 0, 1]);
        assert_eq!(&v[42..48], &[0; 6]);
        assert_eq!(v[48..64], [0x20, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    }
}
