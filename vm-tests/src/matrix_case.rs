//! One case of `vm-tests matrix` in a booted guest: rr-server with an attach mode and an
//! address, its load and byte check, its stop; the kernel-vs-xsk comparison and the SIGKILL
//! check; and how a queue or MTU case is judged.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use anyhow::{bail, Result};
use serde::Serialize;

use crate::compare::{KERNEL_PORT, Perf, XSK_PORT};
use crate::env::Env;
use crate::guest::{Accel, Guest};
use crate::load::{self, Bench, BenchArgs, LoadResult};
use crate::netns::HostNet;
use crate::server::{self, ServerSpec};

/// The largest MTU `virtnet_xdp_set` accepts for a single-buffer program (4096 - 256
/// headroom - 320 skb_shared_info - 14 Ethernet), the port's limit for native XDP.
pub const VIRTIO_XDP_MTU_ACCEPTED: u32 = 3506;

/// The largest MTU whose full-size frames a native XDP program on virtio_net (6.1) sees:
/// frames that span two mergeable buffers are copied by `xdp_linearize_page`, which also
/// counts the 12-byte virtio-net header (256 + 12 + frame + 320 <= 4096). Found by the MTU
/// cases: 3494 works, 3495 and 3506 drop every full-size frame without a counter.
pub const VIRTIO_XDP_MTU_WORKS: u32 = 3494;

/// One attach x offloads x address case.
#[derive(Debug, Clone, Serialize)]
pub struct Case {
    /// Guest kernel label (6.1 or new).
    pub kernel: String,
    pub offloads: String,
    pub attach: String,
    pub addr: String,
    /// Queue pairs of the guest's virtio-net (1, or 2 with mq=on).
    pub queues: u32,
    /// The guest's eth0 MTU during the case.
    pub mtu: u32,
    /// ok | refused | FAIL
    pub outcome: String,
    pub detail: String,
    pub port_line: Option<String>,
    /// Warnings of the port's device preparation.
    pub warnings: Vec<String>,
    pub xdp_serving: Option<String>,
    pub load: Option<LoadResult>,
    pub byte_check: Option<LoadResult>,
    pub server_exit: Option<i32>,
    pub xdp_after: Option<String>,
    /// The port's `tune ...` lines (device preparation: steps, changes, warnings, failures).
    pub tune: Vec<String>,
    /// Multiqueue guest: eth0's rx queues before, while serving and after the server
    /// (`/sys/class/net/eth0/queues/rx-*`).
    pub rx_queues: Option<String>,
}

impl Case {
    /// A case before it ran: no kernel label, outcome or measurements yet.
    pub fn new(offloads: &str, attach: &str, addr: &str, queues: u32, mtu: u32) -> Self {
        Case {
            kernel: String::new(),
            offloads: offloads.into(),
            attach: attach.into(),
            addr: addr.into(),
            queues,
            mtu,
            outcome: String::new(),
            detail: String::new(),
            port_line: None,
            warnings: vec![],
            xdp_serving: None,
            load: None,
            byte_check: None,
            server_exit: None,
            xdp_after: None,
            tune: vec![],
            rx_queues: None,
        }
    }
}

/// SIGKILL of the server.
#[derive(Debug, Clone, Serialize)]
pub struct Kill9 {
    pub kernel: String,
    pub attach: String,
    pub xdp_before: Option<String>,
    pub wait_status: i32,
    pub xdp_after: Option<String>,
    /// A new server attached and answered the byte check.
    pub restart_ok: bool,
    pub outcome: String,
    pub detail: String,
}

/// An MTU case that should be refused must be refused for its MTU (the error names `ip link
/// set dev eth0 mtu ...`); one that should work and was refused is reported as such.
pub fn judge_mtu(c: &mut Case, expect: &str) {
    match (c.outcome.as_str(), expect) {
        ("refused", "refused") if !c.detail.contains("mtu") => {
            c.outcome = "FAIL".into();
            c.detail = format!("refused, but the error does not name the MTU: {}", c.detail);
        }
        ("FAIL", _)
            if c.attach == "drv"
                && c.mtu > VIRTIO_XDP_MTU_WORKS
                && c.mtu <= VIRTIO_XDP_MTU_ACCEPTED =>
        {
            c.detail = format!(
                "{}; likely cause: virtio_net's xdp_linearize_page needs 256 + 12 (virtio-net header) + frame + 320 <= 4096, \
                 so native XDP drops full-size frames above MTU {VIRTIO_XDP_MTU_WORKS} although virtnet_xdp_set accepts up to \
                 {VIRTIO_XDP_MTU_ACCEPTED} (the port's plan says ok)",
                c.detail
            );
        }
        ("ok", "refused") => {
            c.detail = format!(
                "worked although the port's plan says this MTU does not fit; {}",
                c.detail
            );
        }
        _ => {}
    }
}

/// eth0's rx queues in the guest (`/sys/class/net/eth0/queues/rx-*`).
pub fn rx_queues(g: &mut Guest) -> Result<String> {
    Ok(g.exec_ok(
        "ls -d /sys/class/net/eth0/queues/rx-* | wc -l",
        Duration::from_secs(10),
    )?
    .trim()
    .to_string())
}

#[allow(clippy::too_many_arguments)]
pub fn case(
    env: &Env,
    requests: u64,
    g: &mut Guest,
    net: &HostNet,
    offloads: &str,
    attach: &str,
    addr: &str,
    (queues, mtu): (u32, u32),
    n: usize,
) -> Result<Case> {
    let (addr_arg, ip) = stack_addr(net, addr);
    let q_before = if queues > 1 {
        Some(rx_queues(g)?)
    } else {
        None
    };
    let port = 7000;
    let s = ServerSpec::xsk(&format!("c{n}"), attach, &addr_arg, port);
    let mut c = Case::new(offloads, attach, addr, queues, mtu);
    match server::start(g, &s)? {
        Err(r) => {
            c.server_exit = r.exit_status;
            c.tune = r
                .log_tail
                .lines()
                .filter(|l| l.contains(" tune "))
                .map(|l| l.trim().to_string())
                .collect();
            if let Some(b) = &q_before {
                c.rx_queues = Some(format!("rx queues {b}, after refusal {}", rx_queues(g)?));
            }
            match r.error {
                Some(e) => {
                    c.outcome = "refused".into();
                    c.detail = e;
                }
                None => {
                    c.outcome = "FAIL".into();
                    c.detail = format!(
                        "rr-server did not come up and printed no error line:\n{}",
                        r.log_tail
                    );
                }
            }
            return Ok(c);
        }
        Ok(st) => {
            c.port_line = st.port_line;
            c.warnings = st
                .tune
                .iter()
                .filter(|l| l.contains("WARN"))
                .cloned()
                .collect();
            c.tune = st.tune;
        }
    }
    let q_serving = match &q_before {
        Some(_) => Some(rx_queues(g)?),
        None => None,
    };
    c.xdp_serving = server::xdp_state(g)?;
    let dst = SocketAddrV4::new(ip, port);
    let b = BenchArgs::checked(dst, requests, Duration::from_secs(30));
    let json = env.run_dir.join(format!("case{n}-rr-bench.json"));
    let mut problems: Vec<String> = Vec::new();
    match load::rr_bench(&env.bin_dir, net, &b, &json) {
        Ok(Bench::Ran(r)) => {
            if let Some(short) = r.shortfall(requests) {
                problems.push(format!("rr-bench: {short}"));
            }
            c.load = Some(r);
        }
        Ok(Bench::Unusable(why)) => {
            static SIXTY_FOUR: [usize; 1] = [64];
            match load::echo_check(net, dst, requests, &SIXTY_FOUR, 1) {
                Ok(mut r) => {
                    if !r.clean(requests) {
                        problems.push(format!("built-in load: {} errors", r.errors));
                    }
                    r.note = Some(why);
                    c.load = Some(r);
                }
                Err(e) => problems.push(format!("built-in load: {e:#}")),
            }
        }
        Err(e) => problems.push(format!("rr-bench: {e:#}")),
    }
    c.byte_check = load::byte_check(net, dst, 0x5eed + n as u64, &mut problems);
    let stopped = server::stop(g, &s)?;
    let _ = std::fs::write(
        env.run_dir.join(format!("case{n}-server.log")),
        &stopped.log,
    );
    c.server_exit = Some(stopped.exit_status);
    problems.extend(stopped.unclean());
    c.xdp_after = server::wait_detached(g, 3)?;
    if let (Some(b), Some(s)) = (&q_before, &q_serving) {
        c.rx_queues = Some(format!(
            "rx queues {b} before, {s} serving, {} after",
            rx_queues(g)?
        ));
    }
    if let Some(x) = &c.xdp_after {
        problems.push(format!("XDP still attached after exit: {x}"));
    }
    let device_warnings: Vec<String> = c
        .warnings
        .iter()
        .filter_map(|w| server::short_warning(w))
        .collect();
    if problems.is_empty() {
        c.outcome = "ok".into();
        c.detail = device_warnings.join("; ");
    } else {
        c.outcome = "FAIL".into();
        if !device_warnings.is_empty() {
            problems.push(format!(
                "the port had warned: {}",
                device_warnings.join("; ")
            ));
        }
        problems.push(format!(
            "server log: {}",
            env.run_dir.join(format!("case{n}-server.log")).display()
        ));
        c.detail = problems.join("; ");
    }
    Ok(c)
}

/// `--addr` of the stack and the address clients connect to.
pub fn stack_addr(net: &HostNet, addr: &str) -> (String, Ipv4Addr) {
    match addr {
        "dedicated" => (
            format!("{}/{}", net.stack_addr, net.prefix_len),
            net.stack_addr,
        ),
        _ => ("shared".to_string(), net.guest_addr),
    }
}

pub fn perf(
    env: &Env,
    (runs, run_secs): (usize, f64),
    g: &mut Guest,
    net: &HostNet,
    offloads: &str,
    attach: &str,
    accel: Accel,
) -> Result<Perf> {
    let ks = ServerSpec::kernel("pk", KERNEL_PORT);
    let xs = ServerSpec::xsk("px", attach, "shared", XSK_PORT);
    if let Err(r) = server::start(g, &ks)? {
        bail!("kernel rr-server did not start: {:?}", r.error);
    }
    if let Err(r) = server::start(g, &xs)? {
        let _ = server::stop(g, &ks);
        bail!("xsk rr-server ({attach}) did not start: {:?}", r.error);
    }
    let mut p = Perf {
        topology: "host tap -> guest".into(),
        offloads: offloads.into(),
        attach: attach.into(),
        runs,
        run_secs,
        caveat: match accel {
            Accel::Kvm => "KVM guest, 1 vCPU: both servers share it with the guest kernel".into(),
            _ => "TCG: the guest CPU is emulated, so the guest side of every request costs far more than \
                  under KVM and the two paths are slowed unevenly; the ratio shows which path is cheaper \
                  under emulation, not what a KVM guest would see"
                .into(),
        },
        ..Perf::default()
    };
    let result = p.measure(net.guest_addr, |b, which, i| {
        let json = env.run_dir.join(format!("perf-{attach}-{which}-{i}.json"));
        match load::rr_bench(&env.bin_dir, net, b, &json)? {
            Bench::Ran(r) => Ok(r),
            Bench::Unusable(why) => bail!("the comparison needs rr-bench: {why}"),
        }
    });
    let _ = server::stop(g, &xs);
    let _ = server::stop(g, &ks);
    result?;
    p.summarize();
    Ok(p)
}

pub fn kill9(g: &mut Guest, net: &HostNet, attach: &str, n: usize) -> Result<Kill9> {
    let s = ServerSpec::xsk(&format!("k{n}"), attach, "shared", 7002);
    let mut k = Kill9 {
        kernel: String::new(),
        attach: attach.into(),
        xdp_before: None,
        wait_status: 0,
        xdp_after: None,
        restart_ok: false,
        outcome: String::new(),
        detail: String::new(),
    };
    if let Err(r) = server::start(g, &s)? {
        k.outcome = "FAIL".into();
        k.detail = format!("server did not start: {}", r.reason());
        return Ok(k);
    }
    k.xdp_before = server::xdp_state(g)?;
    k.wait_status = server::kill9(g, &s)?;
    k.xdp_after = server::wait_detached(g, 5)?;
    // A new server must attach again (no stale program or socket in the way).
    let again = ServerSpec::xsk(&format!("k{n}r"), attach, "shared", 7002);
    match server::start(g, &again)? {
        Ok(_) => {
            let dst = SocketAddrV4::new(net.guest_addr, 7002);
            k.restart_ok =
                load::echo_check(net, dst, 14, load::CHECK_SIZES, 99).is_ok_and(|r| r.clean(14));
            let _ = server::stop(g, &again);
        }
        Err(r) => k.detail = format!("restart refused: {}", r.reason()),
    }
    let mut problems = Vec::new();
    if k.xdp_before.is_none() {
        problems.push("no XDP program while serving".to_string());
    }
    if let Some(x) = &k.xdp_after {
        problems.push(format!("XDP program left on eth0 after kill -9: {x}"));
    }
    if !k.restart_ok {
        problems.push(format!(
            "a new server did not work after the kill ({})",
            k.detail
        ));
    }
    if problems.is_empty() {
        k.outcome = "ok".into();
        k.detail = format!(
            "wait status {}; program gone; new server attached and answered",
            k.wait_status
        );
    } else {
        k.outcome = "FAIL".into();
        k.detail = problems.join("; ");
    }
    Ok(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_refusal_must_name_the_mtu() {
        let mut c = Case {
            kernel: "6.1".into(),
            outcome: "refused".into(),
            detail: "rr-server: error: eth0: no XDP".into(),
            server_exit: Some(1),
            ..Case::new("off", "drv", "shared", 1, 4000)
        };
        judge_mtu(&mut c, "refused");
        assert_eq!(c.outcome, "FAIL");
        c.outcome = "refused".into();
        c.detail = "rr-server: error: ... (fix: run: ip link set dev eth0 mtu 1500)".into();
        judge_mtu(&mut c, "refused");
        assert_eq!(c.outcome, "refused");
    }
}
