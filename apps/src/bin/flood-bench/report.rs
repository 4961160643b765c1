//! The results table and the PASS/FAIL verdicts.

use serde_json::Value;

use crate::bound::MemoryBound;
use crate::case::CaseResult;

fn nonzero(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let parts: Vec<String> = m
                .iter()
                .filter(|(_, x)| x.as_u64().is_some_and(|n| n > 0))
                .map(|(k, x)| format!("{k} {}", apps::group_digits(x.as_u64().unwrap_or(0))))
                .collect();
            if parts.is_empty() {
                "none".into()
            } else {
                parts.join(", ")
            }
        }
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

pub(crate) fn table(results: &[CaseResult], bound: &MemoryBound) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<16}{:>13}{:>14}{:>10}{:>10}{:>10}{:>9}{:>9}{:>10}{:>10}{:>11}{:>8}",
        "case", "idle held", "SYNs sent", "SYN/s", "RSS0 MiB", "RSSmax", "p50 us", "p99 us", "p99.9 us", "max us", "requests", "srv CPU"
    );
    for r in results {
        let _ = writeln!(
            s,
            "{:<16}{:>13}{:>14}{:>10}{:>10}{:>10}{:>9.0}{:>9.0}{:>10.0}{:>10.0}{:>11}{:>7.1}s",
            r.case.name(),
            format!("{}/{}", r.idle_held, r.idle_requested),
            apps::group_digits(r.syns_sent),
            apps::group_digits(r.syn_pps.round() as u64),
            r.rss_before_kib >> 10,
            r.rss_max_kib >> 10,
            r.p50_us,
            r.p99_us,
            r.p999_us,
            r.max_us,
            apps::group_digits(r.requests),
            r.server_stack["cpu_s"].as_f64().unwrap_or(f64::NAN)
        );
    }
    for r in results {
        let _ = writeln!(s, "  {} server drops: {}", r.case.name(), nonzero(&r.drops));
    }
    for r in results.iter().filter(|r| r.fresh.tried > 0) {
        let f = &r.fresh;
        let _ = writeln!(
            s,
            "  {} fresh connections: {}/{} established ({} within 100 ms), {} answered; connect p50/p99/max {:.1}/{:.1}/{:.1} ms",
            r.case.name(),
            f.connect_ms.len(),
            f.tried,
            f.within_100ms,
            f.ok,
            f.p50_ms,
            f.p99_ms,
            f.max_ms
        );
    }
    for r in results {
        let _ = writeln!(s, "  {} load average at the end: {}", r.case.name(), r.loadavg);
    }
    let _ = writeln!(
        s,
        "  xsk RSS bound {} MiB (flood growth bound {} MiB); kernel backend: socket memory is the kernel's, not in RSS",
        bound.total_bytes >> 20,
        bound.flood_growth_bytes >> 20
    );
    s
}

/// PASS/FAIL lines: the stack's RSS within the bound, its flood growth within the flood bound,
/// idle connections held, the established connection served throughout.
pub(crate) fn verdicts(results: &[CaseResult], bound: &MemoryBound) -> Vec<String> {
    let mut v = Vec::new();
    let check = |v: &mut Vec<String>, ok: bool, what: String| v.push(format!("{} {what}", if ok { "PASS" } else { "FAIL" }));
    for r in results {
        let n = r.case.name();
        if r.backend == "xsk" {
            let max = r.rss_max_kib.max(r.hwm_kib) * 1024;
            check(&mut v, max <= bound.total_bytes, format!("{n}: RSS peak {} MiB <= bound {} MiB", max >> 20, bound.total_bytes >> 20));
            let growth = r.rss_max_kib.saturating_sub(r.rss_before_kib) * 1024;
            check(
                &mut v,
                growth <= bound.flood_growth_bytes,
                format!("{n}: RSS growth during the measurement {} MiB <= {} MiB", growth >> 20, bound.flood_growth_bytes >> 20),
            );
            if let Some(h) = r.server_stack["half_open"].as_u64() {
                check(
                    &mut v,
                    h <= bound.half_open_max,
                    format!("{n}: half-open sockets at exit {h} <= the stack's limit {}", bound.half_open_max),
                );
                if h > bound.half_open_limit {
                    v.push(format!("INFO {n}: half-open sockets at exit {h} exceed the stack's limit {}", bound.half_open_limit));
                }
            }
            check(&mut v, r.idle_held == r.idle_requested, format!("{n}: idle connections held {}/{}", r.idle_held, r.idle_requested));
        } else if r.idle_held != r.idle_requested {
            v.push(format!("INFO {n}: idle connections held {}/{}", r.idle_held, r.idle_requested));
        }
        if r.request_errors > 0 || r.requests == 0 {
            v.push(format!(
                "INFO {n}: the established connection stopped after {} requests ({} errors: closed, or no answer within 30 s)",
                r.requests, r.request_errors
            ));
        }
    }
    v
}
