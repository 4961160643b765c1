//! Fault injection as a device wrapper, as smoltcp's `phy::FaultInjector`
//! wraps a `Device`: `Faulty` sits between the engine and a link (the
//! AF_XDP port's, or the in-memory one of the tests) and drops, duplicates
//! and reorders received frames and drops sent ones. For tests of loss
//! recovery on a host without netem. The wrapper is always there, so the
//! driver has one link type; without a [`FaultState`] (no fault asked for)
//! it passes every frame straight through, at the cost of one branch.

use smoltcp::phy;

use super::engine::Link;

/// Fault probabilities, each in [0, 1] (`XskConfig::faults`; all zero: off).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Faults {
    /// A received frame is dropped.
    pub rx_drop: f64,
    /// A received frame is delivered twice.
    pub rx_dup: f64,
    /// A received frame is held back and delivered after the next one
    /// (within one received batch).
    pub rx_reorder: f64,
    /// A frame the stack sends is dropped.
    pub tx_drop: f64,
    /// Seed of the dice, for repeatable runs.
    pub seed: u64,
}

impl Faults {
    /// Whether any fault is asked for.
    pub fn any(&self) -> bool {
        self.rx_drop > 0.0 || self.rx_dup > 0.0 || self.rx_reorder > 0.0 || self.tx_drop > 0.0
    }
}

/// How often each fault struck.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FaultStats {
    /// Received frames dropped.
    pub rx_dropped: u64,
    /// Received frames delivered twice.
    pub rx_duplicated: u64,
    /// Received frames held back behind the next.
    pub rx_reordered: u64,
    /// Sent frames dropped.
    pub tx_dropped: u64,
}

/// What to do with one received frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RxFate {
    Deliver,
    Drop,
    Duplicate,
    /// Hold it back and deliver it after the next frame.
    Delay,
}

/// A link whose received frames are given back once the engine has read
/// them: a UMEM frame to the port; memory is simply dropped.
pub trait RxFrames: Link {
    /// What holds one received frame.
    type Frame;
    /// Gives a received frame back.
    fn release(&mut self, f: Self::Frame);
}

impl<L: RxFrames + ?Sized> RxFrames for &mut L {
    type Frame = L::Frame;
    fn release(&mut self, f: L::Frame) {
        (**self).release(f)
    }
}

/// The injector's state between calls: the dice, the counters and the
/// frame held back for reordering. `F` holds a received frame.
pub struct FaultState<F> {
    cfg: Faults,
    rng: u64,
    held: Option<F>,
    /// Where a dropped sent frame is written (smoltcp builds it anyway).
    scratch: Vec<u8>,
    /// How often each fault struck.
    pub stats: FaultStats,
}

impl<F> FaultState<F> {
    /// No frame held, the dice seeded from `cfg.seed`.
    pub fn new(cfg: Faults) -> FaultState<F> {
        FaultState { cfg, rng: cfg.seed | 1, held: None, scratch: vec![0u8; 64 * 1024], stats: FaultStats::default() }
    }

    fn next(&mut self) -> f64 {
        // xorshift64*: plenty for fault dice.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }

    fn rx(&mut self) -> RxFate {
        let r = self.next();
        let c = self.cfg;
        if r < c.rx_drop {
            self.stats.rx_dropped += 1;
            RxFate::Drop
        } else if r < c.rx_drop + c.rx_dup {
            self.stats.rx_duplicated += 1;
            RxFate::Duplicate
        } else if r < c.rx_drop + c.rx_dup + c.rx_reorder {
            self.stats.rx_reordered += 1;
            RxFate::Delay
        } else {
            RxFate::Deliver
        }
    }

    fn tx_drop(&mut self) -> bool {
        if self.cfg.tx_drop > 0.0 && self.next() < self.cfg.tx_drop {
            self.stats.tx_dropped += 1;
            true
        } else {
            false
        }
    }
}

/// The injector around a link, for one engine call or one received batch.
/// Sent frames pass through [`Link`]; received ones through
/// [`receive`](Self::receive), which hands the engine each frame as its fate
/// says, with this wrapper as the link its answers go out on.
pub struct Faulty<'s, L: RxFrames> {
    inner: L,
    /// None: no faults, every frame passes.
    state: Option<&'s mut FaultState<L::Frame>>,
}

impl<'s, L: RxFrames> Faulty<'s, L> {
    /// `inner` behind the faults `state` holds (kept across calls by the
    /// caller); `None` passes everything through.
    pub fn new(inner: L, state: Option<&'s mut FaultState<L::Frame>>) -> Self {
        Faulty { inner, state }
    }

    /// One received frame through the RX faults. `deliver` gives a frame's
    /// bytes to the engine; every frame is released after its last delivery.
    #[inline]
    pub fn receive(&mut self, frame: L::Frame, deliver: &mut impl FnMut(&mut Self, &L::Frame)) {
        let Some(state) = self.state.as_deref_mut() else {
            deliver(self, &frame);
            self.inner.release(frame);
            return;
        };
        match state.rx() {
            RxFate::Deliver => {
                deliver(self, &frame);
                self.inner.release(frame);
                self.deliver_held(deliver);
            }
            RxFate::Drop => self.inner.release(frame),
            RxFate::Duplicate => {
                deliver(self, &frame);
                deliver(self, &frame);
                self.inner.release(frame);
            }
            RxFate::Delay => {
                if let Some(prev) = state.held.replace(frame) {
                    deliver(self, &prev);
                    self.inner.release(prev);
                }
            }
        }
    }

    /// Delivers the frame held back, if any: at the end of each received
    /// batch, so that reordering never holds a frame across a sleep.
    pub fn deliver_held(&mut self, deliver: &mut impl FnMut(&mut Self, &L::Frame)) {
        if let Some(f) = self.state.as_deref_mut().and_then(|s| s.held.take()) {
            deliver(self, &f);
            self.inner.release(f);
        }
    }
}

impl<L: RxFrames> Link for Faulty<'_, L> {
    type Tx<'t>
        = FaultyTx<'t, L::Tx<'t>, L::Frame>
    where
        Self: 't;

    fn tx(&mut self) -> Self::Tx<'_> {
        FaultyTx { inner: self.inner.tx(), state: self.state.as_deref_mut() }
    }

    fn tx_ready(&mut self) -> bool {
        self.inner.tx_ready()
    }

    fn mtu(&self) -> usize {
        self.inner.mtu()
    }

    fn csum_offload(&self) -> bool {
        self.inner.csum_offload()
    }
}

/// A sent frame that may be dropped.
pub struct FaultyTx<'a, T, F> {
    inner: T,
    state: Option<&'a mut FaultState<F>>,
}

impl<T: phy::TxToken, F> phy::TxToken for FaultyTx<'_, T, F> {
    #[inline]
    fn consume<R, G: FnOnce(&mut [u8]) -> R>(self, len: usize, f: G) -> R {
        if let Some(state) = self.state {
            if state.tx_drop() {
                let n = len.min(state.scratch.len());
                return f(&mut state.scratch[..n]);
            }
        }
        self.inner.consume(len, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_roughly_right() {
        let mut f = FaultState::<()>::new(Faults { rx_drop: 0.1, rx_dup: 0.05, rx_reorder: 0.05, tx_drop: 0.0, seed: 3 });
        let n = 100_000;
        for _ in 0..n {
            f.rx();
        }
        let s = f.stats;
        let near = |x: u64, p: f64| ((x as f64 / n as f64) - p).abs() < 0.01;
        assert!(near(s.rx_dropped, 0.1) && near(s.rx_duplicated, 0.05) && near(s.rx_reordered, 0.05), "{s:?}");
        assert!(!f.tx_drop());
    }
}
