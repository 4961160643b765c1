//! An interface prepared for AF_XDP ports: the crash-safe ownership record
//! ([`crate::state`]), the device tuning ([`crate::tune`]) and the steering
//! program ([`crate::steer`]). [`Iface`] does everything that happens once per
//! interface and hands out [`Port`]s, the data plane; what it changed is put
//! back when the last of them is dropped.
//!
//! Order matters (see [`crate::tune`]): record, tune, bind the sockets, attach
//! the program; on the way back detach, restore, remove the record.

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::port::{Features, Port, PortError, PortParts};
use crate::socket::{Rings, XskSocket};
use crate::state::{Owner, StateError};
use crate::steer::Steer;
use crate::sys;
use crate::tune::{self, QueueLayout, TuneOptions, Tuning};
use crate::umem::{FrameTable, Umem};
use crate::config::{Knob, PortConfig};
use crate::AttachMode;

fn once(flag: &AtomicBool) -> bool {
    !flag.swap(true, Ordering::Relaxed)
}
static SAID_NO_BUDGET: AtomicBool = AtomicBool::new(false);
static SAID_NO_BATCH: AtomicBool = AtomicBool::new(false);
static SAID_NO_SHED: AtomicBool = AtomicBool::new(false);
static SAID_NO_TX_MD: AtomicBool = AtomicBool::new(false);

/// One interface, prepared: owned (a second owner is refused), tuned, and
/// with the steering program once ports are open. Shared by its ports.
pub struct Iface {
    ifname: String,
    ifindex: u32,
    attach: AttachMode,
    owner: Mutex<Option<Owner>>,
    tuning: Mutex<Option<Tuning>>,
    steer: OnceLock<Steer>,
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
    /// [`PortError::NoInterface`]; [`PortError::State`] if another live
    /// process owns the interface or the record under `/run/xsk-io` cannot
    /// be written; [`PortError::Tune`] if a check or change fails (what was
    /// changed is rolled back first).
    pub fn prepare(cfg: &PortConfig, queues: QueueLayout) -> Result<Arc<Iface>, PortError> {
        let ifindex = sys::if_nametoindex(&cfg.ifname).map_err(|_| PortError::NoInterface(cfg.ifname.clone()))?;
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

    /// Opens a port on each of `queues` (one socket and UMEM each), then
    /// attaches the steering program for `cfg.steer` (if any, and not yet
    /// attached) and registers the ports with it. Uses the socket and UMEM
    /// settings of `cfg` (`queue` is ignored: `queues` says which).
    ///
    /// # Errors
    /// [`PortError::Umem`], [`PortError::Socket`], [`PortError::Knob`],
    /// [`PortError::ZeroCopy`] for a queue; [`PortError::Steer`] for the
    /// program. Ports opened before the error are closed again.
    pub fn open_ports(self: &Arc<Self>, cfg: &PortConfig, queues: &[u32]) -> Result<Vec<Port>, PortError> {
        let mut ports = queues
            .iter()
            .map(|&q| open_queue(cfg, self.ifindex, q, self.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        if let Some(spec) = &cfg.steer {
            let steer = match self.steer.get() {
                Some(s) => s,
                None => {
                    let steer = Steer::attach(&cfg.ifname, self.attach)?;
                    steer.set_addr(spec.addr, spec.flags)?;
                    for &p in &spec.tcp_ports {
                        steer.add_tcp_port(p)?;
                    }
                    // Only this function sets it, and it runs before any port is handed out.
                    let _ = self.steer.set(steer);
                    self.steer.get().expect("just set")
                }
            };
            for port in ports.iter_mut() {
                steer.register_xsk(port.features().queue, port.as_fd())?;
                let keep = match cfg.syn_shed {
                    Knob::Off => None,
                    Knob::Auto => Some(crate::shed::default_keep(cfg.rings.rx)),
                    Knob::Value(k) => Some(k),
                };
                if let Some(keep) = keep {
                    match steer.shed_slot(port.features().queue, keep)? {
                        Some(slot) => port.set_shed(slot),
                        None => {
                            if once(&SAID_NO_SHED) {
                                tracing::warn!("SYN shedding unavailable: the kernel did not load the program variant that has it");
                            }
                        }
                    }
                }
            }
            let mode = steer.mode();
            for port in ports.iter_mut() {
                port.set_attach(mode);
            }
        }
        Ok(ports)
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

fn open_queue(cfg: &PortConfig, index: u32, queue: u32, iface: Arc<Iface>) -> Result<Port, PortError> {
    let umem = Umem::new(cfg.umem).map_err(PortError::Umem)?;
    let sock = XskSocket::new()?;
    let (Rings { fill, comp, rx, tx }, tx_csum) = sock.setup_with(&umem, cfg.rings, cfg.tx_csum)?;
    if cfg.tx_csum && !tx_csum && once(&SAID_NO_TX_MD) {
        tracing::warn!("kernel has no AF_XDP TX metadata (XDP_UMEM_TX_METADATA_LEN, Linux 6.8+): TCP checksums are filled in user space");
    }
    let tx_budget = set_budget(&sock, cfg)?;
    let xmit_batch = set_xmit_batch(&sock, cfg, tx_budget)?;
    if let Some(bp) = cfg.busy_poll {
        let set = |what, opt, v: u32| {
            sock.set_sock_int(opt, v as i32).map_err(|source| PortError::Knob { knob: what, value: v, source, hint: "" })
        };
        set("SO_PREFER_BUSY_POLL", sys::SO_PREFER_BUSY_POLL, 1)?;
        set("SO_BUSY_POLL", sys::SO_BUSY_POLL, bp.usecs)?;
        set("SO_BUSY_POLL_BUDGET", sys::SO_BUSY_POLL_BUDGET, bp.budget)?;
    }
    sock.bind(&cfg.ifname, index, queue)?;
    let zerocopy = sock.is_zerocopy().unwrap_or(false);
    if zerocopy {
        return Err(PortError::ZeroCopy(cfg.ifname.clone()));
    }
    let features = Features {
        ifname: cfg.ifname.clone(),
        queue,
        driver: tune::driver_name(&cfg.ifname).unwrap_or_else(|_| "unknown".into()),
        attach: None,
        zerocopy,
        need_wakeup: true,
        tx_budget,
        xmit_batch,
        busy_poll: cfg.busy_poll,
        tx_csum,
        rings: cfg.rings,
        frame_size: cfg.umem.frame_size,
        frame_count: cfg.umem.frame_count,
    };
    let frames = FrameTable::new(umem.frame_count(), umem.frame_size());
    // Keep enough frames for a full TX ring off the fill ring (frames in
    // flight for TX count towards it), but never more than half the UMEM,
    // so both directions always have frames.
    let tx_reserve = crate::socket::tx_reserve(&cfg.rings, umem.frame_count());
    let need = cfg.rings.frames_needed(0);
    if umem.frame_count() < need {
        tracing::warn!(
            "{}:{queue}: {} UMEM frames are fewer than the rings need for a burst (fill {} + rx {} + tx {} = {need}): \
             the fill ring can run short while the RX ring is full",
            cfg.ifname,
            umem.frame_count(),
            cfg.rings.fill,
            cfg.rings.rx,
            cfg.rings.tx
        );
    }
    let tx_md = if tx_csum { sys::TX_METADATA_LEN } else { 0 };
    Ok(Port::new(PortParts { sock, umem, rings: Rings { fill, comp, rx, tx }, frames, tx_reserve, tx_md, features, iface }))
}

/// XDP_MAX_TX_SKB_BUDGET: how many descriptors one sendto may turn into skbs.
fn set_budget(sock: &XskSocket, cfg: &PortConfig) -> Result<Option<u32>, PortError> {
    let want = match cfg.tx_budget {
        Knob::Off => return Ok(None),
        // The kernel accepts [32, tx ring size]; a ring below 32 keeps the default.
        Knob::Auto if cfg.rings.tx < 32 => return Ok(None),
        Knob::Auto => cfg.rings.tx,
        Knob::Value(v) => v,
    };
    match sock.set_xdp_u32(sys::XDP_MAX_TX_SKB_BUDGET, want) {
        Ok(()) => Ok(Some(want)),
        Err(e) if e.raw_os_error() == Some(libc::ENOPROTOOPT) => {
            if once(&SAID_NO_BUDGET) {
                tracing::warn!("kernel has no XDP_MAX_TX_SKB_BUDGET (Linux 6.17+): one sendto sends at most 32 frames");
            }
            Ok(None)
        }
        Err(source) => Err(PortError::Knob {
            knob: "XDP_MAX_TX_SKB_BUDGET",
            value: want,
            source,
            hint: " (allowed: 32 to the TX ring size)",
        }),
    }
}

/// XDP_GENERIC_XMIT_BATCH: skbs built and sent under one queue lock.
fn set_xmit_batch(sock: &XskSocket, cfg: &PortConfig, budget: Option<u32>) -> Result<Option<u32>, PortError> {
    let want = match cfg.xmit_batch {
        Knob::Off => return Ok(None),
        Knob::Auto => 32.min(budget.unwrap_or(32)),
        Knob::Value(v) => v,
    };
    match sock.set_xdp_u32(sys::XDP_GENERIC_XMIT_BATCH, want) {
        // What the kernel says is in force, not what we asked for.
        Ok(()) => match sock.get_xdp_u32(sys::XDP_GENERIC_XMIT_BATCH) {
            Ok(got) if got == want => Ok(Some(got)),
            Ok(got) => Err(PortError::Knob {
                knob: "XDP_GENERIC_XMIT_BATCH",
                value: want,
                source: std::io::Error::other(format!("getsockopt reads back {got}")),
                hint: "",
            }),
            Err(source) => Err(PortError::Knob { knob: "XDP_GENERIC_XMIT_BATCH (getsockopt)", value: want, source, hint: "" }),
        },
        Err(e) if e.raw_os_error() == Some(libc::ENOPROTOOPT) => {
            if once(&SAID_NO_BATCH) {
                tracing::warn!(
                    "kernel has no XDP_GENERIC_XMIT_BATCH (option 10, proposed upstream): copy-mode TX takes the queue lock per frame"
                );
            }
            Ok(None)
        }
        Err(source) => Err(PortError::Knob {
            knob: "XDP_GENERIC_XMIT_BATCH",
            value: want,
            source,
            hint: " (must not exceed XDP_MAX_TX_SKB_BUDGET)",
        }),
    }
}

