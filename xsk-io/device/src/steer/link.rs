//! Attaching through a bpf_link, and saying why an attach failed and what
//! is in the way.

use std::ffi::CString;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use libbpf_rs::libbpf_sys;
use libbpf_rs::query::{LinkInfoIter, LinkTypeInfo, ProgInfoIter};

use crate::AttachMode;

use super::error::SteerError;

pub(super) fn validate_ifname(ifname: &str) -> Result<CString, SteerError> {
    let bad = |reason| SteerError::InvalidInterfaceName {
        ifname: ifname.to_owned(),
        reason,
    };
    if ifname.is_empty() {
        return Err(bad("empty"));
    }
    if ifname.len() >= libc::IFNAMSIZ {
        return Err(bad("longer than 15 bytes"));
    }
    if ifname.contains('/') || ifname.chars().any(char::is_whitespace) {
        return Err(bad("contains '/' or whitespace"));
    }
    CString::new(ifname).map_err(|_| bad("contains a NUL byte"))
}

pub(super) fn ifindex_of(ifname: &str) -> Result<u32, SteerError> {
    validate_ifname(ifname)?;
    xsk_io::sys::if_nametoindex(ifname).map_err(|source| SteerError::NoSuchInterface { ifname: ifname.to_owned(), source })
}

fn mode_flags(mode: AttachMode) -> u32 {
    match mode {
        AttachMode::Skb => libbpf_sys::XDP_FLAGS_SKB_MODE,
        AttachMode::Drv => libbpf_sys::XDP_FLAGS_DRV_MODE,
        AttachMode::Auto => unreachable!("Auto is resolved before attaching"),
    }
}

/// `BPF_LINK_CREATE(prog, ifindex, BPF_XDP, flags = mode)`.
pub(super) fn attach_link(
    prog: BorrowedFd<'_>,
    ifname: &str,
    ifindex: u32,
    mode: AttachMode,
) -> Result<OwnedFd, SteerError> {
    let opts = libbpf_sys::bpf_link_create_opts {
        sz: size_of::<libbpf_sys::bpf_link_create_opts>() as libbpf_sys::size_t,
        flags: mode_flags(mode),
        ..Default::default()
    };
    // SAFETY: plain syscall wrapper; `opts` outlives the call. For BPF_XDP
    // the target "fd" is the ifindex.
    let ret = unsafe {
        libbpf_sys::bpf_link_create(prog.as_raw_fd(), ifindex as i32, libbpf_sys::BPF_XDP, &opts)
    };
    if ret >= 0 {
        // SAFETY: a fresh fd that nothing else owns.
        return Ok(unsafe { OwnedFd::from_raw_fd(ret) });
    }
    let errno = -ret;
    let source = io::Error::from_raw_os_error(errno);
    if errno == libc::EBUSY || errno == libc::EEXIST {
        if let Some((existing, remedy)) = describe_existing(ifname, ifindex) {
            return Err(SteerError::AlreadyAttached {
                ifname: ifname.to_owned(),
                ifindex,
                mode,
                existing,
                remedy,
                source,
            });
        }
    }
    Err(SteerError::Attach {
        ifname: ifname.to_owned(),
        ifindex,
        mode,
        hint: attach_hint(errno, mode),
        source,
    })
}

/// A likely cause for an attach errno. The kernel's own explanation (its
/// extack message) is not returned by BPF_LINK_CREATE; it only shows up in
/// the `xdp:bpf_xdp_link_attach_failed` tracepoint.
fn attach_hint(errno: i32, mode: AttachMode) -> String {
    let drv = mode == AttachMode::Drv;
    let hint = match errno {
        libc::EPERM | libc::EACCES => "needs CAP_NET_ADMIN and CAP_BPF (or root)",
        libc::EOPNOTSUPP if drv => {
            "the driver has no native XDP, or refuses it in its current state (virtio_net: while the \
             host implements guest offloads; `ethtool -K <if> rx-gro-hw off` first); skb mode works \
             on every interface"
        }
        libc::ERANGE if drv => {
            "MTU too large for native XDP (the program is not multi-buffer aware); lower the MTU \
             (veth: the PEER's MTU counts, at most 3506 with 4 KiB pages)"
        }
        libc::EINVAL if drv => {
            "the driver refused native XDP (virtio_net: MTU too large, or mergeable RX buffers \
             without any_header_sg); the kernel's reason is in the xdp:bpf_xdp_link_attach_failed \
             tracepoint"
        }
        libc::ENODEV => "the interface went away",
        libc::EBUSY | libc::EEXIST => "an XDP program is attached in another mode or by another link",
        _ => return String::new(),
    };
    format!("; {hint}")
}

/// What is attached to `ifindex` and how to remove it, if anything is.
pub(super) fn describe_existing(ifname: &str, ifindex: u32) -> Option<(String, String)> {
    let mut q = libbpf_sys::bpf_xdp_query_opts {
        sz: size_of::<libbpf_sys::bpf_xdp_query_opts>() as libbpf_sys::size_t,
        ..Default::default()
    };
    // SAFETY: plain netlink query; `q` outlives the call.
    let ret = unsafe { libbpf_sys::bpf_xdp_query(ifindex as i32, 0, &mut q) };
    if ret != 0 {
        return None;
    }
    let (prog_id, mode, ip_mode) = match q.attach_mode as u32 {
        libbpf_sys::XDP_ATTACHED_DRV => (q.drv_prog_id, "drv", "xdpdrv"),
        libbpf_sys::XDP_ATTACHED_SKB => (q.skb_prog_id, "skb", "xdpgeneric"),
        libbpf_sys::XDP_ATTACHED_HW => (q.hw_prog_id, "hw", "xdpoffload"),
        libbpf_sys::XDP_ATTACHED_MULTI => {
            let id = [q.drv_prog_id, q.skb_prog_id, q.hw_prog_id]
                .into_iter()
                .find(|&i| i != 0)
                .unwrap_or(0);
            (id, "multiple modes", "xdp")
        }
        _ => return None, // nothing attached: the error was something else
    };
    let prog_name = ProgInfoIter::default()
        .find(|p| p.id == prog_id)
        .map(|p| p.name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "?".into());
    let link = LinkInfoIter::default().find(|l| {
        l.prog_id == prog_id && matches!(&l.info, LinkTypeInfo::Xdp(x) if x.ifindex == ifindex)
    });
    let existing = format!("prog id {prog_id} {prog_name:?}, {mode} mode");
    Some(match link {
        Some(l) => (
            format!("{existing}, held by bpf_link id {}", l.id),
            format!(
                "it is detached when the process owning that link exits, or with: bpftool link detach id {}",
                l.id
            ),
        ),
        None => (existing, format!("remove it with: ip link set dev {ifname} {ip_mode} off")),
    })
}

// Driver name (for `Auto`): one implementation, in `tune`.

pub(super) fn driver_name(ifname: &str) -> Option<String> {
    crate::tune::driver_name(ifname).ok()
}
