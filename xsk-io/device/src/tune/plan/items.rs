//! What a plan is made of: checks already decided and changes to make, with
//! the small builders the driver planners write them with.

use crate::ethtool::{Channels, FeatureState};
use crate::step::{Outcome, Step};
use crate::AttachMode;

/// The change a [`Change`] makes (and, from its originals, how to undo it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// `ETHTOOL_SFEATURES`: `set` the named features; `original` holds their
    /// `requested` bits before, to put back on restore.
    Features {
        ifname: String,
        set: Vec<(String, bool)>,
        original: Vec<(String, bool)>,
    },
    /// `ETHTOOL_SCHANNELS` from `from` to `to`.
    Channels {
        ifname: String,
        from: Channels,
        to: Channels,
    },
}

impl Op {
    /// The operation that undoes this one.
    pub fn undo(&self) -> Op {
        match self {
            Op::Features {
                ifname,
                set,
                original,
            } => Op::Features {
                ifname: ifname.clone(),
                set: original.clone(),
                original: set.clone(),
            },
            Op::Channels { ifname, from, to } => Op::Channels {
                ifname: ifname.clone(),
                from: *to,
                to: *from,
            },
        }
    }
}

/// A change to the device: shown as `what from -> to`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub what: String,
    pub from: String,
    pub to: String,
    pub op: Op,
    /// What to run by hand if the change fails.
    pub fix: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// A check, already decided.
    Check(Step),
    /// A change to make (or, in check-only mode, to report).
    Change(Change),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The resolved mode: `Skb` or `Drv`, never `Auto`.
    pub mode: AttachMode,
    pub items: Vec<Item>,
}

impl Plan {
    pub fn first_failure(&self) -> Option<&Step> {
        self.items.iter().find_map(|i| match i {
            Item::Check(s) if s.is_failed() => Some(s),
            _ => None,
        })
    }

    #[cfg(test)]
    pub fn changes(&self) -> impl Iterator<Item = &Change> {
        self.items.iter().filter_map(|i| match i {
            Item::Change(c) => Some(c),
            _ => None,
        })
    }

    /// The checks only (changes left out).
    #[cfg(test)]
    pub fn checks(&self) -> impl Iterator<Item = &Step> {
        self.items.iter().filter_map(|i| match i {
            Item::Check(s) => Some(s),
            _ => None,
        })
    }
}

pub(super) fn check(what: impl Into<String>, outcome: Outcome) -> Item {
    Item::Check(Step {
        what: what.into(),
        outcome,
    })
}

pub(super) fn ok(what: impl Into<String>) -> Item {
    check(what, Outcome::Ok)
}

pub(super) fn skipped(what: impl Into<String>, why: impl Into<String>) -> Item {
    check(what, Outcome::Skipped(why.into()))
}

pub(super) fn warn(what: impl Into<String>, note: impl Into<String>, fix: impl Into<String>) -> Item {
    check(
        what,
        Outcome::Warn {
            note: note.into(),
            fix: fix.into(),
        },
    )
}

pub(super) fn failed(what: impl Into<String>, error: impl Into<String>, fix: impl Into<String>) -> Item {
    check(
        what,
        Outcome::Failed {
            error: error.into(),
            fix: fix.into(),
        },
    )
}

/// Turn features off on `ifname` (one change for the whole group).
pub(super) fn features_off(what: String, ifname: &str, names: &[(&str, FeatureState)], fix: String) -> Item {
    Item::Change(Change {
        what,
        from: "on".into(),
        to: "off".into(),
        op: Op::Features {
            ifname: ifname.to_string(),
            set: names.iter().map(|(n, _)| (n.to_string(), false)).collect(),
            original: names
                .iter()
                .map(|(n, s)| (n.to_string(), s.requested))
                .collect(),
        },
        fix,
    })
}
