//! rr-server inside a guest: started in the background of the guest's init shell, waited for
//! through its `--ready-file`, stopped with SIGINT (or SIGKILL), and the XDP state of eth0
//! read with iproute2's `ip link`.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Result};
use serde::Serialize;

use crate::guest::Guest;

/// How to run rr-server in the guest.
#[derive(Debug, Clone)]
pub struct ServerSpec {
    /// Shell-variable-safe tag, names the log/ready/json files (`/tmp/TAG.*`).
    pub tag: String,
    /// "xsk" or "kernel" (rr-server's `--backend`), or "floor": xsk-device's `tcp_floor`
    /// example in rr-server's place, on the same flags (the least TCP on the same port).
    pub backend: String,
    /// xsk: skb | drv | auto.
    pub attach: String,
    /// xsk: `shared` or `A.B.C.D/LEN`.
    pub addr: String,
    pub port: u16,
    /// Extra arguments.
    pub extra: Vec<String>,
}

impl ServerSpec {
    pub fn xsk(tag: &str, attach: &str, addr: &str, port: u16) -> Self {
        ServerSpec {
            tag: tag.into(),
            backend: "xsk".into(),
            attach: attach.into(),
            addr: addr.into(),
            port,
            extra: vec![],
        }
    }

    pub fn kernel(tag: &str, port: u16) -> Self {
        ServerSpec {
            tag: tag.into(),
            backend: "kernel".into(),
            attach: String::new(),
            addr: String::new(),
            port,
            extra: vec![],
        }
    }

    fn argv(&self) -> String {
        let program = if self.backend == "floor" { "tcp_floor" } else { "rr-server" };
        let mut a = format!("{program} --backend {} --port {}", self.backend, self.port);
        if self.backend == "xsk" || self.backend == "floor" {
            a.push_str(&format!(
                " --iface eth0 --addr {} --attach {}",
                self.addr, self.attach
            ));
        } else {
            a.push_str(" --bind 0.0.0.0");
        }
        for e in &self.extra {
            a.push(' ');
            a.push_str(e);
        }
        a.push_str(&format!(
            " --ready-file /tmp/{t}.ready --json /tmp/{t}.json",
            t = self.tag
        ));
        a
    }

    fn pid_var(&self) -> String {
        format!("PID_{}", self.tag)
    }
}

/// A server that came up.
#[derive(Debug, Clone, Serialize)]
pub struct Started {
    /// The `xsk port: ...` line (features, attach mode) for xsk.
    pub port_line: Option<String>,
    /// The `tune ...` lines of the port (device preparation), warnings included.
    pub tune: Vec<String>,
    pub command: String,
}

/// A server that did not come up.
#[derive(Debug, Clone, Serialize)]
pub struct Refused {
    /// The `rr-server: error: ...` line, if it printed one: the "clear error".
    pub error: Option<String>,
    pub exit_status: Option<i32>,
    pub log_tail: String,
    pub command: String,
}

impl Refused {
    /// The error line, else the log tail (a server that died silently still says something).
    pub fn reason(self) -> String {
        self.error.unwrap_or(self.log_tail)
    }
}

/// Starts rr-server and waits (at most 60 s) for its ready file.
pub fn start(g: &mut Guest, s: &ServerSpec) -> Result<std::result::Result<Started, Refused>> {
    let t = &s.tag;
    let pv = s.pid_var();
    let command = s.argv();
    g.exec_ok(
        &format!("rm -f /tmp/{t}.ready; RUST_LOG=info NO_COLOR=1 {command} > /tmp/{t}.log 2>&1 & {pv}=$!"),
        Duration::from_secs(10),
    )?;
    let wait = format!(
        "i=0; while [ ! -e /tmp/{t}.ready ]; do kill -0 ${pv} 2>/dev/null || break; i=$((i+1)); [ $i -gt 600 ] && break; sleep 0.1; done; [ -e /tmp/{t}.ready ]"
    );
    let ready = g.exec(&wait, Duration::from_secs(75))?;
    if ready.ok() {
        let log = g.exec_ok(&format!("cat /tmp/{t}.log"), Duration::from_secs(10))?;
        let log = strip_ansi(&log);
        let port_line = log
            .lines()
            .find(|l| l.starts_with("xsk port:"))
            .map(str::to_string);
        let tune = log
            .lines()
            .filter(|l| l.contains(" tune ") || l.contains("WARN"))
            .map(|l| l.trim().to_string())
            .collect();
        return Ok(Ok(Started {
            port_line,
            tune,
            command,
        }));
    }
    // Not ready: collect the exit status (or kill a hung one) and the log.
    let st = g.exec(
        &format!("if kill -0 ${pv} 2>/dev/null; then kill -9 ${pv}; wait ${pv}; echo hung; else wait ${pv}; echo exit=$?; fi"),
        Duration::from_secs(15),
    )?;
    let exit_status = st
        .output
        .lines()
        .find_map(|l| l.strip_prefix("exit=")?.trim().parse().ok());
    let log = strip_ansi(
        &g.exec(&format!("tail -n 25 /tmp/{t}.log"), Duration::from_secs(10))?
            .output,
    );
    let error = log
        .lines()
        .find(|l| l.contains("rr-server: error:"))
        .map(|l| l.trim().to_string());
    Ok(Err(Refused {
        error,
        exit_status,
        log_tail: log,
        command,
    }))
}

/// How a server ended.
#[derive(Debug, Clone, Serialize)]
pub struct Stopped {
    pub exit_status: i32,
    /// `frame audit: ...` line (xsk).
    pub frame_audit: Option<String>,
    /// `xdp program detached ...` line (xsk).
    pub detached_line: Option<String>,
    pub summary_tail: String,
    /// The whole server log (stdout and stderr).
    #[serde(skip)]
    pub log: String,
}

impl Stopped {
    /// Exit status 0 and a frame audit that says ok: every UMEM frame came back.
    pub fn clean(&self) -> bool {
        self.exit_status == 0
            && self
                .frame_audit
                .as_deref()
                .is_some_and(|l| l.contains("ok"))
    }

    /// The xsk server's deferred-ACK counters (the `deferred_acks` object of
    /// its `xsk device:` line), e.g. `{"enabled":true,"taken":1790,...}`.
    pub fn deferred_acks(&self) -> Option<String> {
        device_field(&self.log, "deferred_acks").map(|v| v.to_string())
    }

    /// `unclean stop (status N, AUDIT)`, or None after a clean stop.
    pub fn unclean(&self) -> Option<String> {
        (!self.clean()).then(|| {
            format!(
                "unclean stop (status {}, {})",
                self.exit_status,
                self.frame_audit.as_deref().unwrap_or("no frame audit")
            )
        })
    }
}

/// SIGINT, then wait (at most 30 s) and read its log.
pub fn stop(g: &mut Guest, s: &ServerSpec) -> Result<Stopped> {
    let pv = s.pid_var();
    let o = g.exec(
        &format!("kill -INT ${pv}; wait ${pv}"),
        Duration::from_secs(30),
    )?;
    let log = strip_ansi(
        &g.exec(&format!("cat /tmp/{}.log", s.tag), Duration::from_secs(20))?
            .output,
    );
    let lines: Vec<&str> = log.lines().collect();
    let tail = lines[lines.len().saturating_sub(30)..].join("\n");
    Ok(Stopped {
        exit_status: o.status,
        frame_audit: frame_audit(&log),
        detached_line: log
            .lines()
            .find(|l| l.starts_with("xdp program detached"))
            .map(str::to_string),
        summary_tail: tail,
        log,
    })
}

/// What a running server has sent again so far.
#[derive(Debug, Clone, Default)]
pub struct Resent {
    /// Segments sent again: for xsk its own loss recovery (RTO, fast and hole retransmits and
    /// tail-loss probes), for kernel TCP the guest's `RetransSegs` (/proc/net/snmp; the server
    /// guest runs no other TCP sender).
    pub segments: Option<u64>,
    /// xsk only: each of its recovery counters (`xsk_recovery_` left out), spurious verdicts
    /// included, for telling which step resends.
    pub by_kind: BTreeMap<String, u64>,
}

/// Reads [`Resent`] (for xsk from a SIGUSR1 dump of its counters). Compare two readings
/// around a run.
pub fn resent(g: &mut Guest, s: &ServerSpec) -> Result<Resent> {
    if s.backend == "xsk" {
        let pv = s.pid_var();
        let log = g.exec_ok(
            &format!("kill -USR1 ${pv}; sleep 1; cat /tmp/{}.log", s.tag),
            Duration::from_secs(20),
        )?;
        let log = strip_ansi(&log);
        Ok(Resent { segments: usr1_resent(&log), by_kind: usr1_recovery(&log) })
    } else {
        let snmp = g.exec_ok("cat /proc/net/snmp", Duration::from_secs(10))?;
        Ok(Resent { segments: snmp_retrans_segs(&snmp), by_kind: BTreeMap::new() })
    }
}

/// The stack's recovery counters from the last SIGUSR1 dump in an rr-server log.
pub fn usr1_recovery(log: &str) -> BTreeMap<String, u64> {
    let Some(at) = log.rfind("counters (SIGUSR1):") else { return BTreeMap::new() };
    log[at..]
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let k = w.next()?.strip_prefix("xsk_recovery_")?;
            Some((k.to_string(), w.next()?.parse::<f64>().ok()? as u64))
        })
        .collect()
}

/// The stack's segments sent again, from the last SIGUSR1 dump in an rr-server log.
pub fn usr1_resent(log: &str) -> Option<u64> {
    let c = usr1_recovery(log);
    let counted = ["rto_retransmits", "fast_retransmits", "hole_retransmits", "tail_probes"];
    let mut found = counted.iter().filter_map(|k| c.get(*k)).peekable();
    found.peek()?;
    Some(found.sum())
}

/// `Tcp: ... RetransSegs ...` from /proc/net/snmp.
pub fn snmp_retrans_segs(snmp: &str) -> Option<u64> {
    let mut tcp = snmp.lines().filter(|l| l.starts_with("Tcp:"));
    let (names, values) = (tcp.next()?, tcp.next()?);
    let i = names.split_whitespace().position(|n| n == "RetransSegs")?;
    values.split_whitespace().nth(i)?.parse().ok()
}

#[cfg(test)]
mod resent_tests {
    #[test]
    fn the_stacks_and_the_kernels_retransmissions_are_read() {
        let log = "counters (SIGUSR1):\n  xsk_recovery_fast_retransmits 1\n  xsk_recovery_tail_probes 9\n\
                   rr-server: ...\ncounters (SIGUSR1):\n  requests 5\n  xsk_recovery_fast_retransmits 2\n\
                   \x20 xsk_recovery_hole_retransmits 3\n  xsk_recovery_rto_retransmits 4\n  xsk_recovery_spurious_probes 7\n\
                   \x20 xsk_recovery_tail_probes 10\nlater\n";
        assert_eq!(super::usr1_resent(log), Some(19));
        assert_eq!(super::usr1_recovery(log).get("spurious_probes"), Some(&7));
        assert_eq!(super::usr1_recovery(log).len(), 5);
        assert_eq!(super::usr1_resent("no dump"), None);
        let snmp = "Ip: Forwarding DefaultTTL\nIp: 2 64\nTcp: RtoAlgorithm RtoMin ActiveOpens RetransSegs InErrs\nTcp: 1 200 3 42 0\n";
        assert_eq!(super::snmp_retrans_segs(snmp), Some(42));
    }
}

/// A field of the `xsk device: {...}` line (JSON) of an rr-server log.
pub fn device_field(log: &str, key: &str) -> Option<serde_json::Value> {
    let l = log.lines().find_map(|l| l.strip_prefix("xsk device: "))?;
    let mut v: serde_json::Value = serde_json::from_str(l.trim()).ok()?;
    v.get_mut(key).map(serde_json::Value::take)
}

#[cfg(test)]
mod deferred_tests {
    #[test]
    fn deferred_acks_are_read_from_the_device_line() {
        let st = super::Stopped {
            exit_status: 0,
            frame_audit: None,
            detached_line: None,
            summary_tail: String::new(),
            log: "x\nxsk device: {\"tx_frames\":3,\"deferred_acks\":{\"enabled\":true,\"taken\":7,\"switches\":1}}\n".into(),
        };
        let d: serde_json::Value = serde_json::from_str(&st.deferred_acks().unwrap()).unwrap();
        assert_eq!(d, serde_json::json!({"enabled": true, "taken": 7, "switches": 1}));
        assert_eq!(super::Stopped { log: "none".into(), ..st }.deferred_acks(), None);
    }
}

/// The `frame audit: ...` line; with `--threads N` the server audits each shard (`frame audit
/// shard I: ...`): all ok reads `frame audit: ok (N shards)`, else the first that is not.
pub fn frame_audit(log: &str) -> Option<String> {
    if let Some(l) = log.lines().find(|l| l.starts_with("frame audit:")) {
        return Some(l.to_string());
    }
    let shards: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("frame audit shard "))
        .collect();
    if shards.is_empty() {
        return None;
    }
    let ok = |l: &&str| l.split_once(": ").is_some_and(|(_, r)| r.starts_with("ok"));
    Some(match shards.iter().find(|l| !ok(l)) {
        Some(bad) => bad.to_string(),
        None => format!("frame audit: ok ({} shards)", shards.len()),
    })
}

/// SIGKILL and reap; the status (137 expected).
pub fn kill9(g: &mut Guest, s: &ServerSpec) -> Result<i32> {
    let pv = s.pid_var();
    Ok(g.exec(
        &format!("kill -9 ${pv}; wait ${pv}"),
        Duration::from_secs(15),
    )?
    .status)
}

/// XDP state of eth0 from `ip link show dev eth0`: Some(description) when a program is
/// attached, None when not. Errors if iproute2's ip is not in the guest.
pub fn xdp_state(g: &mut Guest) -> Result<Option<String>> {
    let out = g.exec_ok(
        "/usr/local/bin/ip -d link show dev eth0",
        Duration::from_secs(10),
    )?;
    Ok(parse_xdp(&out))
}

/// Finds the XDP attachment in `ip -d link show` output (`xdp`/`xdpgeneric`/`xdpdrv` flag on
/// the first line, `prog/xdp id N` below).
pub fn parse_xdp(out: &str) -> Option<String> {
    let mut found: Vec<String> = Vec::new();
    for l in out.lines() {
        for (i, w) in l.split_whitespace().enumerate() {
            let w = w.trim_end_matches(':');
            if matches!(
                w,
                "xdp" | "xdpgeneric" | "xdpdrv" | "xdpoffload" | "xdpmulti"
            ) {
                found.push(w.to_string());
            }
            if w.starts_with("prog/xdp") {
                let id: Vec<&str> = l.split_whitespace().skip(i).take(3).collect();
                found.push(id.join(" "));
            }
        }
    }
    (!found.is_empty()).then(|| found.join(", "))
}

/// Waits (at most `secs`) until eth0 has no XDP program; the state seen last.
pub fn wait_detached(g: &mut Guest, secs: u32) -> Result<Option<String>> {
    let tries = secs * 5;
    let o = g.exec(
        &format!(
            "i=0; while /usr/local/bin/ip -d link show dev eth0 | grep -q 'prog/xdp'; do i=$((i+1)); [ $i -gt {tries} ] && break; sleep 0.2; done; /usr/local/bin/ip -d link show dev eth0"
        ),
        Duration::from_secs(secs as u64 + 10),
    )?;
    if o.status != 0 {
        bail!("ip link show dev eth0 failed in the guest: {}", o.output);
    }
    Ok(parse_xdp(&o.output))
}

/// The message of a device-preparation warning of the port (`tune IF: ...: WARNING: ...`),
/// without the fix hint; None for other lines (kernel-knob warnings are the same in every
/// case and stay in the JSON only).
pub fn short_warning(l: &str) -> Option<String> {
    let i = l.find("tune ")?;
    if !l.contains("WARNING") {
        return None;
    }
    let msg = &l[i + 5..];
    let msg = msg.split_once(": ").map(|(_, m)| m).unwrap_or(msg);
    let msg = msg.split(" (fix:").next().unwrap_or(msg);
    Some(msg.replace("WARNING: ", "").trim().to_string())
}

/// Removes ANSI colour sequences (tracing colours a terminal; the log is a file, but be safe).
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c == '\u{1b}' {
            if it.peek() == Some(&'[') {
                it.next();
                for c2 in it.by_ref() {
                    if c2.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_audits() {
        assert_eq!(
            frame_audit("x\nframe audit: ok Accounting {}\n").as_deref(),
            Some("frame audit: ok Accounting {}")
        );
        let two = "frame audit shard 0: ok Accounting { app: 0 }\nframe audit shard 1: ok Accounting { app: 0 }";
        assert_eq!(
            frame_audit(two).as_deref(),
            Some("frame audit: ok (2 shards)")
        );
        let bad = "frame audit shard 0: ok A\nframe audit shard 1: FAILED: 3 frames missing";
        assert_eq!(
            frame_audit(bad).as_deref(),
            Some("frame audit shard 1: FAILED: 3 frames missing")
        );
        assert_eq!(frame_audit("nothing"), None);
    }

    #[test]
    fn xdp_in_ip_link() {
        let drv = "2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 xdp qdisc pfifo_fast state UP mode DEFAULT group default qlen 1000\n    link/ether 52:54:00:12:0a:02 brd ff:ff:ff:ff:ff:ff promiscuity 0\n    prog/xdp id 7 name xsk_steer tag 0123 jited\n";
        assert_eq!(parse_xdp(drv).as_deref(), Some("xdp, prog/xdp id 7"));
        let generic = "2: eth0: <UP> mtu 1500 xdpgeneric qdisc pfifo_fast state UP\n    prog/xdp id 9 name x\n";
        assert!(parse_xdp(generic).unwrap().starts_with("xdpgeneric"));
        let none = "2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc pfifo_fast state UP mode DEFAULT\n    link/ether 52:54:00:12:0a:02 brd ff:ff:ff:ff:ff:ff\n";
        assert_eq!(parse_xdp(none), None);
    }

    #[test]
    fn port_warnings() {
        let l = "2026-11-30T00:25:21.835677Z  INFO xsk_io::port: tune eth0: virtio_net: guest_csum negotiated: WARNING: frames arrive CHECKSUM_PARTIAL (don't drop them) (fix: start the VM with QEMU ...)";
        assert_eq!(
            short_warning(l).as_deref(),
            Some("virtio_net: guest_csum negotiated: frames arrive CHECKSUM_PARTIAL (don't drop them)")
        );
        assert_eq!(
            short_warning("2026 WARN xsk_io::port: kernel has no XDP_MAX_TX_SKB_BUDGET"),
            None
        );
    }

    #[test]
    fn ansi() {
        assert_eq!(
            strip_ansi("\u{1b}[2m2026\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m x"),
            "2026  INFO x"
        );
    }

    #[test]
    fn server_command_line() {
        let s = ServerSpec::xsk("s1", "drv", "shared", 7000);
        assert_eq!(
            s.argv(),
            "rr-server --backend xsk --port 7000 --iface eth0 --addr shared --attach drv --ready-file /tmp/s1.ready --json /tmp/s1.json"
        );
        assert!(ServerSpec::kernel("k", 7001)
            .argv()
            .contains("--bind 0.0.0.0"));
    }
}
