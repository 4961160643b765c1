//! Opening ports on a prepared interface: a port per queue
//! ([`Port::bind`]), then the interface's steering program with the ports
//! registered in it, SYN shedding where asked for, and what the device knows
//! of the port (driver, attach mode) written into its features.

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use xsk_io::port::{Port, Setting, ShedCounters};

use crate::config::PortConfig;
use crate::error::DeviceError;
use crate::iface::Iface;
use crate::steer::Steer;
use crate::tune::{self, QueueLayout};

static SAID_NO_SHED: AtomicBool = AtomicBool::new(false);

impl Iface {
    /// Prepares `cfg.ifname` ([`Iface::prepare`], single-queue layout) and
    /// opens one queue (`cfg.queue`), attaching the steering program if
    /// `cfg.steer` is set. The port keeps the interface prepared; the
    /// returned handle reaches the program (to add ports, read counters).
    ///
    /// # Errors
    /// Any [`DeviceError`] of preparing the interface or opening the queue;
    /// what was changed by then is put back.
    pub fn open(cfg: &PortConfig) -> Result<(Arc<Iface>, Port), DeviceError> {
        preflight(cfg, 1)?;
        let iface = Iface::prepare(cfg, QueueLayout::Single)?;
        let mut v = iface.open_ports(cfg, &[cfg.queue])?;
        Ok((iface, v.pop().expect("one queue asked, one port")))
    }

    /// Opens every RX queue of the interface, one socket and one UMEM each,
    /// sharing one steering program, so that one stack shard can run per queue.
    /// The ports are in queue order; `cfg.queue` is ignored.
    ///
    /// # Errors
    /// As [`open`](Self::open).
    pub fn open_all(cfg: &PortConfig) -> Result<(Arc<Iface>, Vec<Port>), DeviceError> {
        let n = tune::rx_queue_count(&cfg.ifname).unwrap_or(1);
        preflight(cfg, n)?;
        let iface = Iface::prepare(cfg, QueueLayout::All)?;
        let n = tune::rx_queue_count(&cfg.ifname)?;
        let ports = iface.open_ports(cfg, &(0..n).collect::<Vec<_>>())?;
        Ok((iface, ports))
    }

    /// Opens a port on each of `queues` (one socket and UMEM each), then
    /// attaches the steering program for `cfg.steer` (if any, and not yet
    /// attached) and registers the ports with it. Uses the socket and UMEM
    /// settings of `cfg` (`queue` is ignored: `queues` says which). Each port
    /// keeps this interface prepared until it is dropped.
    ///
    /// # Errors
    /// [`DeviceError::Port`] for a queue; [`DeviceError::Steer`] for the
    /// program. Ports opened before the error are closed again.
    pub fn open_ports(self: &Arc<Self>, cfg: &PortConfig, queues: &[u32]) -> Result<Vec<Port>, DeviceError> {
        let qcfg = cfg.queue_config();
        let driver = tune::driver_name(&cfg.ifname).unwrap_or_else(|_| "unknown".into());
        let mut ports = Vec::with_capacity(queues.len());
        for &q in queues {
            let mut port = Port::bind(&cfg.ifname, q, &qcfg)?;
            port.set_device(driver.clone(), None);
            port.keep_alive(self.clone());
            ports.push(port);
        }
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
                let queue = port.features().queue;
                steer.register_xsk(queue, port.as_fd())?;
                let keep = match cfg.syn_shed {
                    Setting::Off => None,
                    Setting::Auto => Some(xsk_io::shed::default_keep(cfg.rings.rx)),
                    Setting::Value(k) => Some(k),
                };
                if let Some(keep) = keep {
                    match steer.shed_slot(queue, keep)? {
                        Some(slot) => port.set_shed(slot, shed_counters(self.clone())),
                        None => {
                            if !SAID_NO_SHED.swap(true, Ordering::Relaxed) {
                                tracing::warn!("SYN shedding unavailable: the kernel did not load the program variant that has it");
                            }
                        }
                    }
                }
                port.set_device(driver.clone(), Some(steer.mode()));
            }
        }
        Ok(ports)
    }
}

/// Reads the program's shed counters (per interface: with several ports on
/// one interface each reports the interface's total).
fn shed_counters(iface: Arc<Iface>) -> xsk_io::port::ShedCounterSource {
    Box::new(move || {
        iface
            .steer()
            .and_then(|s| s.counters().ok())
            .map(|c| ShedCounters::new(c.shed_rx, c.shed_fill, c.shed_standing))
            .unwrap_or_default()
    })
}

/// Before anything changes: every capability and limit `ports` ports need, named with its
/// fix when missing (`DeviceError::Privileges`), rather than a bare EPERM from whichever step
/// comes first.
fn preflight(cfg: &PortConfig, ports: u32) -> Result<(), DeviceError> {
    let pinned = u64::from(cfg.umem.frame_count) * u64::from(cfg.umem.frame_size) * u64::from(ports.max(1));
    let missing = crate::privileges::missing(pinned);
    if missing.is_empty() {
        Ok(())
    } else {
        Err(DeviceError::Privileges { ifname: cfg.ifname.clone(), missing })
    }
}
