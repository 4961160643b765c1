//! What a change to the device reports: the tuning makes them, the ownership record ([`crate::state`])
//! keeps these too, and reads nothing else of the tuning.

use std::fmt;

/// How one step turned out.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Already as needed.
    Ok,
    /// Changed (and remembered for [`Tuning::restore`](crate::tune::Tuning::restore)).
    Changed {
        /// The value before.
        from: String,
        /// The value now.
        to: String,
    },
    /// Check-only mode: would be changed.
    WouldChange {
        /// The value now.
        from: String,
        /// The value it would get.
        to: String,
    },
    /// Not done, and why (e.g. an earlier step failed, or nothing to do on
    /// this device).
    Skipped(String),
    /// Works, with a caveat worth acting on.
    Warn {
        /// The caveat.
        note: String,
        /// What to do about it.
        fix: String,
    },
    /// The check failed or the change was refused: the device cannot be
    /// used as asked.
    Failed {
        /// What went wrong.
        error: String,
        /// The command or setting that fixes it.
        fix: String,
    },
}

/// One reported step: `what` names the device setting, e.g. `virtio_net: rx-gro-hw`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Step {
    /// The setting, prefixed with the device or driver.
    pub what: String,
    /// How it turned out.
    pub outcome: Outcome,
}

impl Step {
    /// Whether the outcome is [`Outcome::Failed`].
    pub fn is_failed(&self) -> bool {
        matches!(self.outcome, Outcome::Failed { .. })
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = &self.what;
        match &self.outcome {
            Outcome::Ok => write!(f, "{w}: ok"),
            Outcome::Changed { from, to } => write!(f, "{w} {from} -> {to}"),
            Outcome::WouldChange { from, to } => {
                write!(f, "{w} {from} -> {to} (check only: not applied)")
            }
            Outcome::Skipped(why) => write!(f, "{w}: skipped: {why}"),
            Outcome::Warn { note, fix } => write!(f, "{w}: WARNING: {note} (fix: {fix})"),
            Outcome::Failed { error, fix } => write!(f, "{w}: FAILED: {error} (fix: {fix})"),
        }
    }
}
