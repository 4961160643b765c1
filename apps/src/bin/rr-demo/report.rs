//! rr-demo's report: the tables (text and Markdown), the per-round ratios, results.json and
//! the plot files.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Result};
use serde::Serialize;

use crate::cases::{label, Case, Kernel};
use crate::fmt_count;
use crate::metrics::{best_kernel, median, summaries, Metrics, Row, Summary};
use crate::plot::{plot_cases, plot_text};

/// The xsk/kernel ratio of one figure (server CPU per request, p50) in each
/// round (the runs of a round are back to back, so they share the
/// machine's state), summarised. The kernel run is that of one configuration (the case's best).
#[derive(Debug, PartialEq, Serialize)]
pub(super) struct Paired {
    pub(super) case: String,
    /// The kernel configuration paired with (epoll, uring).
    pub(super) kernel: String,
    pub(super) rounds: usize,
    pub(super) median: f64,
    pub(super) min: f64,
    pub(super) max: f64,
    /// Rounds where the stack's figure was at most the kernel's.
    pub(super) at_most_kernel: usize,
}

/// The per-round ratios of the xsk runs of `case` to the runs of the `kernel` backend ("kernel"
/// for epoll, "uring") of the same round.
pub(super) fn paired_ratios(rows: &[Row], case: &str, kernel: &str, figure: fn(&Metrics) -> f64) -> Option<Paired> {
    let cpu = |backend: &str, round: usize| {
        rows.iter()
            .find(|r| r.case == case && r.backend == backend && r.round == round)
            .map(|r| figure(&r.m))
            .filter(|c| c.is_finite() && *c > 0.0)
    };
    let mut rounds: Vec<usize> = rows.iter().filter(|r| r.case == case).map(|r| r.round).collect();
    rounds.sort_unstable();
    rounds.dedup();
    let ratios: Vec<f64> = rounds.iter().filter_map(|&n| Some(cpu("xsk", n)? / cpu(kernel, n)?)).collect();
    if ratios.len() < 2 {
        return None;
    }
    Some(Paired {
        case: case.into(),
        kernel: label(kernel).into(),
        rounds: ratios.len(),
        median: median(ratios.clone()),
        min: ratios.iter().copied().fold(f64::INFINITY, f64::min),
        max: ratios.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        at_most_kernel: ratios.iter().filter(|&&q| q <= 1.0).count(),
    })
}

/// How the tables are printed: --wide, --markdown, and whether files are written (not for
/// --from-json --markdown).
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Show {
    pub(super) wide: bool,
    pub(super) markdown: bool,
    pub(super) write: bool,
}

/// One column of the medians table: its group (the columns of one measure), its head, whether
/// only --wide shows it, and its cell from the case and its xsk and kernel summaries.
pub(super) struct Col {
    group: &'static str,
    head: &'static str,
    wide_only: bool,
    cell: fn(&Case, &Summary, &Summary) -> String,
}

pub(super) fn columns() -> Vec<Col> {
    use apps::table::{fixed, latency};
    let col = |group, head, wide_only, cell| Col {
        group,
        head,
        wide_only,
        cell,
    };
    vec![
        col("case", "case", false, |c, _, _| c.name.to_string()),
        col("conns", "conns", true, |c, _, _| c.conns.to_string()),
        col("conns", "thr", true, |c, _, _| {
            format!("{}/{}", c.client_threads, c.server_threads)
        }),
        col("rps", "xsk req/s", false, |_, x, _| fixed(x.m.rps, 0)),
        col("rps", "krn req/s", false, |_, _, k| fixed(k.m.rps, 0)),
        col("rps", "x/k", false, |_, x, k| fixed(x.m.rps / k.m.rps, 2)),
        col("p50", "xsk p50", false, |_, x, _| latency(x.m.p50_us)),
        col("p50", "krn p50", false, |_, _, k| latency(k.m.p50_us)),
        col("p99", "xsk p99", false, |_, x, _| latency(x.m.p99_us)),
        col("p99", "krn p99", false, |_, _, k| latency(k.m.p99_us)),
        col("p999", "xsk p99.9", true, |_, x, _| latency(x.m.p999_us)),
        col("p999", "krn p99.9", true, |_, _, k| latency(k.m.p999_us)),
        col("cpu", "xsk cpu", false, |_, x, _| {
            fixed(x.m.cpu_us_per_req, 2)
        }),
        col("cpu", "krn cpu", false, |_, _, k| {
            fixed(k.m.cpu_us_per_req, 2)
        }),
        col("cpu", "x/k", false, |_, x, k| {
            fixed(x.m.cpu_us_per_req / k.m.cpu_us_per_req, 2)
        }),
        // Which kernel configuration krn is.
        // In --wide and Markdown tables; the key text table names it below (100 characters).
        col("krn", "krn", true, |_, _, k| label(&k.backend).to_string()),
        col("own", "xsk own", true, |_, x, _| {
            fixed(x.m.cpu_us_per_req_own_rx, 2)
        }),
        col("own", "krn own", true, |_, _, k| {
            fixed(k.m.cpu_us_per_req_own_rx, 2)
        }),
        col("own", "x/k", true, |_, x, k| {
            fixed(x.m.cpu_us_per_req_own_rx / k.m.cpu_us_per_req_own_rx, 2)
        }),
        col("mc", "xsk mc", true, |_, x, _| machine_col(x)),
        col("mc", "krn mc", true, |_, _, k| machine_col(k)),
        col("cores", "xsk c/s", true, |_, x, _| {
            format!("{:.2}/{:.2}", x.m.client_cores, x.m.server_cores)
        }),
        col("cores", "krn c/s", true, |_, _, k| {
            format!("{:.2}/{:.2}", k.m.client_cores, k.m.server_cores)
        }),
        col("setup", "xsk s", true, |_, x, _| fixed(x.m.setup_s, 2)),
        col("setup", "krn s", true, |_, _, k| fixed(k.m.setup_s, 2)),
        col("conn p99", "xsk", true, |_, x, _| latency(x.m.conn_setup_p99_us)),
        col("conn p99", "krn", true, |_, _, k| latency(k.m.conn_setup_p99_us)),
        col("drops", "drops", true, |_, x, _| {
            fmt_count(x.m.server_drops)
        }),
        col("retx", "x retx", true, |_, x, _| fmt_count(x.m.retx())),
        col("retx", "k retx", true, |_, _, k| fmt_count(k.m.retx())),
        col("tlp", "x tlp", true, |_, x, _| {
            fmt_count(x.m.server_tail_probes)
        }),
        col("tlp", "x sptl", true, |_, x, _| {
            fmt_count(x.m.server_spurious_probes)
        }),
        col("tlp", "x rto", true, |_, x, _| {
            fmt_count(x.m.server_rto_retransmits)
        }),
    ]
}

/// The medians, one row per case that has both an xsk and a kernel summary; krn is the best
/// kernel configuration of the case ([`best_kernel`]).
pub(super) fn medians_table(
    cases: &[Case],
    sums: &BTreeMap<(String, String), Summary>,
    wide: bool,
) -> apps::table::Table {
    medians_table_with(cases, sums, wide, wide)
}

/// [`medians_table`], with the krn column (the best kernel configuration's name) also when not
/// `wide` if `name_krn`.
pub(super) fn medians_table_with(
    cases: &[Case],
    sums: &BTreeMap<(String, String), Summary>,
    wide: bool,
    name_krn: bool,
) -> apps::table::Table {
    let cols: Vec<Col> = columns()
        .into_iter()
        .filter(|c| wide || !c.wide_only || (name_krn && c.group == "krn"))
        .collect();
    let mut groups: Vec<Vec<&str>> = Vec::new();
    for (i, c) in cols.iter().enumerate() {
        if i == 0 || cols[i - 1].group != c.group {
            groups.push(Vec::new());
        }
        groups.last_mut().expect("pushed above").push(c.head);
    }
    let mut t = apps::table::Table::grouped(&groups);
    for case in cases {
        let (Some(x), Some(k)) = (sums.get(&(case.name.into(), "xsk".into())), best_kernel(case, sums)) else {
            continue;
        };
        t.row(cols.iter().map(|c| (c.cell)(case, x, k)).collect());
    }
    t
}

/// Every kernel configuration of each case: its medians and the stack's ratio to each; the
/// best one (krn of the medians table) marked with a *.
pub(super) fn kernels_table(cases: &[Case], sums: &BTreeMap<(String, String), Summary>) -> apps::table::Table {
    use apps::table::{fixed, latency};
    let g = |h: &[&str]| h.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut t = apps::table::Table::grouped(&[
        g(&["case", "kernel"]),
        g(&["req/s", "x/k"]),
        g(&["p50", "x/k"]),
        g(&["p99", "x/k"]),
        g(&["cpu", "x/k"]),
        g(&["sys/req"]),
    ]);
    for case in cases {
        let x = sums.get(&(case.name.into(), "xsk".into()));
        if let Some(x) = x {
            // The stack's own row: its figures, and its system calls per request to compare.
            t.row(vec![
                case.name.to_string(),
                "xsk ".to_string(),
                fixed(x.m.rps, 0),
                String::new(),
                latency(x.m.p50_us),
                String::new(),
                latency(x.m.p99_us),
                String::new(),
                fixed(x.m.cpu_us_per_req, 2),
                String::new(),
                fixed(x.m.server_syscalls_per_req, 2),
            ]);
        }
        let best = best_kernel(case, sums).map(|b| b.backend.as_str());
        for k in Kernel::ALL {
            let Some(s) = sums.get(&(case.name.into(), k.backend().into())) else { continue };
            let ratio = |f: fn(&Metrics) -> f64| fixed(x.map_or(f64::NAN, |x| f(&x.m)) / f(&s.m), 2);
            // A space for the others, so that the names line up (the column is right-aligned).
            let star = if best == Some(k.backend()) { "*" } else { " " };
            t.row(vec![
                case.name.to_string(),
                format!("{}{star}", k.name()),
                fixed(s.m.rps, 0),
                ratio(|m| m.rps),
                latency(s.m.p50_us),
                ratio(|m| m.p50_us),
                latency(s.m.p99_us),
                ratio(|m| m.p99_us),
                fixed(s.m.cpu_us_per_req, 2),
                ratio(|m| m.cpu_us_per_req),
                fixed(s.m.server_syscalls_per_req, 2),
            ]);
        }
    }
    t
}

/// The kernel configurations some case ran and another did not, once each: skipped (and why)
/// or failed.
pub(super) fn missing_kernels(rows: &[Row], cases: &[Case]) -> Vec<String> {
    let ran = |k: Kernel, c: &Case| rows.iter().any(|r| r.case == c.name && r.backend == k.backend());
    let mut notes = Vec::new();
    for k in Kernel::ALL {
        if !cases.iter().any(|c| ran(k, c)) {
            continue;
        }
        let (skipped, none): (Vec<&Case>, Vec<&Case>) =
            cases.iter().filter(|c| !ran(k, c)).partition(|c| k.cannot_run(c).is_some());
        if !skipped.is_empty() {
            let names: Vec<&str> = skipped.iter().map(|c| c.name).collect();
            let why = k.cannot_run(skipped[0]).unwrap_or_default();
            notes.push(format!("{} did not run {} ({why}).", k.name(), names.join(", ")));
        }
        if !none.is_empty() {
            let names: Vec<&str> = none.iter().map(|c| c.name).collect();
            notes.push(format!("{}: no runs of {} (failed or not selected).", k.name(), names.join(", ")));
        }
    }
    notes
}

/// What the table's columns mean, as sentences.
pub(super) fn legend(wide: bool) -> Vec<String> {
    let mut l = vec![
        "Medians over the rounds. xsk = the AF_XDP stack, krn = the best kernel TCP configuration of the case (epoll, or uring = io_uring; named in the krn column or line): the highest req/s, or in the open-loop cases (fixed rate) the least server CPU per request; x/k = their ratio; req/s = requests per second; p50, p99 = latency percentiles.".to_string(),
        "cpu = the server process's CPU time per request in us, kernel work in its context included (on veth that holds the client's receive path, and not the server's own).".into(),
    ];
    if wide {
        l.extend([
            "thr = client/server threads (rr-bench/rr-server --threads).".to_string(),
            "own = the same with each side charged its own receive path (server CPU - NET_RX softirq run in it + NET_RX run in the client: on veth the sender's process runs the receiver's softirq; - without root).".into(),
            format!("mc = whole machine; c/s = cores kept busy by the client / server process (its CPU time over the window's wall time, all threads), of {}: a side near its thread count is the bottleneck; mc n/a: /proc/stat counts busy time in ticks, which miss short wake-ups on an otherwise idle machine, so it read less than the two processes' own CPU time.", apps::online_cpus()),
            "s = seconds to set up the connections (not measured); conn p99 = churn and storm cases: from the connect call to the established connection; drops = the xsk server's drop counters.".into(),
            "retx = everything both ends sent again: kernel TCP's retransmitted segments (RetransSegs, its loss probes included) where kernel TCP runs, and the stack's RTO, fast and hole retransmits and tail-loss probes where the stack runs (client and server); x tlp / x sptl / x rto = the xsk server's tail-loss probes, the probes the client showed were spurious, and its RTO retransmits; all over warm-up, setup and run.".into(),
        ]);
    } else {
        l.push("--wide shows every column (p99.9, own receive path, cores, setup, drops, retransmissions, probes).".into());
    }
    l
}

/// Words wrapped to lines of at most `width` characters.
pub(super) fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for w in text.split_whitespace() {
        let cur = lines.last_mut().expect("never empty");
        if !cur.is_empty() && cur.len() + 1 + w.len() > width {
            lines.push(w.to_string());
        } else {
            if !cur.is_empty() {
                cur.push(' ');
            }
            cur.push_str(w);
        }
    }
    lines
}

/// "krn: uring in rr-16, same-16; epoll in open-5k" for the key text table, which has no room
/// for the krn column; None if only one kernel configuration ran.
pub(super) fn krn_line(cases: &[Case], sums: &BTreeMap<(String, String), Summary>) -> Option<String> {
    let mut by: Vec<(&str, Vec<&str>)> = Vec::new();
    for c in cases {
        if !sums.contains_key(&(c.name.to_string(), "xsk".to_string())) {
            continue;
        }
        let Some(k) = best_kernel(c, sums) else { continue };
        let name = label(&k.backend);
        match by.iter_mut().find(|(n, _)| *n == name) {
            Some((_, v)) => v.push(c.name),
            None => by.push((name, vec![c.name])),
        }
    }
    let ran = sums.keys().filter(|(_, b)| b != "xsk").map(|(_, b)| b).collect::<std::collections::BTreeSet<_>>();
    (ran.len() > 1).then(|| {
        let parts: Vec<String> = by.iter().map(|(n, cs)| format!("{n} in {}", cs.join(", "))).collect();
        format!("krn (the best kernel configuration): {}.", parts.join("; "))
    })
}

pub(super) fn report(rows: &[Row], cases: &[Case], out: &Path, meta: &serde_json::Value, show: Show) -> Result<()> {
    let sums = summaries(rows, cases);
    // Whether more than one kernel configuration ran (files from before --kernels: epoll only).
    let several = sums.keys().filter(|(_, b)| b != "xsk").map(|(_, b)| b).collect::<std::collections::BTreeSet<_>>().len() > 1;
    // The key text table has no room for the krn column (krn_line names them below it).
    let table = if show.markdown {
        medians_table_with(cases, &sums, show.wide, several)
    } else {
        medians_table(cases, &sums, show.wide)
    };
    println!();
    if show.markdown {
        // Where the figures come from, for a study that quotes them.
        let args: Vec<&str> = meta["args"].as_array().map_or(vec![], |a| a.iter().filter_map(|v| v.as_str()).collect());
        println!("{}; command: `{}`", plot_text(cases, meta).subtitle, args.join(" "));
        println!();
        print!("{}", table.markdown());
        println!();
        println!("{}", legend(show.wide).join(" "));
    } else {
        print!("{}", table.text());
        let width = if show.wide { 120 } else { 100 };
        if let Some(l) = krn_line(cases, &sums).filter(|_| !show.wide) {
            for line in wrap(&l, width) {
                println!("{line}");
            }
        }
        for sentence in legend(show.wide) {
            for line in wrap(&sentence, width) {
                println!("{line}");
            }
        }
    }
    // Every kernel configuration, when there was more than one.
    let ktable = kernels_table(cases, &sums);
    let notes = missing_kernels(rows, cases);
    if several || !notes.is_empty() {
        let title = "every kernel configuration (medians; x/k = xsk's over its; * = the best, krn above; sys/req = the server's system calls per request):";
        println!();
        if show.markdown {
            println!("{}", title.trim_end_matches(':'));
            println!();
            print!("{}", ktable.markdown());
            if !notes.is_empty() {
                println!();
                println!("{}", notes.join(" "));
            }
        } else {
            println!("{title}");
            print!("{}", ktable.text());
            for n in &notes {
                println!("{n}");
            }
        }
    }
    // Each round's xsk run against the run of the case's best kernel configuration in that round.
    let best: BTreeMap<&str, &str> =
        cases.iter().filter_map(|c| Some((c.name, best_kernel(c, &sums)?.backend.as_str()))).collect();
    let pair = |figure: fn(&Metrics) -> f64| -> Vec<Paired> {
        cases.iter().filter_map(|c| paired_ratios(rows, c.name, best.get(c.name)?, figure)).collect()
    };
    let paired = pair(|m| m.cpu_us_per_req);
    let paired_own = pair(|m| m.cpu_us_per_req_own_rx);
    // Latency moves with the machine as CPU does: busy-same-1's two rows go slow and fast
    // together (docs/2026-12-04-busy-placement).
    let paired_p50 = pair(|m| m.p50_us);
    // Whatever either side's kernel does for the other, the two processes together hold it all.
    let paired_both = pair(|m| m.cpu_us_per_req + m.cpu_us_per_req_client);
    // The ratio of medians above mixes rounds run minutes apart; on a
    // noisy machine the per-round ratio is the steadier figure.
    // The two last views are --wide's.
    let views = [
        ("server CPU, xsk/best kernel (krn) per round (each round's runs back to back):", &paired),
        ("p50 latency, xsk/best kernel per round:", &paired_p50),
        ("server CPU with its own receive (own), xsk/best kernel per round:", &paired_own),
        ("server + client processes (the same kernel client for both), xsk/best kernel per round:", &paired_both),
    ];
    for (title, list) in views.into_iter().take(if show.wide { 4 } else { 2 }) {
        if list.is_empty() {
            continue;
        }
        println!();
        if show.markdown {
            let mut t = apps::table::Table::new(&["case", "krn", "median", "range", "rounds at most the kernel's"]);
            for p in list {
                t.row(vec![
                    p.case.clone(),
                    p.kernel.clone(),
                    format!("{:.2}", p.median),
                    format!("{:.2}-{:.2}", p.min, p.max),
                    format!("{} of {}", p.at_most_kernel, p.rounds),
                ]);
            }
            println!("{}", title.trim_end_matches(':'));
            println!();
            print!("{}", t.markdown());
            continue;
        }
        println!("{title}");
        for p in list {
            println!(
                "  {:<13} {:<5}  median {:.2}  range {:.2}-{:.2}  at most the kernel's in {} of {} rounds",
                p.case, p.kernel, p.median, p.min, p.max, p.at_most_kernel, p.rounds
            );
        }
    }
    let errors: u64 = sums.values().map(|s| s.errors).sum();
    let json = serde_json::json!({
        "metadata": meta, "summary": sums.values().collect::<Vec<_>>(), "best_kernel": best, "paired_cpu": paired, "paired_p50": paired_p50, "paired_cpu_own_rx": paired_own,
        "paired_cpu_server_and_client": paired_both, "runs": rows
    });
    if show.write {
        apps::write_atomically(&out.join("results.json"), &serde_json::to_vec_pretty(&json)?)?;
        let (svg, png) = (out.join("results.svg"), out.join("results.png"));
        apps::plot::draw_files(&plot_text(cases, meta), &plot_cases(&sums, cases), &svg, &png)?;
        // On stderr with --markdown, so stdout is the document.
        let wrote = format!("wrote {}, {} and {}", out.join("results.json").display(), svg.display(), png.display());
        if show.markdown { eprintln!("{wrote}") } else { println!("{wrote}") }
    }
    if errors > 0 {
        bail!("{errors} requests failed or were lost");
    }
    Ok(())
}

/// The whole-machine CPU per request, unless /proc/stat's tick sampling
/// visibly undercounted it (less than the client and server processes used).
pub(super) fn machine_col(s: &Summary) -> String {
    let procs = (s.m.client_cores + s.m.server_cores) / s.m.rps * 1e6;
    if procs.is_finite() && s.m.cpu_us_per_req_machine < 0.9 * procs {
        "n/a".into()
    } else {
        format!("{:.2}", s.m.cpu_us_per_req_machine)
    }
}
