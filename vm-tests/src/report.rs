//! Human-readable tables of the reports (the JSON is the machine-readable form).

use std::fmt::Write as _;

/// A two-column table: key, value (values may span lines).
#[derive(Debug, Default)]
pub struct KvTable {
    rows: Vec<(String, String)>,
}

/// A scenario's outcome as its report records it: `result` "pass" or "FAIL", and the error
/// chain in `failure`.
pub fn record_outcome(outcome: &anyhow::Result<()>, result: &mut String, failure: &mut Option<String>) {
    match outcome {
        Ok(()) => *result = "pass".into(),
        Err(e) => {
            *result = "FAIL".into();
            *failure = Some(format!("{e:#}"));
        }
    }
}

/// What every scenario's report starts with, in its JSON and its table: the scenario, its
/// result ("pass" or "FAIL", and the error chain in `failure`) and the host it ran on.
/// Reports hold it with `#[serde(flatten)]`, so these keys stay at the top of their JSON.
#[derive(Debug, Default, serde::Serialize)]
pub struct ReportHead {
    pub scenario: &'static str,
    pub result: String,
    pub failure: Option<String>,
    pub host_kernel: String,
    pub qemu: String,
}

impl ReportHead {
    /// A head for `scenario` on this host; the result comes with [`ReportHead::record`].
    pub fn new(scenario: &'static str, host_kernel: &str, qemu: &str) -> Self {
        ReportHead { scenario, host_kernel: host_kernel.into(), qemu: qemu.into(), ..ReportHead::default() }
    }

    /// Records the scenario's outcome.
    pub fn record(&mut self, outcome: &anyhow::Result<()>) {
        record_outcome(outcome, &mut self.result, &mut self.failure);
    }

    /// The table's first rows: the result and the host.
    pub fn rows(&self, t: &mut KvTable) {
        t.head(&self.result, self.failure.as_deref(), &self.host_kernel, &self.qemu);
    }
}

impl KvTable {
    pub fn new() -> Self {
        KvTable::default()
    }

    pub fn row(&mut self, k: impl Into<String>, v: impl Into<String>) -> &mut Self {
        self.rows.push((k.into(), v.into()));
        self
    }

    /// The first rows of every scenario's table: its result (with the failure, if any) and the
    /// host.
    pub fn head(&mut self, result: &str, failure: Option<&str>, host_kernel: &str, qemu: &str) -> &mut Self {
        self.row(
            "result",
            match failure {
                None => result.to_string(),
                Some(f) => format!("{result}: {f}"),
            },
        );
        self.row("host", format!("Linux {host_kernel}, QEMU {qemu}"))
    }

    /// The host and accelerator rows of a report that records them.
    pub fn machine(&mut self, host_kernel: &str, qemu: &str, accel: &str, note: &str) -> &mut Self {
        self.row("host", format!("Linux {host_kernel}, QEMU {qemu}"));
        self.accel(accel, note)
    }

    /// The accelerator row (KVM or TCG, and why).
    pub fn accel(&mut self, accel: &str, note: &str) -> &mut Self {
        self.row(
            "accel",
            if note.is_empty() {
                accel.to_string()
            } else {
                format!("{accel} ({note})")
            },
        )
    }

    pub fn render(&self, title: &str) -> String {
        let w = self.rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        let mut s = format!("== {title}\n");
        for (k, v) in &self.rows {
            let mut lines = v.lines();
            let _ = writeln!(s, "  {k:<w$}  {}", lines.next().unwrap_or(""));
            for l in lines {
                let _ = writeln!(s, "  {:<w$}  {l}", "");
            }
        }
        s
    }
}

/// A table with a header row; columns padded to their widest cell.
#[derive(Debug, Default)]
pub struct Grid {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Grid {
    pub fn new(header: &[&str]) -> Self {
        Grid {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    pub fn render(&self) -> String {
        let n = self.header.len();
        let mut w = vec![0usize; n];
        for r in std::iter::once(&self.header).chain(&self.rows) {
            for (i, c) in r.iter().enumerate().take(n) {
                w[i] = w[i].max(c.chars().count());
            }
        }
        let line = |r: &Vec<String>| {
            let mut s = String::from(" ");
            for (i, c) in r.iter().enumerate().take(n) {
                if i + 1 == n {
                    let _ = write!(s, " {c}");
                } else {
                    let _ = write!(s, " {c:<width$}", width = w[i]);
                }
            }
            s.trim_end().to_string() + "\n"
        };
        let mut s = line(&self.header);
        for r in &self.rows {
            s.push_str(&line(r));
        }
        s
    }
}

/// `loaded A B; built in C` (the NIC modules of a guest kernel).
pub fn modules(loaded: &[String], builtin: &[String]) -> String {
    format!(
        "loaded {}{}",
        loaded.join(" "),
        if builtin.is_empty() {
            String::new()
        } else {
            format!("; built in {}", builtin.join(" "))
        }
    )
}

/// The server column of the tables: `xsk ATTACH`, or `kernel` (which has no attach mode).
pub fn server_cell(backend: &str, attach: &str) -> String {
    if backend == "xsk" {
        format!("xsk {attach}")
    } else {
        backend.to_string()
    }
}

/// `1234.5` -> `1,234`.
pub fn thousands(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let n = x.round() as i64;
    let s = n.abs().to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(thousands(1234567.4), "1,234,567");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(f64::NAN), "-");
        let mut t = KvTable::new();
        t.row("a", "1").row("long key", "x\ny");
        assert_eq!(
            t.render("T"),
            "== T\n  a         1\n  long key  x\n            y\n"
        );
        let mut g = Grid::new(&["c1", "column2", "c3"]);
        g.row(vec!["xx".into(), "y".into(), "z z".into()]);
        assert_eq!(g.render(), "  c1 column2 c3\n  xx y       z z\n");
        let mut t = KvTable::new();
        t.machine("6.1.0", "7.2", "tcg", "")
            .machine("6.1.0", "7.2", "kvm", "probed");
        assert_eq!(
            t.render("M"),
            "== M\n  host   Linux 6.1.0, QEMU 7.2\n  accel  tcg\n  host   Linux 6.1.0, QEMU 7.2\n  accel  kvm (probed)\n"
        );
        let (mut result, mut failure) = (String::new(), None);
        record_outcome(&Err(anyhow::anyhow!("inner").context("outer")), &mut result, &mut failure);
        assert_eq!((result.as_str(), failure.as_deref()), ("FAIL", Some("outer: inner")));
        let mut t = KvTable::new();
        t.head(&result, failure.as_deref(), "6.1.0", "7.2");
        assert_eq!(t.render("H"), "== H\n  result  FAIL: outer: inner\n  host    Linux 6.1.0, QEMU 7.2\n");
        record_outcome(&Ok(()), &mut result, &mut failure);
        assert_eq!(result, "pass");
        assert_eq!(server_cell("xsk", "drv"), "xsk drv");
        assert_eq!(server_cell("kernel", ""), "kernel");
        assert_eq!(modules(&["virtio_net".into()], &[]), "loaded virtio_net");
        assert_eq!(
            modules(&["a".into(), "b".into()], &["c".into()]),
            "loaded a b; built in c"
        );
    }

    #[test]
    fn a_report_starts_with_its_head() {
        #[derive(serde::Serialize)]
        struct Report {
            #[serde(flatten)]
            head: ReportHead,
            runs: u32,
        }
        let mut head = ReportHead::new("smoke", "6.18.0", "8.2.0");
        head.record(&Err(anyhow::anyhow!("no guest")));
        let text = serde_json::to_string(&Report { head, runs: 2 }).unwrap();
        assert_eq!(
            text,
            r#"{"scenario":"smoke","result":"FAIL","failure":"no guest","host_kernel":"6.18.0","qemu":"8.2.0","runs":2}"#
        );
    }
}
