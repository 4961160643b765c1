//! Making the ring: the setup flags this kernel takes, its buffer ring, the optional NAPI
//! busy polling, and what was granted, for the report.

use std::fmt;
use std::io;

use io_uring::IoUring;

use super::bufring::BufRing;
use super::{UringConfig, BUF_GROUP};
use crate::transport::TransportError;

/// What this kernel granted the ring ([`super::UringTransport::features`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct UringFeatures {
    /// IORING_SETUP_SINGLE_ISSUER (Linux 6.0): one thread submits, the kernel skips locking.
    pub single_issuer: bool,
    /// IORING_SETUP_DEFER_TASKRUN (6.1): completion work runs when the loop waits, not by
    /// interrupting it.
    pub defer_taskrun: bool,
    /// IORING_SETUP_COOP_TASKRUN (5.19), the fallback: no interrupting IPI either.
    pub coop_taskrun: bool,
    /// The ring's fd is registered with the polling thread (5.18): `io_uring_enter` skips the
    /// fd lookup. Known after the first poll.
    pub registered_ring: bool,
    /// NAPI busy polling registered with the ring (6.9), in microseconds.
    pub napi_busy_poll_us: Option<u32>,
    /// What was asked for and not granted, each with the reason.
    pub missing: Vec<String>,
}

impl fmt::Display for UringFeatures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.single_issuer {
            parts.push("single issuer".to_string());
        }
        if self.defer_taskrun {
            parts.push("deferred task running".to_string());
        } else if self.coop_taskrun {
            parts.push("cooperative task running".to_string());
        }
        if self.registered_ring {
            parts.push("registered ring fd".to_string());
        }
        if let Some(us) = self.napi_busy_poll_us {
            parts.push(format!("NAPI busy poll {us} us"));
        }
        write!(f, "io_uring: {}", if parts.is_empty() { "plain".to_string() } else { parts.join(", ") })?;
        for m in &self.missing {
            write!(f, "; {m}")?;
        }
        Ok(())
    }
}

fn err(what: String) -> TransportError {
    TransportError::Backend { backend: "uring", source: what.into() }
}

/// The running kernel's (major, minor), from /proc/sys/kernel/osrelease.
fn kernel_version() -> Option<(u32, u32)> {
    let rel = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let mut it = rel.trim().split(|c: char| !c.is_ascii_digit());
    Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
}

/// The oldest kernel with everything the backend needs: multishot accept and receive
/// into a provided-buffer ring (6.0), cancellation by descriptor and waits with a
/// timeout argument (older).
const MIN_KERNEL: (u32, u32) = (6, 0);

pub(super) fn build(cfg: &UringConfig) -> Result<(IoUring, BufRing, UringFeatures), TransportError> {
    if let Some(v) = kernel_version() {
        if v < MIN_KERNEL {
            return Err(err(format!(
                "needs Linux {}.{} or later (multishot accept and receive into a provided-buffer ring); this kernel is {}.{}: use --backend kernel",
                MIN_KERNEL.0, MIN_KERNEL.1, v.0, v.1
            )));
        }
    }
    let mut feats = UringFeatures::default();
    // The completion queue holds several completions per submission (a multishot receive
    // posts one per arrival); the kernel keeps overflow (IORING_FEAT_NODROP), but that is slow.
    let cq = cfg.entries.saturating_mul(4);
    // Disabled until the polling thread's first poll enables it (`UringTransport::start`):
    // a single-issuer ring belongs to the thread that enables it, and a transport is often
    // made on one thread and run on another.
    let attempt = |defer: bool| {
        let mut b = IoUring::builder();
        b.setup_cqsize(cq).setup_submit_all().setup_coop_taskrun().setup_taskrun_flag().setup_r_disabled();
        if defer {
            b.setup_single_issuer().setup_defer_taskrun();
        }
        b.build(cfg.entries)
    };
    let ring = match if cfg.defer_taskrun { attempt(true) } else { Err(io::Error::from_raw_os_error(libc::EINVAL)) } {
        Ok(r) => {
            feats.single_issuer = true;
            feats.defer_taskrun = true;
            feats.coop_taskrun = true;
            r
        }
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            if cfg.defer_taskrun {
                feats.missing.push("no single issuer or deferred task running (Linux 6.1)".into());
            }
            feats.coop_taskrun = true;
            attempt(false).map_err(setup_error)?
        }
        Err(e) => return Err(setup_error(e)),
    };
    let bufs = BufRing::new(cfg.recv_buffers, cfg.recv_buffer_size)?;
    // SAFETY: the ring's mapping lives in `bufs`, which the transport unmaps only after a
    // successful cancel of every request in its drop (and leaks otherwise): no armed receive
    // is left to take a buffer from it.
    unsafe { ring.submitter().register_buf_ring_with_flags(bufs.ring_addr(), bufs.entries(), BUF_GROUP, 0) }
        .map_err(|e| err(format!("registering the receive buffer ring failed ({e}): needs Linux 5.19")))?;
    bufs.publish();
    if let Some(bp) = cfg.busy_poll {
        let mut napi = io_uring::types::Napi::new().set_busy_poll_timeout(bp.usecs).set_prefer_busy_poll(bp.prefer);
        match ring.submitter().register_napi(&mut napi) {
            Ok(()) => feats.napi_busy_poll_us = Some(bp.usecs),
            Err(e) => {
                let m = format!("NAPI busy polling not registered ({e}): needs Linux 6.9");
                tracing::warn!("uring backend: {m}");
                feats.missing.push(m);
            }
        }
    }
    Ok((ring, bufs, feats))
}

fn setup_error(e: io::Error) -> TransportError {
    match e.raw_os_error() {
        Some(libc::EPERM) => err(format!(
            "io_uring_setup was refused ({e}): io_uring is disabled for this process (sysctl kernel.io_uring_disabled, or a seccomp filter): use --backend kernel"
        )),
        Some(libc::ENOSYS) => err(format!("this kernel has no io_uring ({e}): use --backend kernel")),
        Some(libc::ENOMEM) => err(format!(
            "io_uring_setup failed ({e}): the ring needs locked memory; raise RLIMIT_MEMLOCK or give CAP_IPC_LOCK, or use fewer entries"
        )),
        _ => err(format!("io_uring_setup failed: {e}")),
    }
}
