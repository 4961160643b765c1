//! Fault injection at the device: drop, duplicate and reorder received
//! frames, drop sent frames. For tests of loss recovery on a host without
//! netem; off unless configured.

/// Probabilities in [0, 1].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Faults {
    pub rx_drop: f64,
    pub rx_dup: f64,
    pub rx_reorder: f64,
    pub tx_drop: f64,
    pub seed: u64,
}

impl Faults {
    pub fn any(&self) -> bool {
        self.rx_drop > 0.0 || self.rx_dup > 0.0 || self.rx_reorder > 0.0 || self.tx_drop > 0.0
    }
}

/// What to do with one received frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxFate {
    Deliver,
    Drop,
    Duplicate,
    /// Hold it back and deliver it after the next frame.
    Delay,
}

#[derive(Clone, Debug)]
pub struct FaultState {
    pub cfg: Faults,
    rng: u64,
    pub rx_dropped: u64,
    pub rx_duplicated: u64,
    pub rx_reordered: u64,
    pub tx_dropped: u64,
}

impl FaultState {
    pub fn new(cfg: Faults) -> FaultState {
        FaultState { cfg, rng: cfg.seed | 1, rx_dropped: 0, rx_duplicated: 0, rx_reordered: 0, tx_dropped: 0 }
    }

    fn next(&mut self) -> f64 {
        // xorshift64*: plenty for fault dice.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        (self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn rx(&mut self) -> RxFate {
        let r = self.next();
        let c = self.cfg;
        if r < c.rx_drop {
            self.rx_dropped += 1;
            RxFate::Drop
        } else if r < c.rx_drop + c.rx_dup {
            self.rx_duplicated += 1;
            RxFate::Duplicate
        } else if r < c.rx_drop + c.rx_dup + c.rx_reorder {
            self.rx_reordered += 1;
            RxFate::Delay
        } else {
            RxFate::Deliver
        }
    }

    pub fn tx_drop(&mut self) -> bool {
        if self.cfg.tx_drop > 0.0 && self.next() < self.cfg.tx_drop {
            self.tx_dropped += 1;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_roughly_right() {
        let mut f = FaultState::new(Faults { rx_drop: 0.1, rx_dup: 0.05, rx_reorder: 0.05, tx_drop: 0.0, seed: 3 });
        let n = 100_000;
        for _ in 0..n {
            f.rx();
        }
        let near = |x: u64, p: f64| ((x as f64 / n as f64) - p).abs() < 0.01;
        assert!(near(f.rx_dropped, 0.1) && near(f.rx_duplicated, 0.05) && near(f.rx_reordered, 0.05), "{f:?}");
        assert!(!f.tx_drop());
    }
}
