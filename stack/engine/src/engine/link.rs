//! Where the engine's frames go ([`Link`]), and smoltcp's view of it.

use smoltcp::phy::{self, Checksum, DeviceCapabilities};
use smoltcp::time::Instant;

/// Where the engine's frames go: the AF_XDP port's TX ring, or memory.
pub trait Link {
    /// Writes one frame.
    type Tx<'a>: phy::TxToken
    where
        Self: 'a;
    /// A token for one frame. Always given: a link without room drops the
    /// frame (and counts it) rather than refusing, since smoltcp must be able
    /// to answer the frame it is processing.
    fn tx(&mut self) -> Self::Tx<'_>;
    /// Whether egress may produce frames now.
    fn tx_ready(&mut self) -> bool;
    /// The link's MTU (IP packet size).
    fn mtu(&self) -> usize;
    /// Whether the link completes TCP checksums itself (AF_XDP TX metadata):
    /// then smoltcp's token (`CsumTx`) leaves them to the link's token, which writes the
    /// pseudo-header sum and asks for the offload.
    fn csum_offload(&self) -> bool {
        false
    }
}

/// smoltcp's view of a [`Link`] for one call: at most one received frame.
pub(super) struct SmolDev<'a, L: Link> {
    pub(super) rx: Option<&'a [u8]>,
    pub(super) link: &'a mut L,
}

/// A received frame, borrowed (from UMEM or memory) for one smoltcp call.
pub(super) struct SliceRx<'a>(&'a [u8]);

impl phy::RxToken for SliceRx<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(self.0)
    }
}

impl<L: Link> phy::Device for SmolDev<'_, L> {
    type RxToken<'t>
        = SliceRx<'t>
    where
        Self: 't;
    type TxToken<'t>
        = CsumTx<L::Tx<'t>>
    where
        Self: 't;

    fn receive(&mut self, _now: Instant) -> Option<(SliceRx<'_>, CsumTx<L::Tx<'_>>)> {
        let rx = self.rx.take()?;
        let offload = self.link.csum_offload();
        Some((SliceRx(rx), CsumTx(self.link.tx(), offload)))
    }

    fn transmit(&mut self, _now: Instant) -> Option<CsumTx<L::Tx<'_>>> {
        let offload = self.link.csum_offload();
        self.link.tx_ready().then(|| CsumTx(self.link.tx(), offload))
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = phy::Medium::Ethernet;
        caps.max_transmission_unit = self.link.mtu() + 14;
        // None: smoltcp must not clamp the TCP window to a burst size.
        caps.max_burst_size = None;
        // `inspect` verified every received checksum already (accepting
        // partial ones where the link is trusted): smoltcp only fills them
        // in, and TCP's not even that: `CsumTx` does, faster (see `csum`).
        caps.checksum.ipv4 = Checksum::Tx;
        caps.checksum.tcp = Checksum::None;
        caps.checksum.icmpv4 = Checksum::Tx;
        caps
    }
}

/// A link's TX token that fills in the TCP checksum of what smoltcp wrote
/// (smoltcp leaves it zero: `capabilities`), unless the link offloads it
/// (the second field: [`Link::csum_offload`]). Inside any wrapper's token,
/// so the frame is complete before a wrapper or the port sees it.
pub struct CsumTx<T>(T, bool);

impl<T: phy::TxToken> phy::TxToken for CsumTx<T> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        if self.1 {
            return self.0.consume(len, f);
        }
        self.0.consume(len, |buf| {
            let r = f(buf);
            crate::csum::fill_tcp(buf);
            r
        })
    }

    fn set_meta(&mut self, meta: phy::PacketMeta) {
        self.0.set_meta(meta)
    }
}

/// A borrowed link is a link: wrappers (fault injection, shared-mode ARP)
/// can sit around one the caller keeps.
impl<L: Link + ?Sized> Link for &mut L {
    type Tx<'a>
        = L::Tx<'a>
    where
        Self: 'a;

    fn tx(&mut self) -> L::Tx<'_> {
        (**self).tx()
    }

    fn tx_ready(&mut self) -> bool {
        (**self).tx_ready()
    }

    fn mtu(&self) -> usize {
        (**self).mtu()
    }

    fn csum_offload(&self) -> bool {
        (**self).csum_offload()
    }
}
