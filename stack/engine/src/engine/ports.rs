//! Which local ports the engine uses: listening ports and the ephemeral
//! ports of its outgoing connections.

use std::ops::RangeInclusive;

/// A port the driver stops steering (and holding in the kernel).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortChange {
    /// The ephemeral port of a finished connection is free again.
    Released(u16),
}

pub(super) struct PortTable {
    in_use: Vec<bool>,
    listening: Vec<bool>,
    /// Listened on once and stopped (`Engine::unlisten`): connections accepted there may
    /// still be open, so its frames are not refused and it is never handed out.
    stopped: Vec<bool>,
    range: RangeInclusive<u16>,
    next: u16,
    changes: Vec<PortChange>,
}

impl PortTable {
    pub(super) fn new(range: RangeInclusive<u16>) -> PortTable {
        PortTable {
            in_use: vec![false; 65536],
            listening: vec![false; 65536],
            stopped: vec![false; 65536],
            next: *range.start(), range, changes: Vec::new() }
    }

    /// A free ephemeral port, marked in use.
    pub(super) fn alloc(&mut self) -> Option<u16> {
        let (lo, hi) = (*self.range.start(), *self.range.end());
        if lo > hi {
            return None;
        }
        for _ in 0..=(hi - lo) as u32 {
            let p = self.next;
            self.next = if p >= hi { lo } else { p + 1 };
            if !self.in_use[p as usize] && !self.listening[p as usize] && !self.stopped[p as usize] {
                self.in_use[p as usize] = true;
                return Some(p);
            }
        }
        None
    }

    pub(super) fn release(&mut self, p: u16) {
        if p != 0 && self.in_use[p as usize] {
            self.in_use[p as usize] = false;
            self.changes.push(PortChange::Released(p));
        }
    }

    pub(super) fn set_listening(&mut self, p: u16) {
        self.listening[p as usize] = true;
    }

    pub(super) fn stop_listening(&mut self, p: u16) {
        self.listening[p as usize] = false;
        self.stopped[p as usize] = true;
    }

    /// A port of ours: an ephemeral one in use, or one listened on before.
    pub(super) fn in_use_or_stopped(&self, p: u16) -> bool {
        self.in_use[p as usize] || self.stopped[p as usize]
    }

    pub(super) fn listening(&self, p: u16) -> bool {
        self.listening[p as usize]
    }

    pub(super) fn changes(&mut self) -> std::vec::Drain<'_, PortChange> {
        self.changes.drain(..)
    }

    pub(super) fn has_changes(&self) -> bool {
        !self.changes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_each_port_once_and_wraps() {
        let mut t = PortTable::new(100..=103);
        let got: Vec<_> = (0..4).map(|_| t.alloc().unwrap()).collect();
        assert_eq!(got, vec![100, 101, 102, 103]);
        assert_eq!(t.alloc(), None);
        t.release(101);
        assert_eq!(t.changes().collect::<Vec<_>>(), vec![PortChange::Released(101)]);
        assert_eq!(t.alloc(), Some(101));
        // Releasing twice reports once.
        t.release(101);
        t.release(101);
        assert_eq!(t.changes().count(), 1);
    }

    #[test]
    fn listening_ports_are_not_handed_out() {
        let mut t = PortTable::new(100..=101);
        t.set_listening(100);
        assert_eq!(t.alloc(), Some(101));
        assert_eq!(t.alloc(), None);
    }
}
