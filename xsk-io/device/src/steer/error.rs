//! What can go wrong loading, attaching or updating the program.

use std::io;

use crate::AttachMode;

use super::object::MAP_XSKS;

/// Errors of the steering program loader and of its map updates. Each names
/// the interface or map and carries the kernel's error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SteerError {
    /// The name cannot be an interface name (empty, 16 bytes or more, `/`,
    /// whitespace or NUL).
    #[error("invalid interface name {ifname:?}: {reason}")]
    InvalidInterfaceName {
        /// The name given.
        ifname: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// No interface of that name in the calling thread's network namespace.
    #[error("no such interface {ifname:?}: {source}")]
    NoSuchInterface {
        /// The name given.
        ifname: String,
        /// The `if_nametoindex` error.
        #[source]
        source: io::Error,
    },

    /// libbpf could not open or load the embedded program (typically
    /// missing `CAP_BPF`/`CAP_SYS_ADMIN`: the message then says so).
    #[error("loading the XDP steering program failed: {0}{hint}", hint = load_hint(.0))]
    Load(#[source] libbpf_rs::Error),

    /// The kernel refused the program (`EPERM`/`EACCES`): the capabilities the process
    /// lacks are named, and the verifier's own verdict quoted when it gave one.
    #[error("loading the XDP steering program failed: {source}; {why}")]
    Refused {
        /// libbpf's error.
        #[source]
        source: libbpf_rs::Error,
        /// The missing capabilities and the verifier's verdict.
        why: String,
    },

    /// The interface already has an XDP program (ours from another process,
    /// or someone else's); nothing was attached.
    #[error("interface {ifname} already has an XDP program ({existing}); {remedy}")]
    AlreadyAttached {
        /// The interface.
        ifname: String,
        /// Its index.
        ifindex: u32,
        /// The mode we tried to attach in.
        mode: AttachMode,
        /// What is attached, as far as we can tell.
        existing: String,
        /// How to get rid of it.
        remedy: String,
        /// The kernel's error (`EBUSY` or `EEXIST`).
        #[source]
        source: io::Error,
    },

    /// `BPF_LINK_CREATE` failed for another reason.
    #[error("attaching the XDP program in {mode} mode to {ifname} (ifindex {ifindex}) failed: {source}{hint}")]
    Attach {
        /// The interface.
        ifname: String,
        /// Its index.
        ifindex: u32,
        /// The mode tried (`Skb` or `Drv`).
        mode: AttachMode,
        /// The kernel's error.
        #[source]
        source: io::Error,
        /// Empty, or `"; <likely cause>"`.
        hint: String,
    },

    /// A queue id at or above [`MAX_QUEUES`](super::MAX_QUEUES).
    #[error("queue id {queue_id} is out of range: {MAP_XSKS} has {max} entries (queues 0..={})", max - 1)]
    QueueOutOfRange {
        /// The queue id given.
        queue_id: u32,
        /// [`MAX_QUEUES`](super::MAX_QUEUES).
        max: u32,
    },

    /// A configuration the program cannot express (ARP steering for `0.0.0.0`).
    #[error("invalid steering configuration: {0}")]
    InvalidConfig(&'static str),

    /// Reading or updating one of the program's maps failed.
    #[error("bpf map {map}: {op} failed: {source}")]
    Map {
        /// The map's name in `steer.bpf.c`.
        map: &'static str,
        /// What was being done, e.g. `"add port 7777"`.
        op: String,
        /// libbpf's error.
        #[source]
        source: libbpf_rs::Error,
    },
}

impl SteerError {
    /// A failed load, with libbpf's `log` of it: a refusal names the missing capabilities
    /// and quotes the verifier.
    pub(super) fn load(source: libbpf_rs::Error, log: &[String]) -> SteerError {
        if source.kind() != libbpf_rs::ErrorKind::PermissionDenied {
            return SteerError::Load(source);
        }
        use caps::Capability::{CAP_BPF, CAP_NET_ADMIN, CAP_PERFMON};
        let missing = crate::privileges::missing_caps(&[CAP_NET_ADMIN, CAP_BPF, CAP_PERFMON]);
        let mut why = if missing.is_empty() {
            "the process has CAP_NET_ADMIN, CAP_BPF and CAP_PERFMON".to_string()
        } else {
            let names: Vec<String> = missing.iter().map(|n| format!("{} ({})", n.cap, n.why)).collect();
            let them = if missing.len() == 1 { "it" } else { "them" };
            format!("missing {}: grant {them} or run as root", names.join(", "))
        };
        match super::object::verifier_verdict(log) {
            Some(v) => why.push_str(&format!("; the verifier said: {v}")),
            None => why.push_str("; RUST_LOG=libbpf=trace shows libbpf's whole log"),
        }
        SteerError::Refused { source, why }
    }
}

fn load_hint(e: &libbpf_rs::Error) -> &'static str {
    match e.kind() {
        libbpf_rs::ErrorKind::PermissionDenied => "; needs CAP_NET_ADMIN, CAP_BPF and CAP_PERFMON (or root)",
        _ => "",
    }
}

pub(super) fn missing(what: String) -> SteerError {
    SteerError::Load(libbpf_rs::Error::from(io::Error::new(
        io::ErrorKind::NotFound,
        format!("{what} not found in the embedded steer.bpf.o"),
    )))
}
