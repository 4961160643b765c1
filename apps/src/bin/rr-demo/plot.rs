//! The plot's content: a bar pair per case (xsk and the best kernel configuration) and its
//! title, subtitle and legend.

use std::collections::BTreeMap;
use std::time::Duration;

use apps::plot::{Bars, PlotCase, PlotText};

use crate::cases::{parse_kernels, Case, Kernel, LossKind, OUTAGE_MS, OUTAGE_ONE_IN};
use crate::metrics::{best_kernel, Summary};

/// The plot's bars: xsk, and the best kernel configuration of each case.
pub(super) fn plot_cases(sums: &BTreeMap<(String, String), Summary>, cases: &[Case]) -> Vec<PlotCase> {
    let bars = |s: &Summary| Bars {
        rps: s.m.rps,
        p50_us: s.m.p50_us,
        p99_us: s.m.p99_us,
    };
    cases
        .iter()
        .filter_map(|c| {
            let xsk = sums.get(&(c.name.to_string(), "xsk".to_string())).map(bars);
            let kernel = best_kernel(c, sums).map(bars);
            (xsk.is_some() || kernel.is_some()).then(|| PlotCase {
                name: c.name.into(),
                conns: c.conns,
                threads: (c.client_threads, c.server_threads),
                xsk,
                kernel,
            })
        })
        .collect()
}

/// The kernel configurations a result file's run chose (files from before --kernels: epoll).
pub(super) fn meta_kernels(meta: &serde_json::Value) -> Vec<Kernel> {
    meta["kernels"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| parse_kernels(v.as_str()?).ok()).flat_map(|k| k.0).collect::<Vec<_>>())
        .filter(|k| !k.is_empty())
        .unwrap_or_else(|| vec![Kernel::Epoll])
}

pub(super) fn plot_text(cases: &[Case], meta: &serde_json::Value) -> PlotText {
    let rounds = meta["rounds"].as_u64().unwrap_or(1);
    let dur = meta["duration_s"]
        .as_f64()
        .map_or_else(|| "?".into(), |d| humantime::format_duration(Duration::from_secs_f64(d)).to_string());
    let how = if rounds > 1 {
        format!("median of {rounds} rounds of {dur} per case")
    } else {
        format!("one round of {dur} per case")
    };
    let commit = meta["commit"].as_str().map_or("?".to_string(), |c| c.chars().take(10).collect());
    let kernels = meta_kernels(meta);
    let rotating = if kernels.len() > 1 { "rotating" } else { "alternating" };
    let names = kernels.iter().map(|k| k.name()).collect::<Vec<_>>().join("/");
    let subtitle = format!(
        "{how}, {rotating} xsk/{names}; 64-byte echo, veth lab; {}, Linux {}, {} CPUs ({}), commit {commit}",
        meta["date"].as_str().unwrap_or("?"),
        meta["kernel"].as_str().unwrap_or("?"),
        meta["cpus"].as_u64().unwrap_or(0),
        meta["cpu_model"].as_str().unwrap_or("?"),
    );
    let has = |f: &dyn Fn(&Case) -> bool| cases.iter().any(f);
    let mut legend = vec!["Cases: the client is the kernel's TCP (epoll) unless the name says same-; one request in flight per connection (closed loop) unless open- or idle-.".to_string()];
    if kernels.len() > 1 {
        legend.push(format!(
            "Kernel bars: the best of the kernel configurations ({}; uring = kernel TCP through io_uring) in each case: the highest req/s, for open loop the least server CPU per request.",
            kernels.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
        ));
    }
    if has(&|c| !c.same_client && !c.busy_poll && c.rate.is_none() && c.loss.is_none() && c.pattern == "rr") {
        legend.push("rr-N: N connections.".into());
    }
    if has(&|c| c.pattern != "rr") {
        legend.push("churn-16: connect, one request, close, 16 connections at a time; storm-1000: waves of 1,000 connections opened at once, one request each, closed. Their req/s are connections/s, p50/p99 from the connect call to the response (handshake included), cpu per connection.".into());
    }
    if has(&|c| c.client_threads > 1) {
        legend.push("-t2: 2 client threads (rr-bench --threads 2); -s2: and 2 server threads (rr-server --threads 2: xsk one stack shard per queue of a 2-queue veth, kernel 2 SO_REUSEPORT listeners); \"c/s thr\" under a case: client/server threads.".into());
    }
    if has(&|c| c.same_client) {
        legend.push("same-: the client runs on the same stack as the server: stack client against stack server (xsk bars), kernel client against kernel server (kernel bars; an io_uring client for the uring server).".into());
    }
    if has(&|c| c.busy_poll) {
        legend.push("busy-: busy polling in server and client (each spins a core).".into());
    }
    let open: Vec<String> = cases
        .iter()
        .filter_map(|c| c.rate.map(|r| format!("{}: {} requests/s", c.name, apps::group_digits(r))))
        .collect();
    if !open.is_empty() {
        let mut line = format!(
            "Open loop ({}) in total over the connections; latency counts from each request's scheduled time.",
            open.join(", ")
        );
        if has(&|c| c.name == "idle-100") {
            line += " idle-100: each connection idles ~160 ms between requests, so the client ACKs every response late (delayed ACK).";
        }
        legend.push(line);
    }
    let mut loss = Vec::new();
    if has(&|c| c.loss == Some(LossKind::Random1) && !c.same_client && c.kv_value.is_none()) {
        loss.push("loss1-16: 1% of the frames dropped each way at the client (nftables)".to_string());
    }
    if has(&|c| c.loss == Some(LossKind::Random1) && c.kv_value.is_some()) {
        loss.push("loss1-64k-16: the same with 64 KiB answers (the kv service's GETs)".to_string());
    }
    if has(&|c| c.loss == Some(LossKind::Random1) && c.same_client) {
        loss.push("loss1-same-16: the same, same- clients (the stack client's own fault injector: nftables cannot see AF_XDP frames)".into());
    }
    if has(&|c| c.loss == Some(LossKind::Outages)) {
        loss.push(format!(
            "lossburst-16: one in {} TCP frames at the client starts a {OUTAGE_MS} ms outage dropping every frame either way (nftables)",
            apps::group_digits(u64::from(OUTAGE_ONE_IN))
        ));
    }
    if !loss.is_empty() {
        legend.push(format!("{}; 16 connections.", loss.join("; ")));
    }
    PlotText {
        title: "Userspace TCP/IP over AF_XDP (xsk) against kernel TCP: request/response".into(),
        subtitle,
        case_legend: legend,
    }
}
