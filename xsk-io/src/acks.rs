//! Deferred ACKs: the consumer side of the steering program's per-queue ack
//! rings (see the comment at the top of `xsk-io/device/src/bpf/steer.bpf.c`).
//!
//! Kernel TCP takes a pure ACK in softirq and wakes nobody. A userspace
//! stack that is woken for every frame pays a whole wake-up for it, and a
//! request/response client with delayed ACKs sends one after every response
//! it receives while idle: at light load that doubles the stack's wake-ups.
//! So while a queue's consumer sleeps with [`AckRing::set_waiting`] on, the
//! program copies pure ACKs for steered ports into a BPF ring buffer without
//! a wake-up; the consumer takes them ([`AckRing::take`]) the next time it
//! is awake anyway: a request, a timer, its own bounded sleep.
//!
//! Order: each record carries the number of frames the program had
//! redirected into the queue's socket before it ([`AckRing::steered`] counts
//! them too). A record must not be taken before those frames: a newer ACK
//! taken before an older segment makes the older segment's acknowledgment
//! look stale, and smoltcp then drops its data. The consumer takes a record
//! once it has received that many frames from the RX ring.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;

use libbpf_rs::{MapCore, MapFlags, MapHandle, MapType};

use crate::mmap::{AtomicMap, Mmap};

/// Bytes of one queue's ack ring (a power of two, a multiple of the page
/// size): 64 KiB hold over 400 ACKs.
pub const RING_BYTES: u32 = 64 * 1024;

/// Size of one `struct ack_slot` in the program's `ack_state` map (the
/// program's loader and its test harness write slots too).
/// The slot also carries the SYN-shedding words (see `crate::shed`) and
/// the SYN-cookie switch and count (see `crate::syncookies`).
pub const SLOT_BYTES: usize = 48;
const SLOT_WAIT: usize = 0;
const SLOT_ACTIVE: usize = 4;
pub(crate) const SLOT_STEERED: usize = 8;
pub(crate) const SLOT_SHED_ON: usize = 16;
pub(crate) const SLOT_SHED: usize = 24;
/// Offset of the SYN-cookie switch in a slot.
pub const SLOT_COOKIES_ON: usize = 32;
pub(crate) const SLOT_COOKIES_SENT: usize = 40;

/// `struct ack_rec`: seq (u64), arrived (u64), len (u32), pad (u32), then the frame.
const REC_SEQ: usize = 0;
const REC_ARRIVED: usize = 8;
const REC_LEN: usize = 16;
const REC_DATA: usize = 24;
const REC_DATA_MAX: usize = 17 * 8;

// The kernel's ring buffer record header (include/uapi/linux/bpf.h).
const BUSY_BIT: u32 = 1 << 31;
const DISCARD_BIT: u32 = 1 << 30;
const HDR_BYTES: u64 = 8;

/// The steering program's per-queue slots (its `ack_state` map), mapped
/// into this process: the deferred ACKs' switch and count, the SYN-shedding
/// words ([`crate::shed`]) and the SYN-cookie switch ([`crate::syncookies`]).
/// Shared by the slots of every queue of an interface.
#[derive(Clone, Debug)]
pub struct QueueState(Arc<AtomicMap>);

impl QueueState {
    /// Maps the program's `ack_state` array map (`fd`, `queues` slots).
    ///
    /// # Errors
    /// The `mmap` failed (the map is not mmapable, or not that large).
    pub fn map(fd: BorrowedFd<'_>, queues: u32) -> io::Result<QueueState> {
        let len = (queues as usize * SLOT_BYTES).next_multiple_of(crate::sys::page_size());
        Ok(QueueState(Arc::new(AtomicMap::new(Mmap::bpf_map(fd, len, 0, true)?))))
    }

    pub(crate) fn memory(&self) -> Arc<AtomicMap> {
        self.0.clone()
    }
}

/// One deferred ACK.
#[derive(Debug)]
pub struct AckRecord<'a> {
    /// Frames the program had redirected into the queue's socket before
    /// this ACK, counted like [`AckRing::steered`].
    pub seq: u64,
    /// When the program saw it: `CLOCK_MONOTONIC` nanoseconds
    /// ([`crate::sys::monotonic_ns`] reads the same clock).
    pub arrived_ns: u64,
    /// The frame, Ethernet header first.
    pub frame: &'a [u8],
}

/// One queue's ack ring and its slot in the program's `ack_state` map.
/// Dropping it takes the ring out of the program's map: pure ACKs on the
/// queue are redirected into the socket as before.
#[derive(Debug)]
pub struct AckRing {
    queue: u32,
    /// The consumer position page (ours to write).
    cons: Mmap,
    /// The producer position page, then the data pages mapped twice (so a
    /// record that wraps reads as one slice).
    data: Mmap,
    mask: u64,
    page: usize,
    /// Our copy of the consumer position.
    pos: u64,
    state: Arc<AtomicMap>,
    /// `steered` when the ring was set up: counts start there.
    base: u64,
    rings: Arc<MapHandle>,
    _ring: MapHandle,
}

impl AckRing {
    /// Creates the ring for `queue` and puts it into the program's
    /// `ack_rings` map (`rings`); `state` is the mapped `ack_state`.
    ///
    /// # Errors
    /// Creating or mapping the ring buffer, or the map update, failed.
    pub fn new(queue: u32, rings: Arc<MapHandle>, state: &QueueState) -> io::Result<AckRing> {
        let state = state.memory();
        let opts = libbpf_rs::libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_create_opts>() as _,
            ..Default::default()
        };
        let ring = MapHandle::create(MapType::RingBuf, Some(format!("xsk_acks_q{queue}")), 0, 0, RING_BYTES, &opts)
            .map_err(io::Error::other)?;
        let page = crate::sys::page_size();
        let cons = Mmap::bpf_map(ring.as_fd(), page, 0, true)?;
        let data = Mmap::bpf_map(ring.as_fd(), page + 2 * RING_BYTES as usize, page as libc::off_t, false)?;
        let fd = u32::try_from(std::os::fd::AsRawFd::as_raw_fd(&ring.as_fd())).expect("fd is never negative");
        rings.update(&queue.to_ne_bytes(), &fd.to_ne_bytes(), MapFlags::ANY).map_err(io::Error::other)?;
        let slot = queue as usize * SLOT_BYTES;
        // The program counts redirected frames only from now on; the base
        // is read after (frames counted in between are also in the RX ring
        // and counted by the consumer: records then wait a frame too long,
        // never too short).
        state.u32(slot + SLOT_ACTIVE).store(1, Ordering::SeqCst);
        let base = state.u64(slot + SLOT_STEERED).load(Ordering::Acquire);
        let pos = cons.atomic_u64(0).load(Ordering::Acquire);
        Ok(AckRing { queue, cons, data, mask: RING_BYTES as u64 - 1, page, pos, state, base, rings, _ring: ring })
    }

    /// Whether pure ACKs go into the ring (`true`, just before sleeping) or
    /// into the socket (`false`, as soon as awake).
    pub fn set_waiting(&self, on: bool) {
        self.state.u32(self.slot() + SLOT_WAIT).store(u32::from(on), Ordering::SeqCst);
    }

    /// Frames the program has redirected into the queue's socket since the
    /// ring was set up (the clock the records' sequence numbers run on).
    pub fn steered(&self) -> u64 {
        self.state.u64(self.slot() + SLOT_STEERED).load(Ordering::Acquire).wrapping_sub(self.base)
    }

    /// Whether a record is waiting.
    pub fn pending(&self) -> bool {
        self.producer() != self.pos
    }

    /// Hands each waiting record to `f`, oldest first, and releases them to
    /// the kernel (one store of the consumer position per call). Stops,
    /// keeping the record, when `f` returns false. Returns the records taken.
    pub fn take(&mut self, mut f: impl FnMut(&AckRecord<'_>) -> bool) -> usize {
        let prod = self.producer();
        let start = self.pos;
        let mut taken = 0;
        while self.pos < prod {
            let off = self.page + (self.pos & self.mask) as usize;
            // A Relaxed load then a fence: the producer side is mapped
            // read-only, where only Relaxed atomic loads are allowed.
            let len = self.data.atomic_u32(off).load(Ordering::Relaxed);
            fence(Ordering::Acquire);
            if len & BUSY_BIT != 0 {
                break; // reserved, not yet submitted
            }
            let size = (len & !(BUSY_BIT | DISCARD_BIT)) as u64;
            let next = self.pos + ((size + HDR_BYTES + 7) & !7);
            if len & DISCARD_BIT == 0 && size as usize >= REC_DATA {
                // SAFETY: the record is committed (BUSY clear, read with
                // Acquire order above) and lies inside the double mapping of
                // the data pages (size <= the ring, which bpf_ringbuf_reserve
                // guarantees); the kernel does not reuse it before the
                // consumer position moves past it, which is stored only
                // after this loop, when `rec` is no longer used.
                let rec = unsafe { self.data.bytes(off + HDR_BYTES as usize, size as usize) };
                let word = |at: usize| u64::from_ne_bytes(rec[at..at + 8].try_into().expect("8 bytes"));
                let n = u32::from_ne_bytes(rec[REC_LEN..REC_LEN + 4].try_into().expect("4 bytes")) as usize;
                let r = AckRecord {
                    seq: word(REC_SEQ).wrapping_sub(self.base),
                    arrived_ns: word(REC_ARRIVED),
                    frame: &rec[REC_DATA..REC_DATA + n.min(REC_DATA_MAX).min(rec.len() - REC_DATA)],
                };
                if !f(&r) {
                    break;
                }
                taken += 1;
            }
            self.pos = next;
        }
        if self.pos != start {
            self.cons.atomic_u64(0).store(self.pos, Ordering::Release);
        }
        taken
    }

    fn producer(&self) -> u64 {
        let p = self.data.atomic_u64(0).load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        p
    }

    fn slot(&self) -> usize {
        self.queue as usize * SLOT_BYTES
    }
}

impl Drop for AckRing {
    fn drop(&mut self) {
        self.set_waiting(false);
        self.state.u32(self.slot() + SLOT_ACTIVE).store(0, Ordering::SeqCst);
        let _ = self.rings.delete(&self.queue.to_ne_bytes());
    }
}
