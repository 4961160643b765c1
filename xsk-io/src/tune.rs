//! Device tuning for the drivers we target (virtio_net, veth), done with
//! ethtool ioctls and sysfs, each step reported.
//!
//! [`prepare`] reads a [`snapshot::DeviceSnapshot`] of the interface, decides
//! with a pure planner (crate-internal, unit-tested) what has to be checked and changed for a
//! copy-mode AF_XDP socket in the chosen [`AttachMode`] and [`QueueLayout`],
//! applies the changes (or only reports them), and returns a [`Tuning`] that
//! remembers the originals. [`Tuning::restore`] (or dropping the `Tuning`)
//! puts them back, in reverse order.
//!
//! Call [`prepare`] **before** attaching the XDP program and binding sockets
//! (virtio_net refuses channel changes while XDP is loaded), and restore
//! **after** detaching it (virtio_net refuses `rx-gro-hw` changes while XDP is
//! loaded; turning aggregation back on under a generic program would feed it
//! 64 KiB frames).
//!
//! Layers: `ethtool` (the ioctls, the module's only `unsafe`; crate-internal),
//! [`snapshot`](mod@snapshot) (reading), `plan` (deciding; unit-tested; crate-internal),
//! this file (applying).
//!
//! Most users never call this module: [`crate::iface::Iface::prepare`] runs
//! it with a crash-safe record of the originals. [`prepare`] on its own (as
//! the `tune_probe` example does) restores on drop but leaves no record.
//!
//! sysfs shows the network namespace it was mounted in: run in the device's
//! namespace with `ip netns exec` (which remounts `/sys`), not bare `setns`.

use std::fmt;
use std::io;
use std::str::FromStr;

use crate::state::{DeviceState, Owner};
use crate::AttachMode;

pub(crate) mod ethtool;
pub(crate) mod plan;
pub mod snapshot;
pub(crate) mod step;

pub use ethtool::{Channels, FeatureState};
pub use step::{Outcome, Step};
use plan::{Item, Op, Plan};
use snapshot::DeviceSnapshot;

/// Which queues get a socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueLayout {
    /// Only queue 0 is bound: the device must deliver everything to queue 0.
    Single,
    /// A socket per receive queue.
    All,
}

impl fmt::Display for QueueLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QueueLayout::Single => "single",
            QueueLayout::All => "all",
        })
    }
}

impl FromStr for QueueLayout {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "single" | "one" => Ok(QueueLayout::Single),
            "all" => Ok(QueueLayout::All),
            other => Err(format!(
                "unknown queue layout {other:?} (expected single or all)"
            )),
        }
    }
}

/// What to prepare a device for. Default: `Auto` mode, a single queue,
/// 4096-byte frames, apply.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TuneOptions {
    /// `Skb` or `Drv`; `Auto` lets [`prepare`] decide (native where the driver
    /// has it and its checks pass, else generic). [`Tuning::mode`] tells.
    pub mode: AttachMode,
    /// Which queues get a socket: `Single` makes the device deliver
    /// everything to queue 0 (e.g. virtio_net down to one combined channel).
    pub queues: QueueLayout,
    /// UMEM frame (chunk) size, e.g. 4096. With UMEM headroom
    /// (`xdp_umem_reg.headroom`), pass the chunk size minus that headroom.
    pub frame_size: u32,
    /// `false`: change nothing, report what would change.
    pub apply: bool,
}

impl Default for TuneOptions {
    fn default() -> Self {
        TuneOptions {
            mode: AttachMode::Auto,
            queues: QueueLayout::Single,
            frame_size: 4096,
            apply: true,
        }
    }
}

/// Why a device cannot be prepared; nothing stays changed (a failed
/// preparation rolls back first). Both variants carry a fix.
#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    /// An ioctl or sysfs read failed before any decision could be made.
    #[error("{op} on {ifname}: {source} (fix: {fix})")]
    Io {
        /// The operation, e.g. `"ETHTOOL_GDRVINFO"`.
        op: &'static str,
        /// The interface.
        ifname: String,
        /// The OS error.
        source: io::Error,
        /// What to do (permissions, namespace, driver).
        fix: String,
    },
    /// A check or change failed. `report` holds every step (and the rollback
    /// of changes already made, when applying).
    #[error("{step}: {error} (fix: {fix})")]
    Step {
        /// The failed step's `what`.
        step: String,
        /// What went wrong.
        error: String,
        /// The command or setting that fixes it.
        fix: String,
        /// Every step, then the rollback steps (prefixed `rollback:`).
        report: Vec<Step>,
    },
}

impl TuneError {
    fn io(op: &'static str, ifname: &str, source: io::Error) -> Self {
        let fix = match source.raw_os_error() {
            Some(libc::ENODEV) => {
                "check the name with `ip link`, in the interface's network namespace".to_string()
            }
            Some(libc::EPERM) | Some(libc::EACCES) => "needs CAP_NET_ADMIN: run as root".to_string(),
            Some(libc::EOPNOTSUPP) => "the driver does not implement this ethtool operation".to_string(),
            _ if source.kind() == io::ErrorKind::NotFound => {
                "sysfs belongs to another network namespace: run under `ip netns exec` (it remounts /sys)"
                    .to_string()
            }
            _ => "see the error".to_string(),
        };
        TuneError::Io {
            op,
            ifname: ifname.to_string(),
            source,
            fix,
        }
    }

    /// The fix hint.
    pub fn fix(&self) -> &str {
        match self {
            TuneError::Io { fix, .. } | TuneError::Step { fix, .. } => fix,
        }
    }

    /// All steps, for printing (empty for I/O errors).
    pub fn report(&self) -> &[Step] {
        match self {
            TuneError::Io { .. } => &[],
            TuneError::Step { report, .. } => report,
        }
    }
}

/// `ETHTOOL_GDRVINFO`: the driver behind `ifname` (`virtio_net`, `veth`, ...).
pub fn driver_name(ifname: &str) -> Result<String, TuneError> {
    ethtool::driver(ifname).map_err(|e| TuneError::io("ETHTOOL_GDRVINFO", ifname, e))
}

/// Receive queues in use: `ETHTOOL_GCHANNELS` (combined + rx), else the
/// count of `/sys/class/net/<if>/queues/rx-*`. On virtio_net this grows when
/// a native program with dedicated XDP TX queues is attached: ask again then.
pub fn rx_queue_count(ifname: &str) -> Result<u32, TuneError> {
    if let Ok(ch) = ethtool::channels(ifname) {
        if ch.rx_queues() > 0 {
            return Ok(ch.rx_queues());
        }
    }
    let dir = format!("/sys/class/net/{ifname}/queues");
    let entries = std::fs::read_dir(&dir).map_err(|e| TuneError::io("sysfs queues", ifname, e))?;
    Ok(entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("rx-"))
        .count() as u32)
}

/// Read the device state (no changes).
///
/// # Errors
/// [`TuneError::Io`] if the driver or sysfs cannot be read (no such device,
/// or sysfs of another network namespace: use `ip netns exec`).
pub fn snapshot(ifname: &str) -> Result<DeviceSnapshot, TuneError> {
    snapshot::read(ifname)
}

/// Check (and with `opts.apply`, change) `ifname` for a copy-mode AF_XDP
/// socket. Fails with the first failed step and its fix; everything changed
/// by then is rolled back.
///
/// Keeps no crash-safe record: if the process dies before the [`Tuning`] is
/// dropped, the changes stay (use [`crate::iface::Iface`] for a record).
///
/// # Errors
/// [`TuneError::Io`] if the device cannot be read; [`TuneError::Step`] with
/// the full report if a check or change fails.
pub fn prepare(ifname: &str, opts: &TuneOptions) -> Result<Tuning, TuneError> {
    prepare_recorded(ifname, opts, None)
}

/// [`prepare`], first writing what it is about to change to `owner`'s
/// crash-safe record (see [`crate::state`]), so that the original state
/// survives a crash of this process.
pub(crate) fn prepare_recorded(ifname: &str, opts: &TuneOptions, owner: Option<&mut Owner>) -> Result<Tuning, TuneError> {
    let snap = snapshot::read(ifname)?;
    let plan = plan::plan(&snap, opts);
    if let (Some(owner), true) = (owner, opts.apply) {
        for d in originals(&snap, &plan) {
            owner.record_device(d).map_err(|e| TuneError::Step {
                step: "recording the original device state".into(),
                error: e.to_string(),
                fix: format!("make {} writable, or set {}", crate::state::state_dir().display(), crate::state::STATE_DIR_ENV),
                report: Vec::new(),
            })?;
        }
    }
    execute(&snap, &plan, opts, &mut EthtoolOps, Box::new(EthtoolOps))
}

/// The original state of everything `plan` changes, per device, plus the MTUs.
fn originals(snap: &DeviceSnapshot, plan: &Plan) -> Vec<DeviceState> {
    let mut out = vec![DeviceState { ifname: snap.ifname.clone(), mtu: Some(snap.mtu), ..Default::default() }];
    if let snapshot::Peer::Here(p) = &snap.peer {
        out.push(DeviceState { ifname: p.ifname.clone(), mtu: Some(p.mtu), ..Default::default() });
    }
    for item in &plan.items {
        let Item::Change(c) = item else { continue };
        let name = match &c.op {
            Op::Features { ifname, .. } | Op::Channels { ifname, .. } => ifname,
        };
        let i = match out.iter().position(|d| d.ifname == *name) {
            Some(i) => i,
            None => {
                out.push(DeviceState { ifname: name.clone(), ..Default::default() });
                out.len() - 1
            }
        };
        let d = &mut out[i];
        match &c.op {
            Op::Features { original, .. } => {
                for (n, on) in original {
                    if !d.features.iter().any(|(m, _)| m == n) {
                        d.features.push((n.clone(), *on));
                    }
                }
            }
            Op::Channels { from, .. } => d.channels = d.channels.or(Some(*from)),
        }
    }
    out
}

/// Applies plan operations. The real one is [`EthtoolOps`]; tests use a fake.
trait DeviceOps {
    /// Request features on/off; returns the features' `active` state afterwards.
    fn set_features(
        &mut self,
        ifname: &str,
        set: &[(String, bool)],
    ) -> Result<Vec<(String, bool)>, String>;
    fn set_channels(&mut self, ifname: &str, ch: &Channels) -> Result<(), String>;
}

struct EthtoolOps;

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

fn execute(
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

/// The result of [`prepare`]: the report and the originals to restore.
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
    /// Undo what [`prepare`] changed, newest first, best effort: every undo is
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

#[cfg(test)]
mod tests {
    use super::*;
    use ethtool::FeatureState;
    use plan::Change;
    use snapshot::{Peer, PeerSnapshot};
    use std::collections::{BTreeMap, HashMap};
    use std::sync::{Arc, Mutex};

    /// A fake device: feature `requested` bits per (ifname, feature), channel
    /// counts per ifname, a log of calls, and features that refuse to change.
    #[derive(Default)]
    struct Fake {
        features: HashMap<(String, String), bool>,
        channels: HashMap<String, Channels>,
        stuck: Vec<String>,
        fail_channels: bool,
        log: Arc<Mutex<Vec<String>>>,
    }

    impl DeviceOps for Fake {
        fn set_features(
            &mut self,
            ifname: &str,
            set: &[(String, bool)],
        ) -> Result<Vec<(String, bool)>, String> {
            self.log.lock().unwrap().push(format!("K {ifname} {set:?}"));
            Ok(set
                .iter()
                .map(|(n, on)| {
                    if !self.stuck.contains(n) {
                        self.features.insert((ifname.into(), n.clone()), *on);
                    }
                    (
                        n.clone(),
                        *self
                            .features
                            .get(&(ifname.into(), n.clone()))
                            .unwrap_or(&true),
                    )
                })
                .collect())
        }

        fn set_channels(&mut self, ifname: &str, ch: &Channels) -> Result<(), String> {
            self.log
                .lock()
                .unwrap()
                .push(format!("L {ifname} rx {} combined {}", ch.rx, ch.combined));
            if self.fail_channels {
                return Err("ETHTOOL_SCHANNELS: Invalid argument (os error 22)".into());
            }
            self.channels.insert(ifname.into(), *ch);
            Ok(())
        }
    }

    fn feat(active: bool, changeable: bool) -> FeatureState {
        FeatureState {
            active,
            requested: active,
            changeable,
        }
    }

    fn veth() -> DeviceSnapshot {
        let mut s = DeviceSnapshot::example("veth");
        s.ifname = "tv0".into();
        s.channels = Some(Channels {
            max_rx: 2,
            max_tx: 2,
            rx: 2,
            tx: 1,
            ..Default::default()
        });
        s.rx_queues = 2;
        s.features = BTreeMap::from([
            ("rx-gro".into(), feat(true, true)),
            ("rx-lro".into(), feat(false, false)),
        ]);
        s.peer = Peer::Here(PeerSnapshot {
            ifname: "tv1".into(),
            ifindex: 3,
            mtu: 1500,
            tx_queues: 1,
            features: BTreeMap::from([("tx-tcp-segmentation".into(), feat(true, true))]),
        });
        s
    }

    /// Plan and execute on `fake`; restores go to a second fake sharing its log.
    fn run(s: &DeviceSnapshot, o: &TuneOptions, fake: Fake) -> (Result<Tuning, TuneError>, Fake) {
        let mut fake = fake;
        let p = plan::plan(s, o);
        let restore = Box::new(Fake {
            log: fake.log.clone(),
            ..Default::default()
        });
        let r = execute(s, &p, o, &mut fake, restore);
        (r, fake)
    }

    fn skb() -> TuneOptions {
        TuneOptions {
            mode: AttachMode::Skb,
            ..Default::default()
        }
    }

    #[test]
    fn display_of_steps() {
        let s = Step {
            what: "virtio_net: gro-hw".into(),
            outcome: Outcome::Changed {
                from: "on".into(),
                to: "off".into(),
            },
        };
        assert_eq!(s.to_string(), "virtio_net: gro-hw on -> off");
        let s = Step {
            what: "veth: rx-lro off".into(),
            outcome: Outcome::Ok,
        };
        assert_eq!(s.to_string(), "veth: rx-lro off: ok");
        let s = Step {
            what: "virtio_net: mtu 9000 for native XDP".into(),
            outcome: Outcome::Failed {
                error: "too big".into(),
                fix: "run: ip link set dev eth0 mtu 1500".into(),
            },
        };
        assert_eq!(s.to_string(), "virtio_net: mtu 9000 for native XDP: FAILED: too big (fix: run: ip link set dev eth0 mtu 1500)");
    }

    #[test]
    fn apply_then_restore_in_reverse() {
        let log = Arc::new(Mutex::new(vec![]));
        let (r, _) = run(
            &veth(),
            &skb(),
            Fake {
                log: log.clone(),
                ..Default::default()
            },
        );
        let mut t = r.unwrap();
        assert_eq!(t.mode, AttachMode::Skb);
        let changed: Vec<String> = t
            .steps
            .iter()
            .filter(|s| matches!(s.outcome, Outcome::Changed { .. }))
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            changed,
            [
                "veth: rx channels 2 -> 1",
                "veth: peer tv1 segmentation offloads (tx-tcp-segmentation) on -> off",
                "veth: rx-gro on -> off"
            ]
        );
        assert_eq!(t.pending_restore(), 3);
        let back: Vec<String> = t.restore().iter().map(|s| s.to_string()).collect();
        assert_eq!(
            back,
            [
                "veth: rx-gro off -> on",
                "veth: peer tv1 segmentation offloads (tx-tcp-segmentation) off -> on",
                "veth: rx channels 1 -> 2"
            ]
        );
        assert!(t.restore().is_empty(), "idempotent");
        let log = log.lock().unwrap().clone();
        assert_eq!(
            log,
            [
                "L tv0 rx 1 combined 0",
                "K tv1 [(\"tx-tcp-segmentation\", false)]",
                "K tv0 [(\"rx-gro\", false)]",
                "K tv0 [(\"rx-gro\", true)]",
                "K tv1 [(\"tx-tcp-segmentation\", true)]",
                "L tv0 rx 2 combined 0",
            ]
        );
    }

    #[test]
    fn check_only_changes_nothing() {
        let log = Arc::new(Mutex::new(vec![]));
        let o = TuneOptions {
            apply: false,
            ..skb()
        };
        let (r, _) = run(
            &veth(),
            &o,
            Fake {
                log: log.clone(),
                ..Default::default()
            },
        );
        let t = r.unwrap();
        assert!(!t.applied);
        assert_eq!(t.pending_restore(), 0);
        assert!(log.lock().unwrap().is_empty());
        assert!(t
            .steps
            .iter()
            .any(|s| s.to_string() == "veth: rx-gro on -> off (check only: not applied)"));
        assert!(
            t.summary().contains("check only, 3 would change"),
            "{}",
            t.summary()
        );
    }

    #[test]
    fn failed_check_applies_nothing_and_reports_everything() {
        let log = Arc::new(Mutex::new(vec![]));
        let mut s = veth();
        s.mtu = 9000;
        let (r, _) = run(
            &s,
            &skb(),
            Fake {
                log: log.clone(),
                ..Default::default()
            },
        );
        let e = r.unwrap_err();
        assert!(log.lock().unwrap().is_empty(), "nothing applied");
        let TuneError::Step {
            step, fix, report, ..
        } = &e
        else {
            panic!("{e}")
        };
        assert_eq!(step, "veth: mtu 9000 in 4096-byte frames");
        assert_eq!(
            fix,
            "run: ip link set dev tv0 mtu 3822 (or use a larger frame_size)"
        );
        assert!(report.iter().any(
            |s| matches!(&s.outcome, Outcome::Skipped(r) if r.contains("not applied because"))
        ));
        assert!(e
            .to_string()
            .contains("fix: run: ip link set dev tv0 mtu 3822"));
    }

    #[test]
    fn failed_change_rolls_back_earlier_ones() {
        let log = Arc::new(Mutex::new(vec![]));
        let fake = Fake {
            log: log.clone(),
            stuck: vec!["rx-gro".into()],
            ..Default::default()
        };
        let (r, _) = run(&veth(), &skb(), fake);
        let e = r.unwrap_err();
        let TuneError::Step {
            step,
            error,
            report,
            ..
        } = &e
        else {
            panic!("{e}")
        };
        assert_eq!(step, "veth: rx-gro");
        assert!(error.contains("rx-gro stays on"), "{error}");
        let lines: Vec<String> = report.iter().map(|s| s.to_string()).collect();
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("rollback: veth: rx channels 1 -> 2")),
            "{lines:#?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("rollback: veth: peer tv1 segmentation")),
            "{lines:#?}"
        );
    }

    #[test]
    fn channel_failure_names_the_ethtool_fix() {
        let mut s = DeviceSnapshot::example("virtio_net");
        s.channels = Some(Channels {
            max_combined: 4,
            combined: 4,
            ..Default::default()
        });
        s.rx_queues = 4;
        let (r, _) = run(
            &s,
            &skb(),
            Fake {
                fail_channels: true,
                ..Default::default()
            },
        );
        let e = r.unwrap_err();
        assert_eq!(e.fix(), "run: ethtool -L eth0 combined 1");
        assert!(
            e.to_string()
                .starts_with("virtio_net: combined channels: ETHTOOL_SCHANNELS: Invalid argument"),
            "{e}"
        );
    }

    #[test]
    fn drop_restores() {
        let log = Arc::new(Mutex::new(vec![]));
        let (r, _) = run(
            &veth(),
            &skb(),
            Fake {
                log: log.clone(),
                ..Default::default()
            },
        );
        drop(r.unwrap());
        assert_eq!(log.lock().unwrap().len(), 6, "3 changes, 3 restores");
    }

    #[test]
    fn queue_layout_parses() {
        assert_eq!("single".parse::<QueueLayout>(), Ok(QueueLayout::Single));
        assert_eq!("all".parse::<QueueLayout>(), Ok(QueueLayout::All));
        assert!("some".parse::<QueueLayout>().is_err());
    }

    #[allow(dead_code)]
    fn _plan_types_are_public(c: Change) -> Op {
        c.op
    }
}
