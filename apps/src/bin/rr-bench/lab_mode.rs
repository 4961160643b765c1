//! `--lab`: rr-bench builds its own veth lab, starts rr-server in one namespace and runs the
//! load from the other.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use apps::{AddrArg, Backend};
use apps::server_process::{ServerError, ServerProcess};
use xsk_lab::lab::{self, Lab, LabConfig, Netns};

use crate::{bench, finish, Args, Pattern};
use crate::plan::Plan;

/// Lab namespace prefix of rr-bench.
const LAB_PREFIX: &str = "rrb";

/// Whether an XDP program is attached to `ifname` in `ns`.
fn xdp_attached(ns: &Netns, ifname: &str) -> Result<bool> {
    let out = ns.run(&["ip", "-d", "link", "show", "dev", ifname]).with_context(|| format!("ip link show {ifname}"))?;
    Ok(out.contains("prog/xdp"))
}

pub(crate) fn server_exe(args: &Args) -> Result<PathBuf> {
    let exe = match &args.server_exe {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .context("locating this binary")?
            .parent()
            .context("this binary has no parent directory")?
            .join("rr-server"),
    };
    ensure!(exe.is_file(), "rr-server not found at {} (build it, or pass --server-exe)", exe.display());
    Ok(exe)
}

pub(crate) fn in_lab(args: &Args, server_backend: Backend) -> Result<ExitCode> {
    let exe = server_exe(args)?;
    lab::sweep_stale(LAB_PREFIX);
    let lab = Lab::new(&LabConfig::new(LAB_PREFIX)).context("building the veth lab")?;
    // The peer keeps veth's default offloads, as a container has: the stack
    // serves its partial checksums.
    eprintln!("lab: {lab}");
    let o = lab.addr_a.octets();
    let host = |n: u8| Ipv4Addr::new(o[0], o[1], o[2], n);
    let dedicated = |n: u8| AddrArg::Dedicated { addr: host(n), prefix_len: lab.prefix_len, addr6: None };

    let server_ip = match (server_backend, args.lab_shared) {
        (Backend::Xsk, false) => host(100),
        _ => lab.addr_a,
    };
    let dir = std::env::temp_dir().join(format!("rr-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let ready = dir.join("ready");
    let safety =
        args.warmup + args.duration + 2 * (args.connect_timeout + args.drain_timeout) + Duration::from_secs(60);

    let mut cmd = ServerProcess::command(&lab.ns_a, &exe);
    cmd.args(["--backend", &server_backend.to_string(), "--service", &args.service.to_string()]);
    cmd.args(["--port", &args.port.to_string(), "--duration", &format!("{}s", safety.as_secs())]);
    cmd.args(["--max-conns", &args.conns.max(64).to_string()]);
    cmd.arg("--ready-file").arg(&ready);
    match server_backend {
        Backend::Xsk => {
            let addr = if args.lab_shared { AddrArg::Shared } else { dedicated(100) };
            cmd.args(["--iface", &lab.if_a, "--addr", &addr.to_string()]);
        }
        Backend::Kernel | Backend::Uring => {
            cmd.args(["--bind", &lab.addr_a.to_string()]);
        }
    }
    cmd.args(&args.server_arg);
    let mut server = ServerProcess::spawn("rr-server", cmd, &dir.join("server.out"), Some(&dir.join("server.err")))
        .context("starting rr-server in the lab")?;
    server.wait_ready_file(&ready, Duration::from_secs(30))?;
    eprintln!(
        "rr-server ({server_backend}) ready at {server_ip}:{} in {}, pid {}",
        args.port,
        lab.ns_a,
        server.pid()
    );

    let mut client = args.clone();
    client.lab = None;
    client.connect = Some(SocketAddrV4::new(server_ip, args.port).into());
    client.server_pid = Some(server.pid());
    match args.backend {
        Backend::Xsk => {
            client.xsk.iface = Some(lab.if_b.clone());
            client.xsk.addr = if args.lab_shared { AddrArg::Shared } else { dedicated(101) };
        }
        Backend::Kernel | Backend::Uring => client.bind = lab.addr_b,
    }
    if args.pattern != Pattern::Rr && args.backend != Backend::Xsk {
        // The kernel client closes first, so each connection would leave a TIME-WAIT socket
        // holding its local port for 60 s, and a few seconds of churn would run out of ports.
        // In the client's namespace only (the load generator, not the server measured), keep
        // no TIME-WAIT and use every port; the FIN exchange on the wire is unchanged.
        lab.ns_b.run(&["sysctl", "-qw", "net.ipv4.tcp_max_tw_buckets=0"])?;
        lab.ns_b.run(&["sysctl", "-qw", "net.ipv4.ip_local_port_range=10000 65000"])?;
    }
    let outcome = lab.ns_b.run_in(move || Plan::new(&client).and_then(|plan| bench(&client, &plan)));

    let clean_exit = match server.stop(Duration::from_secs(15)) {
        Ok(status) if status.success() => true,
        Ok(status) => {
            eprintln!("rr-server exited with {status}");
            false
        }
        Err(e @ ServerError::NoExit { .. }) => {
            eprintln!("{e}");
            false
        }
        Err(e) => return Err(e.into()),
    };
    let server_output = server.output();
    let leftover: Vec<String> = [(&lab.ns_a, &lab.if_a), (&lab.ns_b, &lab.if_b)]
        .into_iter()
        .filter(|(ns, ifname)| xdp_attached(ns, ifname).unwrap_or(true))
        .map(|(_, ifname)| ifname.clone())
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    drop(lab);

    let print_server = || {
        println!("---- rr-server ({server_backend}) ----");
        for line in server_output.lines() {
            println!("  {line}");
        }
    };
    let outcome = match outcome.context("running the client in the lab")? {
        Ok(o) => o,
        Err(e) => {
            print_server();
            return Err(e);
        }
    };
    let code = finish(args, &outcome);
    print_server();
    let code = code?;
    ensure!(clean_exit, "rr-server did not exit cleanly (status 0) after SIGINT");
    ensure!(leftover.is_empty(), "an XDP program is still attached to {leftover:?}");
    Ok(code)
}
