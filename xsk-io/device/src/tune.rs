//! Device tuning for the drivers we target (virtio_net, veth), done with
//! ethtool ioctls and sysfs, each step reported.
//!
//! [`prepare`] reads a [`snapshot::DeviceSnapshot`] of the interface, decides
//! with a pure planner (crate-internal, unit-tested) what has to be checked and changed for a
//! copy-mode AF_XDP socket in the chosen [`AttachMode`](crate::AttachMode) and [`QueueLayout`],
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
//! `apply` (applying, and [`Tuning`], the undo log); this file has the entry
//! points.
//!
//! Most users never call this module: [`crate::iface::Iface::prepare`] runs
//! it with a crash-safe record of the originals. [`prepare`] on its own (as
//! the `tune_probe` example does) restores on drop but leaves no record.
//!
//! sysfs shows the network namespace it was mounted in: run in the device's
//! namespace with `ip netns exec` (which remounts `/sys`), not bare `setns`.

use crate::ethtool;
use crate::state::{DeviceState, Owner};

mod apply;
mod error;
mod options;
pub(crate) mod plan;
pub mod snapshot;

pub use apply::Tuning;
pub use error::TuneError;
pub use crate::ethtool::{Channels, FeatureState};
pub use options::{QueueLayout, TuneOptions};
pub use crate::step::{Outcome, Step};
use apply::{execute, EthtoolOps};
use plan::{Item, Op, Plan};
use snapshot::DeviceSnapshot;

/// `ETHTOOL_GDRVINFO`: the driver behind `ifname` (`virtio_net`, `veth`, ...).
pub fn driver_name(ifname: &str) -> Result<String, TuneError> {
    ethtool::driver(ifname).map_err(|e| TuneError::io("ETHTOOL_GDRVINFO", ifname, e))
}

/// The device's XDP_TX error counters (those `ethtool -S` names ending in
/// `xdp_tx_errors` or `xdp_tx_drops`: veth, virtio_net), which tell whether
/// SYN-ACKs answered in XDP really leave ([`xsk_io::syncookies`]).
#[derive(Debug)]
pub struct TxErrors {
    ifname: String,
    idx: Vec<usize>,
}

impl TxErrors {
    /// The counters of `ifname`; `None` if it has none.
    pub fn new(ifname: &str) -> std::io::Result<Option<TxErrors>> {
        let names = ethtool::stat_names(ifname)?;
        let idx: Vec<usize> = names
            .iter()
            .enumerate()
            .filter(|(_, n)| n.ends_with("xdp_tx_errors") || n.ends_with("xdp_tx_drops"))
            .map(|(i, _)| i)
            .collect();
        Ok((!idx.is_empty()).then(|| TxErrors { ifname: ifname.to_owned(), idx }))
    }
}

impl xsk_io::syncookies::TxErrorCount for TxErrors {
    fn read(&self) -> std::io::Result<u64> {
        let v = ethtool::stat_values(&self.ifname)?;
        Ok(self.idx.iter().filter_map(|&i| v.get(i)).sum())
    }

    fn device(&self) -> &str {
        &self.ifname
    }
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
                fix: format!("make {} writable, or choose another state directory (--state-dir, {})", crate::state::state_dir().display(), crate::state::STATE_DIR_ENV),
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

#[cfg(test)]
mod tests;
