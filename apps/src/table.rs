//! Result tables, as text a person reads in a terminal and as Markdown for the studies in
//! `docs/`, from the same cells: the figures in a study are then the ones the run printed.

/// A table of strings: the first column (the row's name) left-aligned, the others right.
/// Columns may come in groups (xsk and kernel figures of one measure): one space between the
/// columns of a group, two between groups, so a key table fits 100 characters.
#[derive(Clone, Debug, Default)]
pub struct Table {
    heads: Vec<String>,
    /// Which columns start a group; by default every one does.
    group_start: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub fn new<S: AsRef<str>>(heads: &[S]) -> Table {
        Table {
            heads: heads.iter().map(|h| h.as_ref().to_string()).collect(),
            group_start: vec![true; heads.len()],
            rows: Vec::new(),
        }
    }

    /// A table whose columns come in `groups`, each a list of heads.
    pub fn grouped<S: AsRef<str>>(groups: &[Vec<S>]) -> Table {
        let heads: Vec<&str> = groups.iter().flatten().map(|h| h.as_ref()).collect();
        let mut t = Table::new(&heads);
        t.group_start = groups
            .iter()
            .flat_map(|g| (0..g.len()).map(|i| i == 0))
            .collect();
        t
    }

    fn gap(&self, col: usize) -> &'static str {
        if self.group_start[col] {
            "  "
        } else {
            " "
        }
    }

    /// Adds a row; missing cells are empty, extra ones an error of the caller.
    pub fn row(&mut self, mut cells: Vec<String>) {
        assert!(
            cells.len() <= self.heads.len(),
            "{} cells for {} columns",
            cells.len(),
            self.heads.len()
        );
        cells.resize(self.heads.len(), String::new());
        self.rows.push(cells);
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    fn widths(&self) -> Vec<usize> {
        (0..self.heads.len())
            .map(|i| {
                self.rows
                    .iter()
                    .map(|r| r[i].chars().count())
                    .chain([self.heads[i].chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect()
    }

    /// The width of the text form's longest line.
    pub fn width(&self) -> usize {
        let w = self.widths();
        w.iter().sum::<usize>() + (1..w.len()).map(|i| self.gap(i).len()).sum::<usize>()
    }

    /// Aligned text, one line per row after the heads, each line ending in a newline.
    pub fn text(&self) -> String {
        let w = self.widths();
        let line = |cells: &[String]| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate() {
                if i > 0 {
                    s.push_str(self.gap(i));
                }
                let pad = w[i] - c.chars().count();
                if i == 0 {
                    s.push_str(c);
                    // No trailing blanks on the last column of a one-column table either.
                    if cells.len() > 1 {
                        s.extend(std::iter::repeat_n(' ', pad));
                    }
                } else {
                    s.extend(std::iter::repeat_n(' ', pad));
                    s.push_str(c);
                }
            }
            s.push('\n');
            s
        };
        let mut out = line(&self.heads);
        for r in &self.rows {
            out += &line(r);
        }
        out
    }

    /// A GitHub-flavoured Markdown table; `|` in a cell is escaped.
    pub fn markdown(&self) -> String {
        let esc = |c: &String| c.replace('|', "\\|");
        let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | "));
        let mut out = line(self.heads.iter().map(esc).collect());
        out += &line(
            (0..self.heads.len())
                .map(|i| if i == 0 { "---".into() } else { "---:".into() })
                .collect(),
        );
        for r in &self.rows {
            out += &line(r.iter().map(esc).collect());
        }
        out
    }
}

/// A latency in microseconds with a unit that keeps it short: `79.0us`, `3.28ms`, `1.00s`;
/// `-` when unknown.
pub fn latency(us: f64) -> String {
    if !us.is_finite() {
        "-".into()
    } else if us < 999.95 {
        format!("{us:.1}us")
    } else if us < 999_950.0 {
        // The thresholds are where rounding would add a digit (999.96us is 1.00ms).
        let ms = us / 1e3;
        if ms < 99.995 {
            format!("{ms:.2}ms")
        } else {
            format!("{ms:.1}ms")
        }
    } else {
        format!("{:.2}s", us / 1e6)
    }
}

/// A figure with `digits` decimals, `-` when unknown.
pub fn fixed(v: f64, digits: usize) -> String {
    if v.is_finite() {
        format!("{v:.digits$}")
    } else {
        "-".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_aligns_and_measures() {
        let mut t = Table::new(&["case", "req/s"]);
        t.row(vec!["rr-16".into(), "194921".into()]);
        t.row(vec!["busy-same-1".into(), "9".into()]);
        let s = t.text();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(
            lines,
            [
                "case          req/s",
                "rr-16        194921",
                "busy-same-1       9"
            ]
        );
        assert_eq!(t.width(), lines.iter().map(|l| l.len()).max().unwrap());
    }

    #[test]
    fn groups_are_set_apart() {
        let mut t = Table::grouped(&[vec!["case"], vec!["x", "k"], vec!["r"]]);
        t.row(vec!["a".into(), "1".into(), "2".into(), "3".into()]);
        assert_eq!(t.text(), "case  x k  r\na     1 2  3\n");
        assert_eq!(t.width(), 12);
        assert!(t.markdown().starts_with("| case | x | k | r |\n"));
    }

    #[test]
    fn markdown_has_a_rule_and_escapes_bars() {
        let mut t = Table::new(&["case", "note"]);
        t.row(vec!["a|b".into(), "1".into()]);
        t.row(vec!["c".into()]);
        assert_eq!(
            t.markdown(),
            "| case | note |\n| --- | ---: |\n| a\\|b | 1 |\n| c |  |\n"
        );
    }

    #[test]
    fn latencies_stay_short() {
        assert_eq!(latency(79.04), "79.0us");
        assert_eq!(latency(3278.8), "3.28ms");
        assert_eq!(latency(207_392.6), "207.4ms");
        assert_eq!(latency(1_000_300.0), "1.00s");
        assert_eq!(latency(f64::NAN), "-");
        for us in [0.0, 999.94, 999.96, 99_996.0, 999_949.0, 999_999.0, 12e6] {
            assert!(latency(us).len() <= 7, "{us}: {}", latency(us));
        }
        assert_eq!(fixed(1.234, 2), "1.23");
        assert_eq!(fixed(f64::NAN, 2), "-");
    }
}
