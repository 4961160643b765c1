//! Crash-safe restore of device tuning, with `xsk-bench` as
//! the process that tunes, on a veth lab set up the way a user might have it
//! (GRO on, two queues). Needs root.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use xsk_lab::lab::{Lab, LabConfig};

const BENCH: &str = env!("CARGO_BIN_EXE_xsk-bench");

fn require_root() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        panic!("this integration test needs root (network namespaces, XDP, AF_XDP)");
    }
}

/// What a person would compare: `ethtool -k`, `ethtool -l` and the MTU.
#[derive(Debug, PartialEq, Eq)]
struct DevState {
    features: String,
    channels: String,
    mtu: String,
}

fn dev_state(lab: &Lab) -> DevState {
    let run = |args: &[&str]| lab.ns_a.run(args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let link = run(&["ip", "-o", "link", "show", "dev", &lab.if_a]);
    let mtu = link.split_whitespace().skip_while(|w| *w != "mtu").nth(1).expect("mtu in ip link output").to_string();
    DevState { features: run(&["ethtool", "-k", &lab.if_a]), channels: run(&["ethtool", "-l", &lab.if_a]), mtu }
}

fn xdp_attached(lab: &Lab) -> bool {
    lab.ns_a.run(&["ip", "-d", "link", "show", "dev", &lab.if_a]).unwrap().contains("prog/xdp")
}

fn rx_packets(lab: &Lab) -> u64 {
    let path = format!("/sys/class/net/{}/statistics/rx_packets", lab.if_a);
    lab.ns_a.run(&["cat", &path]).unwrap().trim().parse().unwrap()
}

fn wait_for(what: &str, secs: u64, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The user's lab: two queues and GRO on at if_a, which the port's tuning
/// changes (rx channels 2 -> 1, rx-gro on -> off).
fn user_lab(tag: &str) -> Lab {
    require_root();
    xsk_lab::lab::sweep_stale(tag);
    let lab = Lab::new(&LabConfig { prefix: tag.into(), peer_queues: Some(2), ..LabConfig::default() }).expect("lab");
    lab.ns_a.run(&["ethtool", "-K", &lab.if_a, "gro", "on"]).unwrap();
    lab
}

/// `xsk-bench rxdrop` on if_a (steering `port`), run in ns_a.
fn bench_a(lab: &Lab, port: u16, secs: u64) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &lab.ns_a.name, BENCH, "rxdrop", "--iface", &lab.if_a, "--port", &port.to_string()]);
    c.args(["--src-ip", &lab.addr_a.to_string(), "--duration", &format!("{secs}s"), "--quiet"]);
    c.stdout(Stdio::null()).stderr(Stdio::piped());
    c
}

/// Load for the port: a txonly generator on the peer sending TCP to `port`.
fn generator(lab: &Lab, port: u16, secs: u64) -> Child {
    let mac_a = lab.mac_a.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
    Command::new("ip")
        .args(["netns", "exec", &lab.ns_b.name, BENCH, "txonly", "--iface", &lab.if_b, "--proto", "tcp", "--quiet"])
        .args(["--dst-mac", &mac_a, "--src-ip", &lab.addr_b.to_string(), "--dst-ip", &lab.addr_a.to_string()])
        .args(["--port", &port.to_string(), "--duration", &format!("{secs}s"), "--batch", "16"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting the generator")
}

fn stop(mut c: Child) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
    let end = Instant::now() + Duration::from_secs(10);
    while c.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            let _ = c.kill();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Starts a tuning bench under load and SIGKILLs it once it runs; returns
/// with the device left changed by the dead process.
fn crash_under_load(lab: &Lab, before: &DevState, port: u16) {
    let gen = generator(lab, port, 30);
    let mut a = bench_a(lab, port, 60).spawn().unwrap();
    wait_for("the bench's XDP program", 15, || xdp_attached(lab));
    let rx0 = rx_packets(lab);
    wait_for("load on the port", 15, || rx_packets(lab) > rx0 + 10_000);
    let during = dev_state(lab);
    assert_ne!(during, *before, "the port's tuning changed nothing: the test would prove nothing");

    // A second instance on the same interface and queue is refused and
    // changes nothing (neither the device nor the first one's record).
    let second = bench_a(lab, port, 1).output().unwrap();
    assert!(!second.status.success(), "a second port on the interface started: {}", text(&second));
    let msg = text(&second);
    assert!(msg.contains("in use by another xsk-io port") && msg.contains("pid"), "{msg}");
    assert_eq!(dev_state(lab), during, "the refused instance touched the device");

    // `ip netns exec` execs the bench in place: this is SIGKILL to the bench itself.
    a.kill().unwrap();
    let _ = a.wait();
    wait_for("the program to go with its process", 5, || !xdp_attached(lab));
    stop(gen);
    assert_ne!(dev_state(lab), *before, "SIGKILL left nothing changed: the test would prove nothing");
}

#[test]
fn sigkill_under_load_then_start_and_stop_leaves_the_device_as_it_was() {
    let lab = user_lab("tcr");
    let before = dev_state(&lab);
    crash_under_load(&lab, &before, 7020);
    // The next start finds the dead owner's record and restores it before
    // tuning; its clean stop then restores to the true original.
    let out = bench_a(&lab, 7020, 1).output().unwrap();
    assert!(out.status.success(), "restart failed: {}", text(&out));
    assert!(text(&out).contains("did not exit cleanly"), "no word of the recovery: {}", text(&out));
    assert_eq!(dev_state(&lab), before, "the device is not as it was before the first start");
}

#[test]
fn restore_command_puts_the_device_back_after_sigkill() {
    let lab = user_lab("tcs");
    let before = dev_state(&lab);
    crash_under_load(&lab, &before, 7021);
    let restore = |lab: &Lab| {
        Command::new("ip").args(["netns", "exec", &lab.ns_a.name, BENCH, "restore", &lab.if_a]).output().unwrap()
    };
    let out = restore(&lab);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("restored the state recorded by pid"), "{}", text(&out));
    assert_eq!(dev_state(&lab), before);
    let again = restore(&lab);
    assert!(again.status.success() && text(&again).contains("nothing to restore"), "{}", text(&again));
}

/// The generic sysctl record (what the stack can use for
/// `ip_local_reserved_ports`): set through an owner, "crash" (the owner goes
/// without `finish`, which to the lock is what process death is), and the
/// next owner puts the original back. In a lab namespace: net sysctls are
/// per namespace, so the host's value is never touched.
#[test]
fn a_sysctl_set_through_the_record_is_restored_after_a_crash() {
    let lab = user_lab("tcy");
    let ifa = lab.if_a.clone();
    lab.ns_a
        .run_in(move || {
            use xsk_device::state::{read_sysctl, Owner};
            const K: &str = "net/ipv4/ip_local_reserved_ports";
            let original = read_sysctl(K).unwrap();
            let (mut owner, _) = Owner::acquire(&ifa).unwrap();
            assert_eq!(owner.set_sysctl(K, "40000-40009").unwrap(), original);
            assert_eq!(read_sysctl(K).unwrap(), "40000-40009");
            drop(owner); // no finish: a crash as far as the record is concerned
            assert_eq!(read_sysctl(K).unwrap(), "40000-40009", "nothing restored yet");
            let (owner, rec) = Owner::acquire(&ifa).unwrap();
            assert_eq!(rec.pid, Some(std::process::id()), "{rec:?}");
            assert_eq!(read_sysctl(K).unwrap(), original, "{rec:?}");
            // The clean path: set, finish, original back, no record left.
            let mut owner = owner;
            owner.set_sysctl(K, "41000").unwrap();
            let path = owner.path().to_path_buf();
            owner.finish();
            assert_eq!(read_sysctl(K).unwrap(), original);
            assert!(!path.exists());
        })
        .unwrap();
}
