//! Live figures of a running server, built generically from whatever counters it exposes: the
//! counter structs are serialized with serde and flattened to `name value` pairs, so a counter
//! added to a stats struct shows up in the interval lines, the SIGUSR1 dump and the Prometheus
//! endpoint without further edits here.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Flattened counters at one instant. Names join the serde field path with `_`
/// (`xsk.port.xdp.rx_dropped` becomes `xsk_port_xdp_rx_dropped`).
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub at: Instant,
    pub values: BTreeMap<String, f64>,
}

impl Snapshot {
    /// Flattens `v` (numbers and booleans; strings, nulls and arrays are left out).
    pub fn new(v: &Value) -> Snapshot {
        let mut values = BTreeMap::new();
        flatten_into("", v, &mut values);
        Snapshot { at: Instant::now(), values }
    }

    pub fn get(&self, name: &str) -> Option<f64> {
        self.values.get(name).copied()
    }

    /// `name value` lines, one per counter: the SIGUSR1 dump.
    pub fn dump(&self) -> String {
        let mut s = String::new();
        for (k, v) in &self.values {
            let _ = writeln!(s, "  {k} {}", fmt_num(*v));
        }
        s
    }
}

fn flatten_into(prefix: &str, v: &Value, out: &mut BTreeMap<String, f64>) {
    let name = |k: &str| {
        let k: String = k.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
        if prefix.is_empty() {
            k
        } else {
            format!("{prefix}_{k}")
        }
    };
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                flatten_into(&name(k), v, out);
            }
        }
        Value::Number(n) => {
            if let Some(x) = n.as_f64() {
                out.insert(prefix.to_string(), x);
            }
        }
        Value::Bool(b) => {
            out.insert(prefix.to_string(), f64::from(u8::from(*b)));
        }
        Value::Null | Value::String(_) | Value::Array(_) => {}
    }
}

fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// Whether a counter counts something lost or refused: drops by reason, full or empty rings,
/// invalid descriptors, errors, retries. Matched by name so that new reasons need no edit.
/// (`tx_ring_empty_descs` is not one: copy-mode TX ends every kick by finding the ring empty.)
pub fn is_trouble(name: &str) -> bool {
    ["drop", "full", "fill_ring_empty", "invalid", "error", "retries", "fill_short", "oversize", "lost"]
        .iter()
        .any(|w| name.contains(w))
}

/// Whether a counter counts frames or connections dropped (by any reason).
pub fn is_drop(name: &str) -> bool {
    name.contains("drop")
}

/// One line for `--stats-interval`: rates over the interval for requests, RX/TX frames and
/// kicks, the open connections, the stack's retransmissions and tail-loss probes in the interval
/// (`retx N (S spurious) probes N (S spurious)`), and every trouble counter that moved
/// (`name+delta`).
pub fn interval_line(prev: &Snapshot, cur: &Snapshot) -> String {
    let dt = cur.at.saturating_duration_since(prev.at).as_secs_f64().max(1e-9);
    let delta = |k: &str| Some(cur.get(k)? - prev.get(k).unwrap_or(0.0));
    let rate = |k: &str| delta(k).map(|d| d / dt);
    let mut s = format!(
        "stats: {:>7.1}s {:>9} req/s {:>6} conns",
        cur.get("uptime_s").unwrap_or(0.0),
        crate::group_digits(rate("requests").unwrap_or(0.0).round() as u64),
        fmt_num(cur.get("connections").unwrap_or(0.0)),
    );
    // Frame and kick counters by suffix, wherever the backend put them.
    for (label, suffix) in [("rx", "xsk_rx_frames"), ("tx", "device_tx_frames"), ("kicks", "port_kicks")] {
        if let Some(k) = cur.values.keys().find(|k| k.ends_with(suffix)) {
            let _ = write!(s, " {:>8} {label}/s", crate::group_digits(rate(k).unwrap_or(0.0).round() as u64));
        }
    }
    // Loss recovery (xsk): retransmissions (timeouts and fast) and tail-loss probes sent in the
    // interval, with the ones the peers showed were not needed. Counts, not rates: they are rare.
    let moved_by = |suffixes: &[&str]| {
        let keys: Vec<&String> = cur.values.keys().filter(|k| suffixes.iter().any(|s| k.ends_with(s))).collect();
        (!keys.is_empty()).then(|| keys.iter().filter_map(|k| delta(k)).sum::<f64>())
    };
    let retx = moved_by(&["recovery_rto_retransmits", "recovery_fast_retransmits", "recovery_hole_retransmits"]);
    let probes = moved_by(&["recovery_tail_probes"]);
    if let (Some(retx), Some(probes)) = (retx, probes) {
        let spurious = |n: Option<f64>| match n {
            Some(n) if n > 0.0 => format!(" ({} spurious)", fmt_num(n)),
            _ => String::new(),
        };
        let _ = write!(
            s,
            "  retx {}{} probes {}{}",
            fmt_num(retx),
            spurious(moved_by(&["recovery_spurious_retransmits"])),
            fmt_num(probes),
            spurious(moved_by(&["recovery_spurious_probes"]))
        );
    }
    let moved: Vec<String> = cur
        .values
        .keys()
        .filter(|k| is_trouble(k))
        .filter_map(|k| delta(k).filter(|d| *d > 0.0).map(|d| format!("{k}+{}", fmt_num(d))))
        .collect();
    if moved.is_empty() {
        s += "  drops/errors: none";
    } else {
        let _ = write!(s, "  drops/errors: {}", moved.join(" "));
    }
    s
}

/// The Prometheus text exposition format (version 0.0.4) of a snapshot: one `untyped` sample
/// per counter (the flattened structs do not say which fields are gauges), each with the
/// given labels.
pub fn prometheus(prefix: &str, labels: &[(&str, &str)], snap: &Snapshot) -> String {
    let labels = if labels.is_empty() {
        String::new()
    } else {
        let inner: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")))
            .collect();
        format!("{{{}}}", inner.join(","))
    };
    let mut s = String::new();
    for (k, v) in &snap.values {
        let name = format!("{prefix}_{k}");
        let _ = writeln!(s, "# TYPE {name} untyped");
        let _ = writeln!(s, "{name}{labels} {}", fmt_num(*v));
    }
    s
}

/// A tiny HTTP endpoint on kernel TCP that serves the latest published text at `/metrics`.
/// The server's loop publishes; this thread only copies the text out, so it never touches the
/// stack. One request at a time, each bounded in size and time: a scraper, not a web server.
pub struct MetricsEndpoint {
    text: Arc<Mutex<String>>,
    addr: SocketAddr,
}

/// Largest request head read; longer ones are answered 431 and closed.
const MAX_REQUEST: usize = 8192;
const IO_TIMEOUT: Duration = Duration::from_secs(2);

impl MetricsEndpoint {
    pub fn start(addr: SocketAddr) -> io::Result<MetricsEndpoint> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let text = Arc::new(Mutex::new(String::new()));
        let shared = Arc::clone(&text);
        std::thread::Builder::new().name("metrics".into()).spawn(move || {
            for conn in listener.incoming() {
                match conn {
                    Ok(c) => {
                        if let Err(e) = serve_one(c, &shared) {
                            tracing::debug!("metrics request: {e}");
                        }
                    }
                    Err(e) => {
                        tracing::warn!("metrics endpoint: accept failed: {e}");
                        std::thread::sleep(Duration::from_millis(100));
                    }
                }
            }
        })?;
        Ok(MetricsEndpoint { text, addr })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn publish(&self, text: String) {
        // A poisoned lock only means the serving thread panicked mid-copy; the text is whole.
        *self.text.lock().unwrap_or_else(|e| e.into_inner()) = text;
    }
}

fn serve_one(mut c: TcpStream, text: &Mutex<String>) -> io::Result<()> {
    c.set_read_timeout(Some(IO_TIMEOUT))?;
    c.set_write_timeout(Some(IO_TIMEOUT))?;
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && !buf.windows(2).any(|w| w == b"\n\n") {
        if buf.len() > MAX_REQUEST {
            return respond(&mut c, "431 Request Header Fields Too Large", "text/plain", "request too large\n");
        }
        let n = c.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let line = buf.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    match (method, path.split('?').next().unwrap_or("")) {
        ("GET", "/metrics") => {
            let body = text.lock().unwrap_or_else(|e| e.into_inner()).clone();
            respond(&mut c, "200 OK", "text/plain; version=0.0.4; charset=utf-8", &body)
        }
        ("GET", "/") => respond(&mut c, "200 OK", "text/plain", "rr-server: counters at /metrics\n"),
        ("GET", _) => respond(&mut c, "404 Not Found", "text/plain", "not found; try /metrics\n"),
        _ => respond(&mut c, "405 Method Not Allowed", "text/plain", "GET only\n"),
    }
}

fn respond(c: &mut TcpStream, status: &str, ctype: &str, body: &str) -> io::Result<()> {
    let head = format!(
        "HTTP/1.0 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    c.write_all(head.as_bytes())?;
    c.write_all(body.as_bytes())?;
    c.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn snap(v: Value, at: Instant) -> Snapshot {
        Snapshot { at, ..Snapshot::new(&v) }
    }

    #[test]
    fn flattens_nested_counters() {
        let s = Snapshot::new(&json!({
            "requests": 5, "xsk": { "port": { "xdp": { "rx_dropped": 2 } }, "name": "x", "ok": true },
            "list": [1, 2], "none": null, "ratio": 0.5
        }));
        let names: Vec<&str> = s.values.keys().map(String::as_str).collect();
        assert_eq!(names, ["ratio", "requests", "xsk_ok", "xsk_port_xdp_rx_dropped"]);
        assert_eq!(s.get("xsk_port_xdp_rx_dropped"), Some(2.0));
        assert_eq!(s.dump(), "  ratio 0.5\n  requests 5\n  xsk_ok 1\n  xsk_port_xdp_rx_dropped 2\n");
    }

    #[test]
    fn interval_line_has_rates_and_moved_drops() {
        let t0 = Instant::now();
        let a = snap(
            json!({"requests": 1000, "connections": 16, "uptime_s": 1.0,
                   "xsk": {"rx_frames": 0, "device": {"tx_frames": 0}, "port": {"port": {"kicks": 0}},
                           "syn_dropped": 1, "rx_fill_ring_empty_descs": 0}}),
            t0,
        );
        let b = snap(
            json!({"requests": 3000, "connections": 16, "uptime_s": 3.0,
                   "xsk": {"rx_frames": 4000, "device": {"tx_frames": 2000}, "port": {"port": {"kicks": 200}},
                           "syn_dropped": 1, "rx_fill_ring_empty_descs": 7}}),
            t0 + Duration::from_secs(2),
        );
        let line = interval_line(&a, &b);
        assert!(line.contains(" 1,000 req/s"), "{line}");
        assert!(line.contains("16 conns"), "{line}");
        assert!(line.contains("2,000 rx/s") && line.contains("1,000 tx/s") && line.contains("100 kicks/s"), "{line}");
        assert!(line.ends_with("drops/errors: xsk_rx_fill_ring_empty_descs+7"), "{line}");
        assert!(!line.contains("retx") && !line.contains("probes"), "no recovery counters, no field: {line}");
        let quiet = interval_line(&b, &snap(b.values.iter().map(|(k, v)| (k.clone(), json!(v))).collect(), t0));
        assert!(quiet.ends_with("drops/errors: none"), "{quiet}");
    }

    #[test]
    fn interval_line_shows_recovery() {
        let t0 = Instant::now();
        let rec = |rto: u64, fast: u64, tlp: u64, sr: u64, sp: u64| {
            json!({"requests": 0, "uptime_s": 1.0, "xsk": {"rx_frames": 0, "recovery": {
                "rto_retransmits": rto, "fast_retransmits": fast, "tail_probes": tlp,
                "spurious_retransmits": sr, "spurious_probes": sp}}})
        };
        let a = snap(rec(1, 1, 10, 0, 2), t0);
        let b = snap(rec(3, 2, 15, 0, 3), t0 + Duration::from_secs(1));
        let line = interval_line(&a, &b);
        assert!(line.contains("  retx 3 probes 5 (1 spurious)  drops/errors: none"), "{line}");
        let c = snap(rec(3, 2, 15, 1, 3), t0 + Duration::from_secs(2));
        assert!(interval_line(&b, &c).contains("  retx 0 (1 spurious) probes 0  drops/errors"));
        // Not trouble: retransmissions are the recovery working, not a drop or an error.
        for k in b.values.keys() {
            assert!(!is_trouble(k), "{k}");
        }
    }

    #[test]
    fn prometheus_names_recovery_counters() {
        let s = Snapshot::new(&json!({"xsk": {"recovery": {"tail_probes": 4, "spurious_probes": 1}}}));
        let t = prometheus("rr_server", &[("backend", "xsk")], &s);
        assert!(t.contains("# TYPE rr_server_xsk_recovery_tail_probes untyped\n"), "{t}");
        assert!(t.contains("rr_server_xsk_recovery_tail_probes{backend=\"xsk\"} 4\n"), "{t}");
        assert!(t.contains("rr_server_xsk_recovery_spurious_probes{backend=\"xsk\"} 1\n"), "{t}");
    }

    #[test]
    fn prometheus_text() {
        let s = Snapshot::new(&json!({"requests": 3, "xsk": {"device": {"rx_frames": 10}}}));
        let t = prometheus("rr_server", &[("backend", "xsk"), ("service", "e\"cho")], &s);
        assert_eq!(
            t,
            "# TYPE rr_server_requests untyped\nrr_server_requests{backend=\"xsk\",service=\"e\\\"cho\"} 3\n\
             # TYPE rr_server_xsk_device_rx_frames untyped\n\
             rr_server_xsk_device_rx_frames{backend=\"xsk\",service=\"e\\\"cho\"} 10\n"
        );
    }

    #[test]
    fn endpoint_serves_the_published_text_and_survives_garbage() {
        let ep = MetricsEndpoint::start("127.0.0.1:0".parse().unwrap()).unwrap();
        ep.publish("x 1\n".into());
        let get = |req: &[u8]| {
            let mut c = TcpStream::connect(ep.local_addr()).unwrap();
            c.write_all(req).unwrap();
            let mut out = Vec::new();
            // An oversized request is answered before it is read to the end: the close may
            // then reset the connection after the answer.
            let _ = c.read_to_end(&mut out);
            String::from_utf8_lossy(&out).into_owned()
        };
        let r = get(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(r.starts_with("HTTP/1.0 200 OK") && r.ends_with("\r\n\r\nx 1\n"), "{r}");
        assert!(get(b"GET /nope HTTP/1.0\r\n\r\n").starts_with("HTTP/1.0 404"));
        assert!(get(b"\xff\xfe garbage\r\n\r\n").starts_with("HTTP/1.0 405"));
        let big = get(&vec![b'a'; MAX_REQUEST + 1024]);
        assert!(big.is_empty() || big.starts_with("HTTP/1.0 431"), "{big}");
        ep.publish("x 2\n".into());
        assert!(get(b"GET /metrics HTTP/1.0\r\n\r\n").ends_with("x 2\n"));
    }
}
