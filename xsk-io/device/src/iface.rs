//! An interface prepared for AF_XDP ports: the crash-safe ownership record
//! ([`crate::state`]), the device tuning ([`crate::tune`]) and the steering
//! program ([`crate::steer`]). [`Iface`] does everything that happens once per
//! interface and hands out [`Port`](xsk_io::port::Port)s, the data plane; what it changed is put
//! back when the last of them (and the last clone of the `Arc<Iface>`) is
//! dropped. The handing out ([`Iface::open_ports`]) is in `open.rs`, with the
//! rest of opening a port.
//!
//! Order matters (see [`crate::tune`]): record, tune, bind the sockets, attach
//! the program; on the way back detach, restore, remove the record.

use std::sync::{Arc, Mutex, OnceLock};

use crate::config::PortConfig;
use crate::error::DeviceError;
use crate::state::{Owner, StateError};
use crate::steer::Steer;
use xsk_io::sys;
use crate::tune::{self, QueueLayout, TuneOptions, Tuning};
use crate::AttachMode;

/// One interface, prepared: owned (a second owner is refused), tuned, and
/// with the steering program once ports are open. Shared by its ports.
pub struct Iface {
    ifname: String,
    // pub(crate): port/open.rs binds the sockets and attaches the program.
    pub(crate) ifindex: u32,
    pub(crate) attach: AttachMode,
    owner: Mutex<Option<Owner>>,
    tuning: Mutex<Option<Tuning>>,
    pub(crate) steer: OnceLock<Steer>,
}

impl std::fmt::Debug for Iface {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Iface").field("ifname", &self.ifname).field("ifindex", &self.ifindex).finish_non_exhaustive()
    }
}

impl Iface {
    /// Takes `cfg.ifname` (refusing if another xsk-io process owns it, and
    /// first restoring what a crashed owner left changed), records its state,
    /// then tunes it for `queues` (or only checks, with `cfg.tune == false`).
    /// Uses `ifname`, `attach`, `umem.frame_size` and `tune` of `cfg`.
    ///
    /// Everything it changes is put back when the returned `Iface` (and so
    /// every port it handed out) is dropped, and after a crash by the next
    /// start on the interface or `xsk-bench restore IF`.
    ///
    /// # Errors
    /// [`DeviceError::NoInterface`]; [`DeviceError::State`] if another live
    /// process owns the interface or the record under `/run/xsk-io` cannot
    /// be written; [`DeviceError::Tune`] if a check or change fails (what was
    /// changed is rolled back first).
    pub fn prepare(cfg: &PortConfig, queues: QueueLayout) -> Result<Arc<Iface>, DeviceError> {
        let ifindex = sys::if_nametoindex(&cfg.ifname).map_err(|_| DeviceError::NoInterface(cfg.ifname.clone()))?;
        let (mut owner, recovered) = Owner::acquire(&cfg.ifname)?;
        if let Some(pid) = recovered.pid {
            tracing::warn!(
                "{}: pid {pid} did not exit cleanly; restoring the state it recorded ({} change(s))",
                cfg.ifname,
                recovered.steps.len()
            );
            for s in &recovered.steps {
                tracing::info!("restore {}: {s}", cfg.ifname);
            }
        }
        let opts = TuneOptions { mode: cfg.attach, queues, frame_size: cfg.umem.frame_size, apply: cfg.tune };
        let tuning = match tune::prepare_recorded(&cfg.ifname, &opts, Some(&mut owner)) {
            Ok(t) => t,
            Err(e) => {
                // Tuning rolled back what it changed: the record goes too,
                // or the next start would report a crash that did not happen.
                owner.finish();
                return Err(e.into());
            }
        };
        for s in &tuning.steps {
            tracing::info!("tune {}: {s}", cfg.ifname);
        }
        Ok(Arc::new(Iface {
            ifname: cfg.ifname.clone(),
            ifindex,
            attach: tuning.mode,
            owner: Mutex::new(Some(owner)),
            tuning: Mutex::new(Some(tuning)),
            steer: OnceLock::new(),
        }))
    }

    /// The interface's name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The steering program, once [`open_ports`](Self::open_ports) attached it.
    pub fn steer(&self) -> Option<&Steer> {
        self.steer.get()
    }

    /// Where the program runs (tuning resolved `Auto`).
    pub fn attach_mode(&self) -> AttachMode {
        self.attach
    }

    /// Sets a sysctl (path below `/proc/sys`) for as long as this interface
    /// is prepared: the original is recorded first, so that it is put back
    /// on drop and also after a crash. Returns the original value.
    pub fn set_sysctl(&self, name: &str, value: &str) -> Result<String, StateError> {
        let mut g = self.owner.lock().unwrap_or_else(|e| e.into_inner());
        let owner = g.as_mut().expect("the owner lives as long as the Iface");
        owner.set_sysctl(name, value)
    }
}

impl Drop for Iface {
    fn drop(&mut self) {
        // Detach first: virtio_net refuses offload and channel changes while
        // an XDP program is attached.
        drop(self.steer.take());
        if let Some(mut t) = self.tuning.get_mut().unwrap_or_else(|e| e.into_inner()).take() {
            for s in t.restore() {
                tracing::info!("restore: {s}");
            }
            if t.pending_restore() > 0 {
                // Leave the record: the next start or `xsk-bench restore` retries.
                tracing::warn!("{}: not everything could be restored; run `xsk-bench restore {}`", self.ifname, self.ifname);
                return;
            }
        }
        if let Some(owner) = self.owner.get_mut().unwrap_or_else(|e| e.into_inner()).take() {
            for s in owner.finish() {
                tracing::info!("restore: {s}");
            }
        }
    }
}

