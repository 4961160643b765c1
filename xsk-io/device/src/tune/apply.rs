//! Carrying out a plan: each change through the device operations (ethtool
//! ioctls, or a fake in the tests), rolled back when one fails, and the
//! [`Tuning`] that remembers how to undo them.

use std::fmt;

use super::error::TuneError;
use crate::ethtool::{self, Channels};
use super::options::{QueueLayout, TuneOptions};
use super::plan::{Item, Op, Plan};
use super::snapshot::DeviceSnapshot;
use crate::step::{Outcome, Step};
use crate::AttachMode;

/// Applies plan operations. The real one is [`EthtoolOps`]; tests use a fake.
pub(super) trait DeviceOps {
    /// Request features on/off; returns the features' `active` state afterwards.
    fn set_features(
        &mut self,
        ifname: &str,
        set: &[(String, bool)],
    ) -> Result<Vec<(String, bool)>, String>;
    fn set_channels(&mut self, ifname: &str, ch: &Channels) -> Result<(), String>;
}

pub(super) struct EthtoolOps;

impl DeviceOps for EthtoolOps {
    fn set_features(
        &mut self,
        ifname: &str,
        set: &[(String, bool)],
    ) -> Result<Vec<(String, bool)>, String> {
        let table = match ethtool::features(ifname) {
            Ok(t) => t,
            // No feature string set: legacy ETHTOOL_SGRO can still do GRO.
            Err(e) => match set {
                [(name, on)] if name == "rx-gro" => {
                    ethtool::set_gro(ifname, *on).map_err(|e| format!("ETHTOOL_SGRO: {e}"))?;
                    let now = ethtool::gro(ifname).map_err(|e| format!("ETHTOOL_GGRO: {e}"))?;
                    return Ok(vec![(name.clone(), now)]);
                }
                _ => return Err(format!("ETHTOOL_GFEATURES: {e}")),
            },
        };
        let changes: Vec<(&str, bool)> = set.iter().map(|(n, on)| (n.as_str(), *on)).collect();
        ethtool::set_features(ifname, &table, &changes)
            .map_err(|e| format!("ETHTOOL_SFEATURES: {e}"))?;
        let after = ethtool::features(ifname).map_err(|e| format!("ETHTOOL_GFEATURES: {e}"))?;
        Ok(set
            .iter()
            .map(|(n, _)| (n.clone(), after.state(n).is_some_and(|s| s.active)))
            .collect())
    }

    fn set_channels(&mut self, ifname: &str, ch: &Channels) -> Result<(), String> {
        ethtool::set_channels(ifname, ch).map_err(|e| format!("ETHTOOL_SCHANNELS: {e}"))
    }
}

/// Why an operation did not take effect.
struct OpError {
    error: String,
    /// The call went through (so requested bits may have moved) but the
    /// driver kept the old state: undo it like a successful one.
    applied: bool,
}

/// Run one operation.
fn run_op(ops: &mut dyn DeviceOps, op: &Op) -> Result<(), OpError> {
    let refused = |error| OpError {
        error,
        applied: false,
    };
    match op {
        Op::Features { ifname, set, .. } => {
            let after = ops.set_features(ifname, set).map_err(refused)?;
            let stuck: Vec<String> = set
                .iter()
                .zip(&after)
                .filter(|((_, want), (_, active))| want != active)
                .map(|((n, want), _)| format!("{n} stays {}", if *want { "off" } else { "on" }))
                .collect();
            if stuck.is_empty() {
                Ok(())
            } else {
                Err(OpError {
                    error: format!("the driver kept the old state: {}", stuck.join(", ")),
                    applied: true,
                })
            }
        }
        Op::Channels { ifname, to, .. } => ops.set_channels(ifname, to).map_err(refused),
    }
}

/// Something [`Tuning::restore`] puts back.
#[derive(Clone, Debug)]
struct Undo {
    what: String,
    /// State we left it in, state it had.
    now: String,
    was: String,
    op: Op,
}

pub(super) fn execute(
    snap: &DeviceSnapshot,
    plan: &Plan,
    opts: &TuneOptions,
    ops: &mut dyn DeviceOps,
    restore_ops: Box<dyn DeviceOps + Send>,
) -> Result<Tuning, TuneError> {
    let check_failure = plan.first_failure().map(|s| s.what.clone());
    let mut steps = Vec::new();
    let mut undo = Vec::new();
    let mut aborted: Option<String> = None;
    for item in &plan.items {
        match item {
            Item::Check(s) => steps.push(s.clone()),
            Item::Change(c) => {
                let outcome = if !opts.apply {
                    Outcome::WouldChange {
                        from: c.from.clone(),
                        to: c.to.clone(),
                    }
                } else if let Some(f) = check_failure.as_ref().or(aborted.as_ref()) {
                    Outcome::Skipped(format!("not applied because `{f}` failed"))
                } else {
                    match run_op(ops, &c.op) {
                        Ok(()) => {
                            undo.push(Undo {
                                what: c.what.clone(),
                                now: c.to.clone(),
                                was: c.from.clone(),
                                op: c.op.undo(),
                            });
                            Outcome::Changed {
                                from: c.from.clone(),
                                to: c.to.clone(),
                            }
                        }
                        Err(OpError { error, applied }) => {
                            if applied {
                                undo.push(Undo {
                                    what: c.what.clone(),
                                    now: c.to.clone(),
                                    was: c.from.clone(),
                                    op: c.op.undo(),
                                });
                            }
                            aborted = Some(c.what.clone());
                            Outcome::Failed {
                                error,
                                fix: c.fix.clone(),
                            }
                        }
                    }
                };
                steps.push(Step {
                    what: c.what.clone(),
                    outcome,
                });
            }
        }
    }
    let mut tuning = Tuning {
        ifname: snap.ifname.clone(),
        driver: snap.driver.clone(),
        mode: plan.mode,
        queues: opts.queues,
        frame_size: opts.frame_size,
        applied: opts.apply,
        steps,
        undo,
        ops: restore_ops,
    };
    let failure = tuning.steps.iter().find(|s| s.is_failed()).cloned();
    match failure {
        None => Ok(tuning),
        Some(f) => {
            let rollback = tuning.restore_with(ops);
            let mut report = std::mem::take(&mut tuning.steps);
            report.extend(rollback.into_iter().map(|s| Step {
                what: format!("rollback: {}", s.what),
                ..s
            }));
            let Outcome::Failed { error, fix } = f.outcome else {
                unreachable!()
            };
            Err(TuneError::Step {
                step: f.what,
                error,
                fix,
                report,
            })
        }
    }
}

/// The result of [`prepare`](super::prepare): the report and the originals to restore.
/// Dropping it restores (logging each step), like [`restore`](Self::restore).
pub struct Tuning {
    /// The interface.
    pub ifname: String,
    /// Its driver.
    pub driver: String,
    /// The mode to attach the program in (`Skb` or `Drv`; `Auto` resolved).
    pub mode: AttachMode,
    /// The queue layout prepared for.
    pub queues: QueueLayout,
    /// The frame size prepared for, in bytes.
    pub frame_size: u32,
    /// `false` for a check-only run (nothing was changed).
    pub applied: bool,
    /// Every check and change, in order.
    pub steps: Vec<Step>,
    undo: Vec<Undo>,
    ops: Box<dyn DeviceOps + Send>,
}

impl fmt::Debug for Tuning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tuning")
            .field("ifname", &self.ifname)
            .field("driver", &self.driver)
            .field("mode", &self.mode)
            .field("steps", &self.steps)
            .field("to_restore", &self.undo.len())
            .finish()
    }
}

impl Tuning {
    /// Undo what [`prepare`](super::prepare) changed, newest first, best effort: every undo is
    /// tried and reported. Idempotent: a second call returns nothing.
    /// Call it after detaching the XDP program.
    pub fn restore(&mut self) -> Vec<Step> {
        let mut ops = std::mem::replace(&mut self.ops, Box::new(EthtoolOps));
        let steps = self.restore_with(&mut *ops);
        self.ops = ops;
        steps
    }

    fn restore_with(&mut self, ops: &mut dyn DeviceOps) -> Vec<Step> {
        let mut steps = Vec::new();
        while let Some(u) = self.undo.pop() {
            let outcome = match run_op(ops, &u.op) {
                Ok(()) => Outcome::Changed {
                    from: u.now,
                    to: u.was,
                },
                Err(OpError { error, .. }) => Outcome::Failed {
                    error,
                    fix: match &u.op {
                        Op::Features { ifname, set, .. } => format!(
                            "run: ethtool -K {ifname} {}",
                            set.iter()
                                .map(|(n, on)| format!("{n} {}", if *on { "on" } else { "off" }))
                                .collect::<Vec<_>>()
                                .join(" ")
                        ),
                        Op::Channels { ifname, to, .. } if to.combined > 0 => {
                            format!(
                                "run: ethtool -L {ifname} combined {} (after detaching XDP)",
                                to.combined
                            )
                        }
                        Op::Channels { ifname, to, .. } => {
                            format!("run: ethtool -L {ifname} rx {} tx {}", to.rx, to.tx)
                        }
                    },
                },
            };
            steps.push(Step {
                what: u.what,
                outcome,
            });
        }
        steps
    }

    /// Changes still to be undone.
    pub fn pending_restore(&self) -> usize {
        self.undo.len()
    }

    /// Steps with a warning.
    pub fn warnings(&self) -> impl Iterator<Item = &Step> {
        self.steps
            .iter()
            .filter(|s| matches!(s.outcome, Outcome::Warn { .. }))
    }

    /// A multi-line report: a headline, then one line per step.
    pub fn summary(&self) -> String {
        let count = |f: fn(&Outcome) -> bool| self.steps.iter().filter(|s| f(&s.outcome)).count();
        let changed = count(|o| matches!(o, Outcome::Changed { .. }));
        let would = count(|o| matches!(o, Outcome::WouldChange { .. }));
        let warnings = count(|o| matches!(o, Outcome::Warn { .. }));
        let mut out = format!(
            "{} ({}): attach {}, queues {}, frame {}: {}, {} warning(s)\n",
            self.ifname,
            self.driver,
            self.mode,
            self.queues,
            self.frame_size,
            if self.applied {
                format!("{changed} changed")
            } else {
                format!("check only, {would} would change")
            },
            warnings
        );
        for s in &self.steps {
            out.push_str("  ");
            out.push_str(&s.to_string());
            out.push('\n');
        }
        out
    }
}

impl Drop for Tuning {
    fn drop(&mut self) {
        if self.undo.is_empty() {
            return;
        }
        for s in self.restore() {
            if s.is_failed() {
                tracing::warn!(ifname = %self.ifname, "restore: {s}");
            } else {
                tracing::info!(ifname = %self.ifname, "restore: {s}");
            }
        }
    }
}
