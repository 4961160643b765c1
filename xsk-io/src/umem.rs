//! The UMEM: one memory area cut into equal frames, and the bookkeeping that
//! knows where each frame is at every moment.
//!
//! A frame is always in exactly one place: free, given to the kernel for RX
//! (fill), held by the application (a [`Frame`]), or given to the kernel for
//! TX. The port moves frames between places only through one checked
//! transition (the crate-internal frame table), which verifies the old place,
//! so a frame handed back twice or an address the kernel should not have
//! returned is caught (counted as an accounting error, see
//! [`crate::port::Port::audit`]) instead of silently corrupting memory.
//!
//! Public here: [`UmemConfig`] (how big), [`Umem`] (the area, read and written
//! only through a [`Frame`]) and [`Frame`] (an owned handle on one frame).

use std::sync::atomic::{AtomicU32, Ordering};

use crate::mmap::Mmap;

/// Where a frame is (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub(crate) enum Place {
    /// On the port's free list.
    Free = 0,
    /// Given to the kernel for receiving: in the fill ring, being filled, or in the RX ring.
    Fill = 1,
    /// Held by the application (a [`Frame`] exists).
    App = 2,
    /// Given to the kernel for sending: in the TX ring, in flight, or in the completion ring.
    Tx = 3,
}

/// An owned frame: the only way to read or write UMEM memory.
///
/// Received frames come from [`crate::port::Port::recv`], empty ones from
/// [`crate::port::Port::alloc`]; a frame goes back with `release` or `send`.
/// Its bytes are reached through the [`Umem`] it came from ([`Umem::data`],
/// [`Umem::buf_mut`]). Dropping a `Frame` instead of handing it back leaks it
/// from the port's books until the port is dropped ([`crate::port::Port::audit`]
/// shows it as `app`).
///
/// Not `Clone`: holding a `Frame` is holding the frame, which is what makes
/// handing out `&mut [u8]` from a shared `&Umem` sound.
#[derive(Debug, PartialEq, Eq)]
pub struct Frame {
    addr: u64,
    len: u32,
    umem: u32,
}

impl Frame {
    /// UMEM offset of the first data byte, in bytes from the start of the
    /// area. For a received frame this is past the kernel's headroom
    /// ([`crate::sys::XDP_PACKET_HEADROOM`]), so not a multiple of the frame size.
    pub fn addr(&self) -> u64 {
        self.addr
    }
    /// Data length in bytes: what was received, or what [`set_len`](Self::set_len) set
    /// (0 for a fresh frame from `alloc`).
    pub fn len(&self) -> usize {
        self.len as usize
    }
    /// Whether the data length is 0.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// Sets the data length in bytes, e.g. after writing a packet into
    /// [`Umem::buf_mut`]. Not checked here: readers and `send` clamp it to
    /// the frame's [`Umem::capacity`], so a too-large value truncates.
    pub fn set_len(&mut self, len: usize) {
        self.len = len as u32;
    }
}

/// Size and layout of a UMEM. The default is 4096 frames of 4096 bytes
/// (16 MiB), no extra headroom, normal pages.
///
/// The area is pinned memory: registering it needs `CAP_IPC_LOCK` or a large
/// enough `RLIMIT_MEMLOCK`.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct UmemConfig {
    /// Number of frames (> 0). A port keeps up to a TX ring's worth (at most
    /// half of them) for sending and gives the rest to the fill ring.
    pub frame_count: u32,
    /// Bytes per frame: 2048 or 4096 (the kernel's aligned-mode sizes).
    pub frame_size: u32,
    /// Extra bytes the kernel leaves in front of RX data, on top of
    /// [`crate::sys::XDP_PACKET_HEADROOM`] (`xdp_umem_reg.headroom`).
    pub headroom: u32,
    /// Try `MAP_HUGETLB` first (fewer TLB misses on copies); falls back to
    /// normal pages silently when no huge pages are available.
    pub huge_pages: bool,
}

/// Builders: each sets one field and gives the config back, so a caller outside this
/// crate (where the struct is `#[non_exhaustive]`) writes `UmemConfig::default().with_frame_count(8192)`.
impl UmemConfig {
    /// With `frame_count` set to `v`.
    pub fn with_frame_count(mut self, v: u32) -> Self {
        self.frame_count = v;
        self
    }

    /// With `frame_size` set to `v`.
    pub fn with_frame_size(mut self, v: u32) -> Self {
        self.frame_size = v;
        self
    }

    /// With `headroom` set to `v`.
    pub fn with_headroom(mut self, v: u32) -> Self {
        self.headroom = v;
        self
    }

    /// With `huge_pages` set to `v`.
    pub fn with_huge_pages(mut self, v: bool) -> Self {
        self.huge_pages = v;
        self
    }
}

impl Default for UmemConfig {
    fn default() -> Self {
        UmemConfig { frame_count: 4096, frame_size: 4096, headroom: 0, huge_pages: false }
    }
}

static NEXT_ID: AtomicU32 = AtomicU32::new(1);

/// The memory area shared with the kernel: `frame_count` frames of
/// `frame_size` bytes, anonymous, pre-faulted, unmapped on drop.
///
/// Each UMEM has a process-unique id: using a [`Frame`] with a UMEM other
/// than its own panics (a bug in the caller, never a network input).
#[derive(Debug)]
pub struct Umem {
    area: Mmap,
    cfg: UmemConfig,
    id: u32,
}

impl Umem {
    /// Maps the area.
    ///
    /// # Errors
    /// `InvalidInput` for a frame size other than 2048/4096 or a frame count
    /// of 0; the `mmap` error otherwise (e.g. `ENOMEM`).
    pub fn new(cfg: UmemConfig) -> std::io::Result<Umem> {
        if !cfg.frame_size.is_power_of_two() || !(2048..=4096).contains(&cfg.frame_size) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("frame size {} must be 2048 or 4096", cfg.frame_size),
            ));
        }
        if cfg.frame_count == 0 {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "frame count must be > 0"));
        }
        let len = cfg.frame_count as usize * cfg.frame_size as usize;
        let area = Mmap::anonymous(len, cfg.huge_pages)?;
        Ok(Umem { area, cfg, id: NEXT_ID.fetch_add(1, Ordering::Relaxed) })
    }

    /// The configuration it was made with.
    pub fn config(&self) -> &UmemConfig {
        &self.cfg
    }
    pub(crate) fn area_ptr(&self) -> *mut u8 {
        self.area.as_ptr()
    }
    pub(crate) fn area_len(&self) -> usize {
        self.area.len()
    }
    /// Bytes per frame.
    pub fn frame_size(&self) -> u32 {
        self.cfg.frame_size
    }
    /// Number of frames.
    pub fn frame_count(&self) -> u32 {
        self.cfg.frame_count
    }

    /// Index of the frame holding UMEM offset `addr`, if `addr` is inside the area.
    pub fn index_of(&self, addr: u64) -> Option<u32> {
        let i = addr >> self.cfg.frame_size.trailing_zeros();
        (i < self.cfg.frame_count as u64).then_some(i as u32)
    }

    /// A frame handle for offset `addr` (already moved to `Place::App` by the caller).
    pub(crate) fn frame(&self, addr: u64, len: u32) -> Frame {
        Frame { addr, len, umem: self.id }
    }

    /// Consumes a handle (the caller records the frame's new place).
    pub(crate) fn take(&self, f: Frame) -> u64 {
        self.check(&f);
        f.addr
    }

    /// Start of the UMEM frame holding offset `addr`. Frame sizes are powers
    /// of two (`Umem::new` checks): a mask, not a division.
    #[inline]
    pub fn frame_base(&self, addr: u64) -> u64 {
        addr & !(self.cfg.frame_size as u64 - 1)
    }

    /// Bytes from the frame's data start ([`Frame::addr`]) to the end of its
    /// UMEM frame: the most a frame built in [`buf_mut`](Self::buf_mut) can hold.
    pub fn capacity(&self, f: &Frame) -> usize {
        (self.frame_base(f.addr) + self.cfg.frame_size as u64 - f.addr) as usize
    }

    fn check(&self, f: &Frame) {
        assert_eq!(f.umem, self.id, "frame belongs to another UMEM");
    }

    /// The frame's data: [`Frame::len`] bytes, clamped to its capacity.
    ///
    /// # Panics
    /// If `f` belongs to another UMEM.
    pub fn data<'a>(&'a self, f: &'a Frame) -> &'a [u8] {
        self.check(f);
        let len = (f.len as usize).min(self.capacity(f));
        // SAFETY: `f` is a live handle from this UMEM (checked), so its frame
        // is in Place::App: the kernel does not write it and no other handle
        // exists; addr + len stays inside the frame and thus the area.
        unsafe { std::slice::from_raw_parts(self.area.as_ptr().add(f.addr as usize), len) }
    }

    /// The frame's data ([`Frame::len`] bytes, clamped), writable.
    ///
    /// # Panics
    /// If `f` belongs to another UMEM.
    pub fn data_mut<'a>(&'a self, f: &'a mut Frame) -> &'a mut [u8] {
        let len = (f.len as usize).min(self.capacity(f));
        self.buf_mut(f).split_at_mut(len).0
    }

    /// The whole frame from the data start to its end ([`capacity`](Self::capacity)
    /// bytes), writable, to build a frame to send; then set its length with
    /// [`Frame::set_len`].
    ///
    /// # Panics
    /// If `f` belongs to another UMEM.
    pub fn buf_mut<'a>(&'a self, f: &'a mut Frame) -> &'a mut [u8] {
        self.check(f);
        let cap = self.capacity(f);
        // SAFETY: as in `data`; the `&mut Frame` borrow guarantees this is the
        // only live slice of the frame for 'a.
        unsafe { std::slice::from_raw_parts_mut(self.area.as_ptr().add(f.addr as usize), cap) }
    }
}

impl Umem {
    /// Writes TX metadata into the `md_len` bytes in front of the frame's
    /// data (where the kernel reads it for a descriptor with
    /// `XDP_TX_METADATA`). False, and nothing written, if the frame's data
    /// starts less than `md_len` bytes into its UMEM frame or `md_len` cannot
    /// hold the metadata.
    ///
    /// # Panics
    /// If `f` belongs to another UMEM.
    pub(crate) fn write_tx_metadata(&self, f: &mut Frame, md_len: u32, md: &crate::sys::XskTxMetadata) -> bool {
        self.check(f);
        let into = f.addr - self.frame_base(f.addr);
        if into < md_len as u64 || (md_len as usize) < std::mem::size_of::<crate::sys::XskTxMetadata>() {
            return false;
        }
        // SAFETY: `f` is a live handle from this UMEM (checked), so its whole
        // UMEM frame is in Place::App: the kernel does not touch it and the
        // `&mut Frame` borrow makes this the only access. The metadata,
        // `md_len` bytes ending at the data start, lies inside that frame
        // (`into >= md_len`); the write is unaligned, so any offset is fine.
        unsafe {
            let p = self.area.as_ptr().add((f.addr - md_len as u64) as usize);
            std::ptr::write_unaligned(p.cast::<crate::sys::XskTxMetadata>(), *md);
        }
        true
    }
}

/// Where every frame is, plus the free list.
#[derive(Debug)]
pub(crate) struct FrameTable {
    place: Vec<Place>,
    counts: [u32; 4],
    free: Vec<u64>,
    /// log2 of the frame size (a power of two, as `Umem::new` checks): the
    /// frame of an address is a shift and a mask away, not a division,
    /// which on the hot path (several per request) costs tens of cycles each.
    shift: u32,
    /// Transitions that found a frame somewhere else than expected.
    pub errors: u64,
}

impl FrameTable {
    /// All frames start on the free list.
    pub fn new(frame_count: u32, frame_size: u32) -> FrameTable {
        assert!(frame_size.is_power_of_two(), "frame size {frame_size} is not a power of two");
        let free = (0..frame_count as u64).rev().map(|i| i * frame_size as u64).collect();
        FrameTable {
            place: vec![Place::Free; frame_count as usize],
            counts: [frame_count, 0, 0, 0],
            free,
            shift: frame_size.trailing_zeros(),
            errors: 0,
        }
    }

    /// Moves the frame at `addr` from `from` to `to`; false (and an error
    /// counted) if it is not in `from` or not a frame of this UMEM.
    #[inline]
    pub fn transition(&mut self, addr: u64, from: Place, to: Place) -> bool {
        let i = (addr >> self.shift) as usize;
        match self.place.get_mut(i) {
            Some(p) if *p == from => {
                *p = to;
                self.counts[from as usize] -= 1;
                self.counts[to as usize] += 1;
                true
            }
            _ => {
                self.errors += 1;
                debug_assert!(false, "frame {addr:#x}: expected {from:?}, found {:?}", self.place.get(i));
                false
            }
        }
    }

    /// Takes a frame off the free list into `to`; returns its base address.
    #[inline]
    pub fn alloc(&mut self, to: Place) -> Option<u64> {
        let addr = self.free.pop()?;
        let ok = self.transition(addr, Place::Free, to);
        debug_assert!(ok);
        Some(addr)
    }

    /// Returns the frame holding `addr` from `from` to the free list.
    #[inline]
    pub fn free(&mut self, addr: u64, from: Place) -> bool {
        let base = addr & !((1u64 << self.shift) - 1);
        if self.transition(base, from, Place::Free) {
            self.free.push(base);
            true
        } else {
            false
        }
    }

    pub fn free_len(&self) -> usize {
        self.free.len()
    }

    pub fn count(&self, p: Place) -> u32 {
        self.counts[p as usize]
    }

    pub fn total(&self) -> u32 {
        self.place.len() as u32
    }

    /// Full check: counts agree with the per-frame places, the free list
    /// holds exactly the free frames, each once and frame-aligned.
    pub fn audit(&self) -> Result<(), String> {
        let mut counts = [0u32; 4];
        for p in &self.place {
            counts[*p as usize] += 1;
        }
        if counts != self.counts {
            return Err(format!("counters {:?} != places {:?}", self.counts, counts));
        }
        if self.counts.iter().sum::<u32>() != self.total() {
            return Err("frames lost: counts do not add up to the total".into());
        }
        let mut seen = vec![false; self.place.len()];
        for &a in &self.free {
            if a & ((1u64 << self.shift) - 1) != 0 {
                return Err(format!("free list entry {a:#x} not frame aligned"));
            }
            let i = (a >> self.shift) as usize;
            if i >= seen.len() || seen[i] || self.place[i] != Place::Free {
                return Err(format!("free list entry {a:#x} duplicated or not free"));
            }
            seen[i] = true;
        }
        if self.free.len() as u32 != self.counts[Place::Free as usize] {
            return Err("free list length differs from free count".into());
        }
        if self.errors != 0 {
            return Err(format!("{} bad transitions seen", self.errors));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_move_between_places_exactly() {
        let mut t = FrameTable::new(8, 2048);
        let a = t.alloc(Place::Fill).unwrap();
        let b = t.alloc(Place::App).unwrap();
        assert_ne!(a, b);
        assert!(t.transition(a, Place::Fill, Place::App));
        assert!(t.transition(b, Place::App, Place::Tx));
        // RX data lives at an offset inside the frame: free() finds the base.
        assert!(t.free(a + 256, Place::App));
        assert!(t.free(b, Place::Tx));
        t.audit().unwrap();
        assert_eq!(t.free_len(), 8);
    }

    #[test]
    #[cfg(not(debug_assertions))]
    fn double_free_is_caught() {
        let mut t = FrameTable::new(4, 2048);
        let a = t.alloc(Place::App).unwrap();
        assert!(t.free(a, Place::App));
        assert!(!t.free(a, Place::App));
        assert!(t.audit().is_err());
    }

    #[test]
    fn umem_slices_follow_the_handle() {
        let u = Umem::new(UmemConfig { frame_count: 4, frame_size: 2048, ..Default::default() }).unwrap();
        let mut f = u.frame(2048 + 100, 10);
        assert_eq!(u.capacity(&f), 2048 - 100);
        u.buf_mut(&mut f)[..3].copy_from_slice(b"abc");
        assert_eq!(&u.data(&f)[..3], b"abc");
        assert_eq!(u.data(&f).len(), 10);
        assert_eq!(u.index_of(2048 + 100), Some(1));
        assert_eq!(u.index_of(4 * 2048), None);
    }
}
