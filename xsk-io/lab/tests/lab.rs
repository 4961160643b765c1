//! Integration tests for `xsk_lab::lab`. Need root; each test skips (with a
//! message) otherwise. Safe to run in parallel: every lab has its own names.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::time::Duration;

use xsk_lab::lab::{self, Lab, LabConfig, Netns, Side};

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

macro_rules! require_root {
    () => {
        if !is_root() {
            eprintln!("skipping {}: needs root (network namespaces)", module_path!());
            return;
        }
    };
}

fn netns_list() -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().expect("run ip netns list");
    assert!(out.status.success(), "ip netns list: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

fn have(program: &str) -> bool {
    Command::new(program).arg("-V").output().is_ok()
}

#[test]
fn lab_comes_up_and_pings() {
    require_root!();
    let lab = Lab::new(&LabConfig::new("lt")).expect("create lab");
    eprintln!("lab: {lab}");
    for name in [&lab.ns_a.name, &lab.ns_b.name, &lab.if_a, &lab.if_b] {
        assert!(name.len() <= 15, "{name}");
    }
    assert_ne!(lab.ns_a.name, lab.ns_b.name);
    let listed = netns_list();
    assert!(listed.contains(&lab.ns_a.name) && listed.contains(&lab.ns_b.name), "{listed:?}");

    // Addresses in 198.18.0.0/15, distinct, same /24.
    for a in [lab.addr_a, lab.addr_b] {
        assert!(a.octets()[0] == 198 && (a.octets()[1] & 0xfe) == 18, "{a}");
    }
    assert_ne!(lab.addr_a, lab.addr_b);

    // Each veth end is in its own namespace, up, with its address and MAC.
    let show_a = lab.ns_a.run(&["ip", "-o", "link", "show", "dev", &lab.if_a]).unwrap();
    assert!(show_a.contains("UP") && show_a.contains("mtu 1500"), "{show_a}");
    let mac_a = lab.mac_a.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
    assert!(show_a.contains(&mac_a), "{show_a} lacks {mac_a}");
    let addr_b = lab.ns_b.run(&["ip", "-o", "-4", "addr", "show", "dev", &lab.if_b]).unwrap();
    assert!(addr_b.contains(&format!("{}/{}", lab.addr_b, lab.prefix_len)), "{addr_b}");
    // The peer device does not exist in the other namespace.
    assert!(lab.ns_a.run(&["ip", "link", "show", "dev", &lab.if_b]).is_err());
    // IPv6 disabled by default.
    let v6 = lab.ns_a.run(&["cat", "/proc/sys/net/ipv6/conf/all/disable_ipv6"]);
    if let Ok(v) = v6 {
        assert_eq!(v.trim(), "1");
    }

    if have("ping") {
        let addr = lab.addr_b.to_string();
        let out = lab.ns_a.run(&["ping", "-c", "2", "-i", "0.2", "-W", "2", &addr]).expect("ping addr_b from ns_a");
        assert!(out.contains("2 received"), "{out}");
    } else {
        eprintln!("skipping the ping part: `ping` (iputils-ping) is not installed");
    }

    // Errors carry the command and its stderr.
    let err = lab.ns_a.run(&["ip", "link", "show", "dev", "nonexistent0"]).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("ip netns exec") && msg.contains("nonexistent0"), "{msg}");
    assert!(err.stderr().is_some_and(|s| !s.is_empty()), "{err:?}");
}

#[test]
fn tcp_between_namespaces_with_run_in() {
    require_root!();
    let lab = Lab::new(&LabConfig::new("lt")).expect("create lab");
    let addr_b = lab.addr_b;
    let listener: TcpListener = lab
        .ns_b
        .run_in(move || TcpListener::bind((addr_b, 0)))
        .expect("enter ns_b")
        .expect("bind in ns_b");
    let port = listener.local_addr().unwrap().port();
    let target = SocketAddr::from((addr_b, port));

    let client = lab
        .ns_a
        .run_in(move || -> std::io::Result<TcpStream> {
            let mut s = TcpStream::connect_timeout(&target, Duration::from_secs(5))?;
            s.write_all(b"ping")?;
            Ok(s)
        })
        .expect("enter ns_a")
        .expect("connect from ns_a");
    listener.set_nonblocking(false).unwrap();
    let (mut conn, peer) = listener.accept().expect("accept");
    assert_eq!(peer.ip(), std::net::IpAddr::V4(lab.addr_a));
    let mut buf = [0u8; 4];
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    conn.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"ping");

    // The socket stays in ns_a even when used from this thread.
    let mut client = client;
    conn.write_all(b"pong").unwrap();
    client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    client.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"pong");
    drop((client, conn, listener));

    // ifindex helper and panics propagate out of run_in.
    assert!(lab.ns_a.ifindex(&lab.if_a).unwrap() > 1);
    let ns = lab.ns_a.clone();
    let r = std::panic::catch_unwind(move || ns.run_in(|| panic!("boom in netns")));
    assert!(r.is_err());
}

fn netns_inode(path: &str) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().ino()
}

#[test]
fn enter_moves_only_this_thread_and_back() {
    require_root!();
    let lab = Lab::new(&LabConfig::new("lt")).expect("create lab");
    let ns = lab.ns_a.clone();
    let target = netns_inode(ns.path().to_str().unwrap());
    let main_ns = netns_inode("/proc/thread-self/ns/net");
    std::thread::spawn(move || {
        let before = netns_inode("/proc/thread-self/ns/net");
        assert_ne!(before, target);
        {
            let _g = ns.enter().expect("enter");
            assert_eq!(netns_inode("/proc/thread-self/ns/net"), target);
        }
        assert_eq!(netns_inode("/proc/thread-self/ns/net"), before);
    })
    .join()
    .unwrap();
    assert_eq!(netns_inode("/proc/thread-self/ns/net"), main_ns);

    let missing = Netns { name: "lt-does-not-exist".into() };
    assert!(missing.enter().is_err());
}

#[test]
fn drop_removes_namespaces_and_processes() {
    require_root!();
    let cfg = LabConfig { prefix: "lt".into(), mtu: 9000, peer_queues: Some(4), ..LabConfig::default() };
    let lab = Lab::new(&cfg).expect("create lab");
    let names = [lab.ns_a.name.clone(), lab.ns_b.name.clone()];
    let show = lab.ns_b.run(&["ip", "-d", "-o", "link", "show", "dev", &lab.if_b]).unwrap();
    assert!(show.contains("mtu 9000") && show.contains("numtxqueues 4") && show.contains("numrxqueues 4"), "{show}");
    lab.add_static_neighbours().unwrap();
    let neigh = lab.ns_a.run(&["ip", "neigh", "show", "dev", &lab.if_a]).unwrap();
    assert!(neigh.contains(&lab.addr_b.to_string()) && neigh.contains("PERMANENT"), "{neigh}");
    if have("ethtool") {
        lab.disable_tx_offloads().unwrap();
        let k = lab.ns_a.run(&["ethtool", "-k", &lab.if_a]).unwrap();
        assert!(k.contains("tx-checksumming: off"), "{k}");
    }

    // A process left running inside the lab is killed by Drop.
    let mut sleeper = lab.ns_b.spawn(&["sleep", "30"]).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert!(sleeper.try_wait().unwrap().is_none());

    drop(lab);
    let listed = netns_list();
    for n in &names {
        assert!(!listed.contains(n), "{n} still listed: {listed:?}");
        assert!(!std::path::Path::new(&format!("/run/netns/{n}")).exists());
    }
    let status = sleeper.wait().unwrap();
    assert!(!status.success(), "sleeper should have been killed: {status}");
}

#[test]
fn edge_configs_and_invalid_config() {
    require_root!();
    // Largest MTU and queue count veth accepts.
    let lab = Lab::new(&LabConfig { prefix: "le".into(), mtu: 65535, peer_queues: Some(4096), subnet_index: Some(250), ..LabConfig::default() })
        .expect("max mtu/queues");
    assert_eq!(lab.addr_a, Ipv4Addr::new(198, 18, 250, 1));
    assert_eq!(lab.addr_b, Ipv4Addr::new(198, 18, 250, 2));
    drop(lab);
    // Rejected before anything is created (other processes may be adding
    // and removing namespaces meanwhile: look only at this process's labs).
    let own = || -> Vec<String> {
        let pid = std::process::id();
        let mut v: Vec<String> = netns_list()
            .into_iter()
            .filter(|n| lab::parse_lab_name("xl", n).is_some_and(|p| p.pid == pid))
            .collect();
        v.sort();
        v
    };
    let before = own();
    for cfg in [
        LabConfig::new("TOOLONG"),
        LabConfig { mtu: 10, ..LabConfig::default() },
        LabConfig { peer_queues: Some(0), ..LabConfig::default() },
    ] {
        let e = Lab::new(&cfg).unwrap_err();
        assert!(matches!(e, lab::LabError::Config(_)), "{e}");
    }
    assert_eq!(before, own());
}

#[test]
fn sweep_stale_removes_dead_pid_namespaces_only() {
    require_root!();
    // A pid that is certainly dead: a child we reaped.
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();

    let stale = lab::lab_name("ls", dead, 7, Side::A).unwrap();
    let st = Command::new("ip").args(["netns", "add", &stale]).status().unwrap();
    assert!(st.success());
    // A leftover process inside the stale namespace (like an orphaned server).
    let mut orphan = Netns { name: stale.clone() }.spawn(&["sleep", "30"]).unwrap();
    // A live lab with the same prefix (our own pid) must survive.
    let live = Lab::new(&LabConfig::new("ls")).unwrap();

    // Another test process sweeping the same prefix concurrently may remove
    // it first, so check that it is gone rather than who removed it.
    let removed = lab::sweep_stale("ls");
    eprintln!("sweep_stale removed {removed}");
    let listed = netns_list();
    assert!(!listed.contains(&stale), "{listed:?}");
    assert!(listed.contains(&live.ns_a.name) && listed.contains(&live.ns_b.name));
    assert!(!orphan.wait().unwrap().success());
    // Other prefixes are not touched.
    assert_eq!(lab::sweep_stale("zz"), 0);
    drop(live);
}

#[test]
fn labs_in_parallel_are_distinct() {
    require_root!();
    let labs: Vec<Lab> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4).map(|_| s.spawn(|| Lab::new(&LabConfig::new("lp")).unwrap())).collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut names: Vec<String> = labs.iter().flat_map(|l| l.netns_names()).map(str::to_string).collect();
    let mut subnets: Vec<Ipv4Addr> = labs.iter().map(|l| l.addr_a).collect();
    names.sort();
    names.dedup();
    subnets.sort();
    subnets.dedup();
    assert_eq!(names.len(), 8);
    assert_eq!(subnets.len(), 4);
    drop(labs);
    let listed = netns_list();
    assert!(names.iter().all(|n| !listed.contains(n)), "{listed:?}");
}
