//! rr-demo's unit tests.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use apps::RecoveryCounts;
use clap::{CommandFactory, Parser};
use xsk_io::AttachMode;

use crate::{loss_note, metadata, skip_notes, time_left, Args};
use crate::cases::{
    case_names, cases, label, only_matches, round_order, runs_redis, selected, Case, Kernel, LossKind, OUTAGE_MS,
    OUTAGE_ONE_IN,
};
use crate::metrics::{best_kernel, summaries, Metrics, Row, Summary};
use crate::plot::{meta_kernels, plot_cases, plot_text};
use crate::report::{
    kernels_table, krn_line, legend, medians_table, medians_table_with, missing_kernels, paired_ratios, report,
    wrap, Show,
};
use crate::runs::{counts_agree, loss_rules, nft_packets, tail, xsk_counters};

#[test]
fn cli() {
    Args::command().debug_assert();
    let a = Args::try_parse_from(["rr-demo", "--duration", "2s", "--rounds", "2"]).unwrap();
    assert_eq!((a.duration, a.rounds, a.attach), (Duration::from_secs(2), 2, AttachMode::Auto));
    for bad in [&["--rounds", "0"][..], &["--duration", "3"], &["--attach", "sideways"], &["--seconds", "3"]] {
        assert!(Args::try_parse_from(["rr-demo"].iter().chain(bad)).is_err(), "{bad:?}");
    }
}

#[test]
fn metadata_keys() {
    let a = Args::try_parse_from(["rr-demo"]).unwrap();
    let m = metadata(&a, 3, Duration::from_secs(4));
    for k in ["date", "kernel", "cpu_model", "cpus", "commit", "args", "rounds", "duration_s", "attach"] {
        assert!(m.get(k).is_some(), "{k} missing: {m}");
    }
    assert!(!m["kernel"].as_str().unwrap().is_empty());
    assert_eq!(m["rounds"], 3);
    let t = plot_text(&cases(), &m);
    assert!(t.subtitle.starts_with("median of 3 rounds of 4s"), "{}", t.subtitle);
    let m1 = metadata(&a, 1, Duration::from_secs(1));
    assert!(plot_text(&cases(), &m1).subtitle.starts_with("one round of 1s"));
    assert!(t
        .case_legend
        .iter()
        .any(|l| l.starts_with("same-: ") && l.contains("stack client against stack server")));
}

#[test]
fn loss_and_idle_cases() {
    let all = cases();
    let get = |n: &str| all.iter().find(|c| c.name == n).unwrap_or_else(|| panic!("{n} missing")).clone();
    let (l1, ls, lb, idle) = (get("loss1-16"), get("loss1-same-16"), get("lossburst-16"), get("idle-100"));
    assert_eq!((l1.loss, l1.same_client, l1.conns), (Some(LossKind::Random1), false, 16));
    // loss1-same-16 is loss1-16 with same- clients, as same-16 is rr-16.
    assert_eq!((ls.loss, ls.same_client, ls.conns, ls.rate), (Some(LossKind::Random1), true, 16, None));
    // Outages are nftables only: a kernel client.
    assert_eq!((lb.loss, lb.same_client, lb.conns), (Some(LossKind::Outages), false, 16));
    assert_eq!((idle.rate, idle.conns, idle.same_client, idle.loss), (Some(100), 16, false, None));
    assert!(all.iter().filter(|c| c.loss.is_some()).all(|c| !c.full_only && !c.busy_poll), "CI runs them");
    let names = case_names();
    let picked = |o: &str| names.iter().copied().filter(|n| only_matches(o, n, &names)).collect::<Vec<_>>();
    assert_eq!(picked("loss"), vec!["loss1-16", "loss1-same-16", "lossburst-16", "loss1-64k-16"]);
    assert_eq!(picked("loss1-16"), vec!["loss1-16"]);
    assert_eq!(picked("loss1-same-16,idle-100"), vec!["idle-100", "loss1-same-16"]);
}

#[test]
fn help_and_legend_name_every_case() {
    let help = Args::command().render_long_help().to_string();
    let words: Vec<&str> = help.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-')).collect();
    for c in cases() {
        assert!(words.contains(&c.name), "rr-demo --help does not name {}", c.name);
    }
    assert!(help.contains(&format!("{OUTAGE_MS} ms outage")), "{help}");
    let m = metadata(&Args::try_parse_from(["rr-demo"]).unwrap(), 1, Duration::from_secs(1));
    let legend = plot_text(&cases(), &m).case_legend.join("\n");
    for name in ["idle-100", "open-5k", "loss1-16", "loss1-same-16", "lossburst-16", "loss1-64k-16"] {
        assert!(legend.contains(name), "{name} not in the legend:\n{legend}");
    }
    assert!(legend.contains("fault injector") && legend.contains("delayed ACK"), "{legend}");
    // A selection's legend names only its own cases.
    let some: Vec<Case> = cases().into_iter().filter(|c| c.name == "idle-100").collect();
    let legend = plot_text(&some, &m).case_legend.join("\n");
    assert!(legend.contains("idle-100: 100 requests/s") && !legend.contains("open-5k") && !legend.contains("loss"));
}

#[test]
fn loss_rules_and_counters() {
    let r = loss_rules(LossKind::Random1);
    assert!(r.starts_with("table inet rrdemo_loss {"), "{r}");
    assert!(r.contains("hook input") && r.contains("hook output"), "{r}");
    assert_eq!(r.matches("numgen random mod 100 < 1 counter name \"dropped\" drop").count(), 2, "{r}");
    assert_eq!(r.matches("meta l4proto tcp counter name \"frames\"").count(), 2, "{r}");
    assert!(!r.contains("@outage"), "{r}");
    let b = loss_rules(LossKind::Outages);
    assert!(b.contains(&format!("flags dynamic,timeout; timeout {OUTAGE_MS}ms;")), "{b}");
    assert_eq!(b.matches("meta l4proto @outage counter name \"dropped\" drop").count(), 2, "{b}");
    assert_eq!(b.matches(&format!("numgen random mod {OUTAGE_ONE_IN} < 1 add @outage")).count(), 2, "{b}");
    // Braces balance: one table, its set and two chains.
    for t in [&r, &b] {
        assert_eq!(t.matches('{').count(), t.matches('}').count(), "{t}");
    }
    let listing = "table inet rrdemo_loss {\n\tcounter dropped {\n\t\tpackets 41 bytes 2952\n\t}\n}\n";
    assert_eq!(nft_packets(listing), Some(41.0));
    assert_eq!(nft_packets("Error: No such file or directory"), None);
    let c: BTreeMap<String, f64> =
        [("nft_frames", 4093.0), ("nft_dropped", 41.0), ("nft_outages", 3.0)].map(|(k, v)| (k.to_string(), v)).into();
    assert_eq!(loss_note(&c), "  nft dropped 41 of 4,093 frames in 3 outages");
    assert_eq!(loss_note(&BTreeMap::new()), "");
}

#[test]
fn quick_runs_server_threads() {
    // CI runs --quick: it must start a multi-threaded server on both backends.
    assert!(cases().iter().any(|c| c.server_threads > 1 && c.client_threads > 1 && !c.full_only));
    let all = case_names();
    let picked = |o: &str| all.iter().copied().filter(|n| only_matches(o, n, &all)).collect::<Vec<_>>();
    assert_eq!(picked("rr-1"), vec!["rr-1"]);
    assert_eq!(picked("rr-1,open-5k"), vec!["rr-1", "open-5k"]);
    assert_eq!(picked("busy"), vec!["busy-1", "busy-same-1"]);
    assert!(picked("rr-10").contains(&"rr-1000") && picked("rr-10").contains(&"rr-10000"));
}

#[test]
fn shard_counters_add_up() {
    let one = serde_json::json!({ "xsk": { "stats": { "port": { "rx_dropped": 2, "rx": 5 } } } });
    assert_eq!(xsk_counters(&one).get("port_rx_dropped"), Some(2.0));
    let two = serde_json::json!({ "xsk": { "shards": [
        { "stats": { "port": { "rx_dropped": 2, "rx": 5 } } },
        { "stats": { "port": { "rx_dropped": 3, "rx": 7 } } },
    ] } });
    let c = xsk_counters(&two);
    assert_eq!((c.get("port_rx_dropped"), c.get("port_rx")), (Some(5.0), Some(12.0)));
    assert!(xsk_counters(&serde_json::json!({ "requests": 3 })).values.is_empty(), "kernel server");
}

#[test]
fn log_tail() {
    let p = std::env::temp_dir().join(format!("rr-demo-tail-{}", std::process::id()));
    std::fs::write(&p, (1..=30).map(|i| format!("line {i}\n")).collect::<String>()).unwrap();
    let t = tail(&p, 3);
    assert!(t.ends_with("\n    line 28\n    line 29\n    line 30"), "{t}");
    assert!(!t.contains("line 27"), "{t}");
    let _ = std::fs::remove_file(&p);
    assert!(tail(&p, 3).starts_with("last lines of"), "a missing log is no error");
}

#[test]
fn counts_agreement() {
    let mut r = Row {
        backend: "xsk".into(),
        case: "rr-16".into(),
        round: 0,
        conns: 16,
        client_threads: 1,
        server_threads: 1,
        m: Metrics::median(&[]),
        errors: 0,
        server_requests: 1000,
        client_requests: 1000,
        server_trouble: BTreeMap::new(),
        client_tcp: BTreeMap::new(),
        server_tcp: BTreeMap::new(),
        client_recovery: None,
        loss_counters: BTreeMap::new(),
    };
    assert!(counts_agree(&r, 32));
    r.server_requests = 1020;
    assert!(counts_agree(&r, 32));
    r.server_requests = 999;
    assert!(!counts_agree(&r, 32), "the client cannot get more responses than the server sent");
    r.server_requests = 1100;
    assert!(!counts_agree(&r, 32));
}

#[test]
fn the_default_demo_runs_the_headline_and_full_runs_everything() {
    let names = |argv: &[&str]| -> Vec<&'static str> {
        let a = Args::try_parse_from(["rr-demo"].iter().chain(argv)).unwrap();
        cases()
            .into_iter()
            .filter(|c| selected(&a, c))
            .map(|c| c.name)
            .collect()
    };
    let headline = names(&[]);
    assert_eq!(
        headline,
        [
            "rr-16",
            "rr-256",
            "same-16",
            "busy-same-1",
            "open-5k",
            "loss1-16"
        ]
    );
    assert_eq!(names(&["--full"]).len(), cases().len());
    let quick = names(&["--quick"]);
    assert!(
        quick.len() > headline.len() && !quick.contains(&"rr-10000"),
        "{quick:?}"
    );
    assert_eq!(names(&["--only", "rr-10000"]), ["rr-10000"]);
    assert_eq!(names(&["--only", "busy"]), ["busy-1", "busy-same-1"]);
    // Redis runs with --full, --quick or --only (which picks), not in the default demo.
    let redis = |argv: &[&str]| {
        runs_redis(&Args::try_parse_from(["rr-demo"].iter().chain(argv)).unwrap())
    };
    assert!(
        !redis(&[]) && redis(&["--full"]) && redis(&["--quick"]) && redis(&["--only", "redis"])
    );
    assert!(Args::try_parse_from(["rr-demo", "--full", "--quick"]).is_err());
}

/// Every case with both backends, its figures as wide as they get in practice.
fn worst_case_summaries() -> BTreeMap<(String, String), Summary> {
    let rows: Vec<Row> = cases()
        .iter()
        .flat_map(|c| {
            ["xsk", "kernel"].map(|backend| Row {
                backend: backend.into(),
                case: c.name.into(),
                round: 0,
                conns: c.conns,
                client_threads: c.client_threads,
                server_threads: c.server_threads,
                m: Metrics {
                    rps: 1_234_567.0,
                    p50_us: 999.96,
                    p99_us: 207_392.6,
                    p999_us: 1_500_800.0,
                    cpu_us_per_req: 123.45,
                    ..Metrics::median(&[])
                },
                errors: 0,
                server_requests: 0,
                client_requests: 0,
                server_trouble: BTreeMap::new(),
                client_tcp: BTreeMap::new(),
                server_tcp: BTreeMap::new(),
                client_recovery: None,
                loss_counters: BTreeMap::new(),
            })
        })
        .collect();
    summaries(&rows, &cases())
}

#[test]
fn the_key_table_fits_100_columns() {
    let sums = worst_case_summaries();
    let t = medians_table(&cases(), &sums, false);
    let text = t.text();
    assert_eq!(text.lines().count(), cases().len() + 1, "{text}");
    let widest = text.lines().map(|l| l.chars().count()).max().unwrap();
    assert!(widest <= 100, "{widest} columns:\n{text}");
    assert!(
        text.starts_with("case ") && text.contains("xsk p99") && text.contains("1234567"),
        "{text}"
    );
    for sentence in legend(false) {
        assert!(wrap(&sentence, 100).iter().all(|l| l.len() <= 100));
    }
    // --wide has every column: the p99.9 and the recovery counters too.
    let wide = medians_table(&cases(), &sums, true).text();
    assert!(
        wide.contains("xsk p99.9") && wide.contains("x rto") && wide.contains("1.50s"),
        "{wide}"
    );
}

#[test]
fn markdown_table_matches_the_text_one() {
    let sums = worst_case_summaries();
    let md = medians_table(&cases(), &sums, false).markdown();
    let lines: Vec<&str> = md.lines().collect();
    assert_eq!(lines.len(), cases().len() + 2, "{md}");
    assert!(
        lines[0].starts_with("| case | xsk req/s | krn req/s | x/k |"),
        "{md}"
    );
    assert!(lines[1].starts_with("| --- | ---: |"), "{md}");
    // Every row has as many cells as the heads, and the figures the text table shows.
    let cells = |l: &str| l.matches(" | ").count();
    assert!(lines.iter().all(|l| cells(l) == cells(lines[0])), "{md}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("| loss1-same-16 | 1234567 | 1234567 | 1.00 | 1.00ms |")),
        "{md}"
    );
}

#[test]
fn time_left_extrapolates_from_the_runs_so_far() {
    assert_eq!(time_left(Duration::from_secs(10), 2, 6), "~20s left");
    assert_eq!(time_left(Duration::from_secs(90), 1, 3), "~3m left");
    assert_eq!(time_left(Duration::from_secs(9), 3, 3), "done");
}

#[test]
fn paired_takes_each_rounds_own_ratio() {
    let row = |backend: &str, case: &str, round: usize, cpu: f64| Row {
        backend: backend.into(),
        case: case.into(),
        round,
        conns: 1,
        client_threads: 1,
        server_threads: 1,
        m: Metrics { cpu_us_per_req: cpu, ..Metrics::median(&[]) },
        errors: 0,
        server_requests: 0,
        client_requests: 0,
        server_trouble: BTreeMap::new(),
        client_tcp: BTreeMap::new(),
        server_tcp: BTreeMap::new(),
        client_recovery: None,
        loss_counters: BTreeMap::new(),
    };
    // The machine slows down in round 1: the medians compare 15 with 20
    // (0.75), the rounds 10/10, 20/20 and 15/14.
    let rows = vec![
        row("xsk", "open-5k", 0, 10.0),
        row("kernel", "open-5k", 0, 10.0),
        row("kernel", "open-5k", 1, 20.0),
        row("xsk", "open-5k", 1, 20.0),
        row("xsk", "open-5k", 2, 15.0),
        row("kernel", "open-5k", 2, 14.0),
        row("xsk", "rr-1", 0, 5.0),
        row("kernel", "rr-1", 0, 4.0),
        // A round without its kernel run is left out.
        row("xsk", "rr-1", 1, 1.0),
    ];
    let cpu = |m: &Metrics| m.cpu_us_per_req;
    let p = paired_ratios(&rows, "open-5k", "kernel", cpu).unwrap();
    assert_eq!((p.rounds, p.at_most_kernel), (3, 2));
    assert_eq!((p.median, p.min), (1.0, 1.0));
    assert!((p.max - 15.0 / 14.0).abs() < 1e-12);
    assert_eq!(paired_ratios(&rows, "rr-1", "kernel", cpu), None, "one complete round is no statistic");
    assert_eq!(paired_ratios(&rows, "same-16", "kernel", cpu), None);
    // The own-receive figure is unknown in these rows (NaN): no rounds, no statistic.
    assert_eq!(paired_ratios(&rows, "open-5k", "kernel", |m| m.cpu_us_per_req_own_rx), None);
    assert_eq!(paired_ratios(&rows, "open-5k", "kernel", |m| m.p50_us), None, "no p50 in these rows either");
    // No uring runs: nothing to pair with.
    assert_eq!(paired_ratios(&rows, "open-5k", "uring", cpu), None);
    assert_eq!(p.kernel, "epoll");
}

#[test]
fn kernels_option() {
    let k = |argv: &[&str]| Args::try_parse_from(["rr-demo"].iter().chain(argv)).map(|a| a.kernels.0);
    assert_eq!(k(&[]).unwrap(), [Kernel::Epoll, Kernel::Uring], "both by default");
    assert_eq!(k(&["--kernels", "uring"]).unwrap(), [Kernel::Uring]);
    assert_eq!(k(&["--kernels", "uring,epoll"]).unwrap(), [Kernel::Uring, Kernel::Epoll], "in the order given");
    assert_eq!(k(&["--kernels", " epoll, uring,epoll,"]).unwrap(), [Kernel::Epoll, Kernel::Uring], "each once");
    assert_eq!(k(&["--kernels", "kernel"]).unwrap(), [Kernel::Epoll], "results.json's name for epoll");
    for bad in ["", ",", "bsd", "epoll,kqueue"] {
        assert!(k(&["--kernels", bad]).is_err(), "{bad:?}");
    }
    assert_eq!((Kernel::Epoll.backend(), Kernel::Uring.backend()), ("kernel", "uring"));
    assert_eq!((label("kernel"), label("uring"), label("xsk")), ("epoll", "uring", "xsk"));
    let help = Args::command().render_long_help().to_string();
    assert!(help.contains("--kernels") && help.contains("io_uring"), "{help}");
}

#[test]
fn every_kernel_runs_each_round_in_a_rotating_order() {
    let all = cases();
    let rr16 = all.iter().find(|c| c.name == "rr-16").unwrap();
    let both = [Kernel::Epoll, Kernel::Uring];
    assert_eq!(round_order(&both, rr16, 0), ["xsk", "kernel", "uring"]);
    assert_eq!(round_order(&both, rr16, 1), ["kernel", "uring", "xsk"]);
    assert_eq!(round_order(&both, rr16, 2), ["uring", "xsk", "kernel"]);
    assert_eq!(round_order(&both, rr16, 3), ["xsk", "kernel", "uring"]);
    // One kernel configuration: A B, B A as always.
    assert_eq!(round_order(&[Kernel::Epoll], rr16, 0), ["xsk", "kernel"]);
    assert_eq!(round_order(&[Kernel::Epoll], rr16, 1), ["kernel", "xsk"]);
    // A multi-threaded client on the uring server's own backend cannot run: uring skips it.
    let t2 = Case { same_client: true, ..all.iter().find(|c| c.name == "rr-256-t2").unwrap().clone() };
    assert!(Kernel::Uring.cannot_run(&t2).is_some() && Kernel::Epoll.cannot_run(&t2).is_none());
    assert_eq!(round_order(&both, &t2, 1), ["kernel", "xsk"]);
    // ... but the epoll client's threads drive a uring server.
    let t2 = all.iter().find(|c| c.name == "rr-256-t2").unwrap();
    assert_eq!(round_order(&both, t2, 0), ["xsk", "kernel", "uring"]);
    // Cases every configuration runs need no note (the Redis cases run on each of them too).
    let notes = skip_notes(&both, &[rr16.clone(), Case { name: "x-t2", ..t2.clone() }]);
    assert!(notes.is_empty(), "{notes:?}");
    let same_t2 = Case { name: "same-t2", same_client: true, ..t2.clone() };
    let notes = skip_notes(&both, &[rr16.clone(), same_t2]);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].starts_with("uring skips same-t2: "), "{notes:?}");
    assert!(skip_notes(&[Kernel::Epoll], &all).is_empty());
}

fn row(backend: &str, case: &str, round: usize, rps: f64, cpu: f64) -> Row {
    Row {
        backend: backend.into(),
        case: case.into(),
        round,
        conns: 16,
        client_threads: 1,
        server_threads: 1,
        m: Metrics { rps, cpu_us_per_req: cpu, p50_us: 100.0, p99_us: 200.0, ..Metrics::median(&[]) },
        errors: 0,
        server_requests: 0,
        client_requests: 0,
        server_trouble: BTreeMap::new(),
        client_tcp: BTreeMap::new(),
        server_tcp: BTreeMap::new(),
        client_recovery: None,
        loss_counters: BTreeMap::new(),
    }
}

#[test]
fn best_kernel_is_the_fastest_closed_loop_and_the_cheapest_open_loop() {
    let all = cases();
    let get = |n: &str| all.iter().find(|c| c.name == n).unwrap().clone();
    let rows = vec![
        // Closed loop: uring serves more requests (at more CPU per request): it is the best.
        row("xsk", "rr-16", 0, 100_000.0, 5.0),
        row("kernel", "rr-16", 0, 80_000.0, 6.0),
        row("uring", "rr-16", 0, 90_000.0, 7.0),
        row("xsk", "rr-16", 1, 110_000.0, 4.0),
        row("uring", "rr-16", 1, 95_000.0, 8.0),
        row("kernel", "rr-16", 1, 85_000.0, 6.0),
        // Open loop: the rate is fixed; epoll spends less CPU per request: it is the best,
        // though uring's req/s came out a little higher.
        row("xsk", "open-5k", 0, 5000.0, 3.0),
        row("kernel", "open-5k", 0, 4999.0, 4.0),
        row("uring", "open-5k", 0, 5001.0, 5.0),
        row("xsk", "open-5k", 1, 5000.0, 3.0),
        row("kernel", "open-5k", 1, 4999.0, 5.0),
        row("uring", "open-5k", 1, 5001.0, 4.5),
        // Only epoll ran (old files): it is the best.
        row("xsk", "rr-1", 0, 10.0, 1.0),
        row("kernel", "rr-1", 0, 9.0, 1.0),
        // An unknown figure loses; a tie goes to epoll.
        row("kernel", "same-16", 0, f64::NAN, 1.0),
        row("uring", "same-16", 0, 1.0, 1.0),
        row("kernel", "busy-1", 0, 7.0, 1.0),
        row("uring", "busy-1", 0, 7.0, 1.0),
    ];
    let cs: Vec<Case> = ["rr-16", "open-5k", "rr-1", "same-16", "busy-1"].map(get).to_vec();
    let sums = summaries(&rows, &cs);
    let best = |n: &str| best_kernel(&get(n), &sums).map(|s| s.backend.clone());
    assert_eq!(best("rr-16").as_deref(), Some("uring"));
    assert_eq!(best("open-5k").as_deref(), Some("kernel"));
    assert_eq!(best("rr-1").as_deref(), Some("kernel"));
    assert_eq!(best("same-16").as_deref(), Some("uring"));
    assert_eq!(best("busy-1").as_deref(), Some("kernel"));
    assert_eq!(best("rr-256"), None);
    // The medians table compares with the best and names it.
    let text = medians_table_with(&cs, &sums, false, true).text();
    let line = |n: &str| text.lines().find(|l| l.starts_with(&format!("{n} "))).unwrap().to_string();
    assert!(line("rr-16").contains(" 92500 ") && line("rr-16").trim_end().ends_with("uring"), "{text}");
    assert!(line("open-5k").trim_end().ends_with("epoll"), "{text}");
    assert!(!text.contains("same-16") && !text.contains("busy-1"), "no xsk runs: no row\n{text}");
    // The key text table has no room for the krn column: a line below names them.
    assert!(!medians_table(&cs, &sums, false).text().contains("uring"));
    assert_eq!(
        krn_line(&cs, &sums).as_deref(),
        Some("krn (the best kernel configuration): uring in rr-16; epoll in open-5k, rr-1.")
    );
    // Every configuration, the best starred, with xsk's ratio to each.
    let every = kernels_table(&cs, &sums).text();
    let l: Vec<&str> = every.lines().filter(|l| l.starts_with("rr-16 ")).collect();
    assert_eq!(l.len(), 3, "the stack's own row, then each configuration\n{every}");
    assert!(l[0].contains(" xsk ") && l[0].contains(" 105000 "), "{every}");
    assert!(l[1].contains(" epoll  ") && l[1].contains(" 82500 ") && l[1].contains(" 1.27 "), "{every}");
    assert!(l[2].contains("uring*") && l[2].contains(" 1.14 "), "{every}");
    assert!(every.lines().any(|l| l.starts_with("open-5k") && l.contains("epoll*")), "{every}");
    // Per-round ratios pair each xsk run with the best configuration's run of its round.
    let p = paired_ratios(&rows, "rr-16", "uring", |m| m.cpu_us_per_req).unwrap();
    assert_eq!((p.kernel.as_str(), p.rounds, p.min, p.max), ("uring", 2, 0.5, 5.0 / 7.0));
}

#[test]
fn results_with_uring_rows_load_and_report() {
    let rows = vec![
        row("xsk", "rr-16", 0, 100_000.0, 5.0),
        row("kernel", "rr-16", 0, 80_000.0, 6.0),
        row("uring", "rr-16", 0, 90_000.0, 7.0),
        row("uring", "busy-same-1", 0, 20_000.0, 9.0),
        row("xsk", "busy-same-1", 0, 30_000.0, 8.0),
    ];
    let text = serde_json::to_string(&serde_json::json!({ "runs": &rows })).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let back: Vec<Row> = serde_json::from_value(v["runs"].clone()).unwrap();
    assert_eq!(back.iter().map(|r| r.backend.as_str()).collect::<Vec<_>>(), ["xsk", "kernel", "uring", "uring", "xsk"]);
    assert_eq!(back[2].m.rps, 90_000.0);
    let cs: Vec<Case> = cases().into_iter().filter(|c| back.iter().any(|r| r.case == c.name)).collect();
    let sums = summaries(&back, &cs);
    assert_eq!(sums.get(&("rr-16".into(), "uring".into())).map(|s| s.runs), Some(1));
    assert_eq!(best_kernel(&cs[0], &sums).map(|s| s.backend.as_str()), Some("uring"));
    // busy-same-1 has no epoll run: said once.
    assert_eq!(missing_kernels(&back, &cs), ["epoll: no runs of busy-same-1 (failed or not selected)."]);
    let md = kernels_table(&cs, &sums).markdown();
    assert!(md.starts_with("| case | kernel | req/s | x/k |"), "{md}");
    assert!(md.contains("| rr-16 | uring* | 90000 | 1.11 |") && md.contains("| busy-same-1 | uring* |"), "{md}");
    let meta = serde_json::json!({ "kernels": ["epoll", "uring"], "rounds": 1, "duration_s": 1.0 });
    assert_eq!(meta_kernels(&meta), [Kernel::Epoll, Kernel::Uring]);
    assert!(plot_text(&cs, &meta).subtitle.contains("rotating xsk/epoll/uring"));
    assert_eq!(meta_kernels(&serde_json::json!({})), [Kernel::Epoll], "files from before --kernels");
    report(&back, &cs, Path::new("/nonexistent"), &meta, Show { markdown: true, ..Show::default() }).unwrap();
    let plot = plot_cases(&sums, &cs);
    assert_eq!(plot[0].kernel.map(|b| b.rps), Some(90_000.0), "the plot's kernel bars: the best");
}

#[test]
fn rows_survive_the_json_round_trip() {
    // Unknown figures are NaN, which JSON writes as null: --from-json must read them back.
    let r = Row {
        backend: "kernel".into(),
        case: "rr-16".into(),
        round: 1,
        conns: 16,
        client_threads: 1,
        server_threads: 2,
        m: Metrics { rps: 1000.0, ..Metrics::median(&[]) },
        errors: 0,
        server_requests: 5,
        client_requests: 5,
        server_trouble: BTreeMap::new(),
        client_tcp: BTreeMap::new(),
        server_tcp: BTreeMap::new(),
        client_recovery: None,
        loss_counters: BTreeMap::new(),
    };
    let text = serde_json::to_string(&serde_json::json!({ "runs": [&r] })).unwrap();
    assert!(text.contains("\"server_drops\":null"), "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let back: Vec<Row> = serde_json::from_value(v["runs"].clone()).unwrap();
    assert_eq!(back[0].m.rps, 1000.0);
    assert!(back[0].m.server_drops.is_nan() && back[0].m.p50_us.is_nan());
    // Files written before the newer columns existed still load.
    let old = r#"[{"backend":"xsk","case":"rr-1","round":0,"conns":1,"rps":5.0,"p50_us":1.0,"p99_us":2.0,
        "p999_us":3.0,"cpu_us_per_req":4.0,"cpu_us_per_req_machine":null,"errors":0}]"#;
    let back: Vec<Row> = serde_json::from_str(old).unwrap();
    assert!(back[0].m.setup_s.is_nan() && back[0].m.cpu_us_per_req_machine.is_nan());
    assert_eq!((back[0].client_threads, back[0].server_threads), (1, 1), "files from before --threads");
    // ... and before the loss-recovery figures: unknown, and the retx column as it was.
    let m = &back[0].m;
    assert!(m.server_tail_probes.is_nan() && m.server_spurious_probes.is_nan() && m.server_rto_retransmits.is_nan());
    assert!(m.retrans_total.is_nan() && back[0].client_recovery.is_none() && back[0].loss_counters.is_empty());
    let old = r#"[{"backend":"kernel","case":"loss1-16","round":0,"conns":16,"errors":0,
        "client_retrans":30.0,"server_retrans":12.0}]"#;
    let back: Vec<Row> = serde_json::from_str(old).unwrap();
    assert_eq!(back[0].m.retx(), 42.0, "old files: RetransSegs of the client and a kernel server");
    // New rows keep their recovery figures.
    let r = Row {
        m: Metrics { retrans_total: 7.0, server_tail_probes: 3.0, server_spurious_probes: 1.0, ..r.m.clone() },
        client_recovery: Some(RecoveryCounts { tail_probes: 2, ..RecoveryCounts::default() }),
        loss_counters: [("nft_dropped".to_string(), 5.0)].into(),
        ..r
    };
    let back: Row = serde_json::from_value(serde_json::to_value(&r).unwrap()).unwrap();
    assert_eq!((back.m.retx(), back.m.server_tail_probes, back.m.server_spurious_probes), (7.0, 3.0, 1.0));
    assert_eq!(back.client_recovery.map(|c| c.tail_probes), Some(2));
    assert_eq!(back.loss_counters.get("nft_dropped"), Some(&5.0));
    assert!(back.m.server_rto_retransmits.is_nan());
}
