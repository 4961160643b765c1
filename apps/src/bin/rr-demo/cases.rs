//! rr-demo's cases, the kernel configurations the stack is compared with, and which of
//! them a run picks (--only, --quick, --full, --kernels).

use anyhow::Result;

use crate::Args;

/// A kernel TCP configuration the stack is compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kernel {
    /// Kernel TCP through epoll (rr-server/rr-bench --backend kernel).
    Epoll,
    /// Kernel TCP through io_uring (--backend uring).
    Uring,
}

impl Kernel {
    pub(super) const ALL: [Kernel; 2] = [Kernel::Epoll, Kernel::Uring];

    /// The name in --kernels.
    pub(super) fn name(self) -> &'static str {
        match self {
            Kernel::Epoll => "epoll",
            Kernel::Uring => "uring",
        }
    }

    /// The rr-server/rr-bench --backend, and the `backend` of its rows in results.json
    /// ("kernel" for epoll: the name its rows have in results.json).
    pub(super) fn backend(self) -> &'static str {
        match self {
            Kernel::Epoll => "kernel",
            Kernel::Uring => "uring",
        }
    }

    pub(super) fn of_backend(backend: &str) -> Option<Kernel> {
        Kernel::ALL.into_iter().find(|k| k.backend() == backend)
    }

    /// Why this configuration cannot run `case`, if it cannot.
    pub(super) fn cannot_run(self, case: &Case) -> Option<&'static str> {
        match self {
            Kernel::Epoll => None,
            Kernel::Uring if case.same_client && case.client_threads > 1 => {
                Some("its client would be rr-bench's io_uring one, which has one thread")
            }
            Kernel::Uring => None,
        }
    }
}

/// `--kernels`: the configurations, in the order given, each once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Kernels(pub(super) Vec<Kernel>);

pub(super) fn parse_kernels(s: &str) -> Result<Kernels, String> {
    let mut out = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let k = match item {
            // "kernel" is what results.json and rr-server call epoll.
            "epoll" | "kernel" => Kernel::Epoll,
            "uring" | "io_uring" => Kernel::Uring,
            _ => return Err(format!("unknown kernel configuration {item:?} (epoll, uring)")),
        };
        if !out.contains(&k) {
            out.push(k);
        }
    }
    if out.is_empty() {
        return Err("name at least one kernel configuration (epoll, uring)".into());
    }
    Ok(Kernels(out))
}

/// The name a row's backend is shown by: epoll for "kernel", else the backend itself.
pub(super) fn label(backend: &str) -> &str {
    match Kernel::of_backend(backend) {
        Some(k) => k.name(),
        None => backend,
    }
}

/// The backends of one round of `case`: the stack and each kernel configuration that can run
/// it, rotated by the round so that each goes first (and last) as often as the others.
pub(super) fn round_order(kernels: &[Kernel], case: &Case, round: usize) -> Vec<&'static str> {
    let mut order: Vec<&'static str> = std::iter::once("xsk")
        .chain(kernels.iter().filter(|k| k.cannot_run(case).is_none()).map(|k| k.backend()))
        .collect();
    let n = order.len();
    order.rotate_left(round % n);
    order
}

/// How the loss cases drop frames at the client.
///
/// nftables in the client's namespace (the host kernel has no netem) sees a kernel client's
/// frames only: XDP hands the AF_XDP stack's frames to its socket before netfilter, and AF_XDP
/// sends bypass it. So a stack client (the xsk run of a same- case) drops its 1% with its own
/// fault injector (rr-bench --fault-rx-drop/--fault-tx-drop), at the same place: as frames
/// enter and leave the client's TCP. The nftables rules are in place for that run too; their
/// counters show they saw none of its frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LossKind {
    /// 1% of the frames each way, each frame on its own (`numgen random`).
    Random1,
    /// Outages: one in [`OUTAGE_ONE_IN`] TCP frames at the client starts an outage of
    /// [`OUTAGE_MS`] in which every TCP frame in either direction is dropped (a dynamic nftables
    /// set whose one element times out). The outage is on time, not on frames: it also takes
    /// the retransmissions and probes sent into it. Starting per frame keeps the number of
    /// outages per request the same whatever the rate; kernel client only.
    Outages,
}

/// Outage length of [`LossKind::Outages`]: longer than the stack's tail-loss probe timeout
/// for a lone segment (2 SRTT + its ACK-delay allowance), shorter than kernel TCP's 200 ms
/// minimum RTO.
pub(super) const OUTAGE_MS: u32 = 100;

/// One in this many TCP frames at the client starts an outage.
pub(super) const OUTAGE_ONE_IN: u32 = 5000;

#[derive(Clone, Debug)]
pub(super) struct Case {
    pub(super) name: &'static str,
    pub(super) conns: usize,
    pub(super) depth: usize,
    /// Client on the same backend as the server (stack to stack, kernel to kernel).
    pub(super) same_client: bool,
    pub(super) busy_poll: bool,
    /// Open loop at this rate instead of closed loop.
    pub(super) rate: Option<u64>,
    /// Frames dropped at the client (see [`LossKind`]).
    pub(super) loss: Option<LossKind>,
    /// Only in full runs, not with --quick.
    pub(super) full_only: bool,
    /// In the default demo (no --full, --quick or --only): the rows a newcomer reads first.
    pub(super) headline: bool,
    /// rr-bench --threads (kernel client): so the load generator is not the bound.
    pub(super) client_threads: usize,
    /// rr-server --threads on both backends (xsk: one stack shard per RX queue; the case runs
    /// in a second lab whose veth pair has this many queues; kernel: SO_REUSEPORT listeners).
    pub(super) server_threads: usize,
    /// Extra options for the xsk server and the stack client of this case.
    pub(super) xsk_args: &'static [&'static str],
    /// rr-bench --pattern: rr, or churn/storm (connections opened and closed; the row's
    /// requests/s are connections/s).
    pub(super) pattern: &'static str,
    /// The client connects over IPv6 (the lab's ends get addresses in 2001:2::/48).
    pub(super) v6: bool,
    /// The kv service with values of this size (rr-bench --resp-size: GETs of that many
    /// bytes), instead of echoing 64-byte requests: answers of many segments.
    pub(super) kv_value: Option<&'static str>,
}

/// `--only`: whether `name` is selected by the comma-separated `only`. An
/// item equal to one of `all` selects that case alone; any other item every
/// case whose name contains it.
pub(super) fn only_matches(only: &str, name: &str, all: &[&str]) -> bool {
    only.split(',').map(str::trim).filter(|i| !i.is_empty()).any(|i| {
        if all.contains(&i) {
            name == i
        } else {
            name.contains(i)
        }
    })
}

/// Whether a run with `args` runs case `c`: --only's cases, --quick's, --full's, or the
/// headline.
pub(super) fn selected(args: &Args, c: &Case) -> bool {
    match &args.only {
        Some(o) => only_matches(o, c.name, &case_names()) && !(args.quick && c.full_only),
        None if args.quick => !c.full_only,
        None => args.full || c.headline,
    }
}

/// The Redis cases run with --full, --quick, or an --only that names them (redis::run picks).
pub(super) fn runs_redis(args: &Args) -> bool {
    args.full || args.quick || args.only.is_some()
}

pub(super) fn case_names() -> Vec<&'static str> {
    cases().iter().map(|c| c.name).collect()
}

pub(super) fn cases() -> Vec<Case> {
    let c = |name, conns, same_client, busy_poll, rate| Case {
        name,
        conns,
        depth: 1,
        same_client,
        busy_poll,
        rate,
        loss: None,
        full_only: false,
        headline: false,
        client_threads: 1,
        server_threads: 1,
        xsk_args: &[],
        pattern: "rr",
        v6: false,
        kv_value: None,
    };
    // The headline: throughput at moderate and high connection counts, stack to stack, the
    // busy-polled latency floor, light load, and loss.
    let h = |c: Case| Case { headline: true, ..c };
    vec![
        c("rr-1", 1, false, false, None),
        h(c("rr-16", 16, false, false, None)),
        // rr-16 over IPv6: its xsk/kernel ratio is rr-16's if IPv6 costs either side nothing more.
        Case { v6: true, full_only: true, ..c("rr-16-v6", 16, false, false, None) },
        h(c("rr-256", 256, false, false, None)),
        Case { client_threads: 2, ..c("rr-256-t2", 256, false, false, None) },
        // The same with two server threads: rr-256-t2 against rr-256-s2 is the 1 -> 2 scaling.
        Case { client_threads: 2, server_threads: 2, ..c("rr-256-s2", 256, false, false, None) },
        h(c("same-16", 16, true, false, None)),
        c("busy-1", 1, false, true, None),
        h(c("busy-same-1", 1, true, true, None)),
        h(c("open-5k", 16, false, false, Some(5000))),
        // Light load with idle gaps: about 160 ms between one connection's requests, so the
        // kernel client acknowledges every response with a delayed ACK (40 ms or more), the
        // case where a tail-loss probe may fire for nothing.
        c("idle-100", 16, false, false, Some(100)),
        h(Case { loss: Some(LossKind::Random1), ..c("loss1-16", 16, false, false, None) }),
        // Both ends are the stack, and it ACKs at once: an operator who knows that sets a small
        // probe allowance (the default, 50 ms, waits out Linux's delayed ACK).
        Case {
            loss: Some(LossKind::Random1),
            xsk_args: &["--ack-delay", "5ms"],
            ..c("loss1-same-16", 16, true, false, None)
        },
        Case { loss: Some(LossKind::Outages), ..c("lossburst-16", 16, false, false, None) },
        // Answers of many segments under loss (64 KiB values from the kv service, 45 segments
        // each): a window can lose more than one segment, which one probe does not repair.
        Case {
            loss: Some(LossKind::Random1),
            kv_value: Some("64k"),
            ..c("loss1-64k-16", 16, false, false, None)
        },
        Case { full_only: true, ..c("rr-1000", 1000, false, false, None) },
        Case { full_only: true, ..c("rr-10000", 10000, false, false, None) },
        // Connection rate: connect, one request, close, 16 at a time; and waves of 1,000
        // connections opened at once (a burst of SYNs), each answered once and closed.
        Case { pattern: "churn", ..c("churn-16", 16, false, false, None) },
        Case { pattern: "storm", ..c("storm-1000", 1000, false, false, None) },
    ]
}
