//! Opening ports on a prepared interface: per queue a UMEM and a socket,
//! the kernel's TX options, the bind; then the interface's steering program,
//! with the ports registered in it.

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::config::{Knob, PortConfig};
use crate::iface::Iface;
use crate::socket::{Rings, XskSocket};
use crate::steer::Steer;
use crate::sys;
use crate::tune::{self, QueueLayout};
use crate::umem::{FrameTable, Umem};

use super::error::PortError;
use super::features::Features;
use super::{Port, PortParts};

fn once(flag: &AtomicBool) -> bool {
    !flag.swap(true, Ordering::Relaxed)
}
static SAID_NO_BUDGET: AtomicBool = AtomicBool::new(false);
static SAID_NO_BATCH: AtomicBool = AtomicBool::new(false);
static SAID_NO_SHED: AtomicBool = AtomicBool::new(false);
static SAID_NO_TX_MD: AtomicBool = AtomicBool::new(false);

impl Port {
    /// Prepares `cfg.ifname` ([`Iface::prepare`], single-queue layout) and
    /// opens one queue (`cfg.queue`), attaching the steering program if
    /// `cfg.steer` is set.
    ///
    /// # Errors
    /// Any [`PortError`] of preparing the interface or opening the queue;
    /// what was changed by then is put back.
    pub fn open(cfg: &PortConfig) -> Result<Port, PortError> {
        preflight(cfg, 1)?;
        let iface = Iface::prepare(cfg, QueueLayout::Single)?;
        let mut v = iface.open_ports(cfg, &[cfg.queue])?;
        Ok(v.pop().expect("one queue asked, one port"))
    }

    /// Opens every RX queue of the interface, one socket and one UMEM each,
    /// sharing one steering program, so that one stack shard can run per queue.
    /// The ports are in queue order; `cfg.queue` is ignored.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub fn open_all(cfg: &PortConfig) -> Result<Vec<Port>, PortError> {
        let n = tune::rx_queue_count(&cfg.ifname).unwrap_or(1);
        preflight(cfg, n)?;
        let iface = Iface::prepare(cfg, QueueLayout::All)?;
        let n = tune::rx_queue_count(&cfg.ifname)?;
        iface.open_ports(cfg, &(0..n).collect::<Vec<_>>())
    }
}

impl Iface {
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
                    if spec.addr6.is_some() {
                        steer.set_addr6(spec.addr6)?;
                    }
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

/// Before anything changes: every capability and limit `ports` ports need, named with its
/// fix when missing (`PortError::Privileges`), rather than a bare EPERM from whichever step
/// comes first.
fn preflight(cfg: &PortConfig, ports: u32) -> Result<(), PortError> {
    let pinned = u64::from(cfg.umem.frame_count) * u64::from(cfg.umem.frame_size) * u64::from(ports.max(1));
    let missing = crate::privileges::missing(pinned);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(PortError::Privileges { ifname: cfg.ifname.clone(), missing })
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
    if let Some(bp) = cfg.busy_poll.filter(|b| b.usecs > 0) {
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
