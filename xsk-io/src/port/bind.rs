//! Binding one queue: a UMEM and a socket, the kernel's TX options, the bind
//! in copy mode. What the device needs around it (an XDP program that
//! redirects into the socket, tuning) is the caller's: the `xsk-device`
//! crate, or an embedder's own setup.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::socket::{Rings, XskSocket};
use crate::sys;
use crate::umem::{FrameTable, Umem};

use super::config::{QueueConfig, Setting};
use super::error::PortError;
use super::features::Features;
use super::{Port, PortParts};

fn once(flag: &AtomicBool) -> bool {
    !flag.swap(true, Ordering::Relaxed)
}
static SAID_NO_BUDGET: AtomicBool = AtomicBool::new(false);
static SAID_NO_BATCH: AtomicBool = AtomicBool::new(false);
static SAID_NO_TX_MD: AtomicBool = AtomicBool::new(false);

impl Port {
    /// Binds queue `queue` of `ifname` (in the calling thread's network
    /// namespace) as a copy-mode AF_XDP port set up by `cfg`.
    ///
    /// Only the socket: frames reach it once an XDP program on the interface
    /// redirects them into an `XSKMAP` slot holding this port's descriptor
    /// ([`AsFd`](std::os::fd::AsFd)); sending needs no program.
    ///
    /// # Errors
    /// [`PortError::NoInterface`], [`PortError::Umem`], [`PortError::Socket`],
    /// [`PortError::Option`], [`PortError::ZeroCopy`].
    pub fn bind(ifname: &str, queue: u32, cfg: &QueueConfig) -> Result<Port, PortError> {
        let index = sys::if_nametoindex(ifname).map_err(|_| PortError::NoInterface(ifname.to_string()))?;
        open_queue(ifname, cfg, index, queue)
    }
}

fn open_queue(ifname: &str, cfg: &QueueConfig, index: u32, queue: u32) -> Result<Port, PortError> {
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
            sock.set_sock_int(opt, v as i32).map_err(|source| PortError::Option { option: what, value: v, source, hint: "" })
        };
        set("SO_PREFER_BUSY_POLL", sys::SO_PREFER_BUSY_POLL, 1)?;
        set("SO_BUSY_POLL", sys::SO_BUSY_POLL, bp.usecs)?;
        set("SO_BUSY_POLL_BUDGET", sys::SO_BUSY_POLL_BUDGET, bp.budget)?;
    }
    sock.bind(ifname, index, queue)?;
    let zerocopy = sock.is_zerocopy().unwrap_or(false);
    if zerocopy {
        return Err(PortError::ZeroCopy(ifname.to_string()));
    }
    let features = Features {
        ifname: ifname.to_string(),
        queue,
        driver: String::new(),
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
            ifname,
            umem.frame_count(),
            cfg.rings.fill,
            cfg.rings.rx,
            cfg.rings.tx
        );
    }
    let tx_md = if tx_csum { sys::TX_METADATA_LEN } else { 0 };
    Ok(Port::new(PortParts { sock, umem, rings: Rings { fill, comp, rx, tx }, frames, tx_reserve, tx_md, features }))
}

/// XDP_MAX_TX_SKB_BUDGET: how many descriptors one sendto may turn into skbs.
fn set_budget(sock: &XskSocket, cfg: &QueueConfig) -> Result<Option<u32>, PortError> {
    let want = match cfg.tx_budget {
        Setting::Off => return Ok(None),
        // The kernel accepts [32, tx ring size]; a ring below 32 keeps the default.
        Setting::Auto if cfg.rings.tx < 32 => return Ok(None),
        Setting::Auto => cfg.rings.tx,
        Setting::Value(v) => v,
    };
    match sock.set_xdp_u32(sys::XDP_MAX_TX_SKB_BUDGET, want) {
        Ok(()) => Ok(Some(want)),
        Err(e) if e.raw_os_error() == Some(libc::ENOPROTOOPT) => {
            if once(&SAID_NO_BUDGET) {
                tracing::warn!("kernel has no XDP_MAX_TX_SKB_BUDGET (Linux 6.17+): one sendto sends at most 32 frames");
            }
            Ok(None)
        }
        Err(source) => Err(PortError::Option {
            option: "XDP_MAX_TX_SKB_BUDGET",
            value: want,
            source,
            hint: " (allowed: 32 to the TX ring size)",
        }),
    }
}

/// XDP_GENERIC_XMIT_BATCH: skbs built and sent under one queue lock.
fn set_xmit_batch(sock: &XskSocket, cfg: &QueueConfig, budget: Option<u32>) -> Result<Option<u32>, PortError> {
    let want = match cfg.xmit_batch {
        Setting::Off => return Ok(None),
        Setting::Auto => 32.min(budget.unwrap_or(32)),
        Setting::Value(v) => v,
    };
    match sock.set_xdp_u32(sys::XDP_GENERIC_XMIT_BATCH, want) {
        // What the kernel says is in force, not what we asked for.
        Ok(()) => match sock.get_xdp_u32(sys::XDP_GENERIC_XMIT_BATCH) {
            Ok(got) if got == want => Ok(Some(got)),
            Ok(got) => Err(PortError::Option {
                option: "XDP_GENERIC_XMIT_BATCH",
                value: want,
                source: std::io::Error::other(format!("getsockopt reads back {got}")),
                hint: "",
            }),
            Err(source) => Err(PortError::Option { option: "XDP_GENERIC_XMIT_BATCH (getsockopt)", value: want, source, hint: "" }),
        },
        Err(e) if e.raw_os_error() == Some(libc::ENOPROTOOPT) => {
            if once(&SAID_NO_BATCH) {
                tracing::warn!(
                    "kernel has no XDP_GENERIC_XMIT_BATCH (option 10, proposed upstream): copy-mode TX takes the queue lock per frame"
                );
            }
            Ok(None)
        }
        Err(source) => Err(PortError::Option {
            option: "XDP_GENERIC_XMIT_BATCH",
            value: want,
            source,
            hint: " (must not exceed XDP_MAX_TX_SKB_BUDGET)",
        }),
    }
}
