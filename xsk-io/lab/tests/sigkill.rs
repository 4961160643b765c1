//! What a port's process leaves when it is SIGKILLed: nothing. The XDP
//! program is held by a bpf_link, so it dies with the process and the kernel
//! gets the steered port back. `xsk-bench` plays the port here, which is why
//! this test lives in xsk-lab (a test of xsk-io cannot name another
//! package's binary). Needs root.

use std::net::{SocketAddrV4, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use xsk_lab::lab::{Lab, LabConfig};

fn require_root() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        panic!("this integration test needs root (network namespaces, XDP, AF_XDP)");
    }
}

fn lab(tag: &str) -> Lab {
    require_root();
    xsk_lab::lab::sweep_stale(tag);
    Lab::new(&LabConfig { prefix: tag.into(), ..LabConfig::default() }).expect("building the veth lab")
}

fn xdp_attached(lab: &Lab) -> bool {
    let out = lab.ns_a.run(&["ip", "-d", "link", "show", "dev", &lab.if_a]).unwrap();
    out.contains("prog/xdp")
}

#[test]
fn sigkill_leaves_no_program_and_kernel_gets_the_port_back() {
    let lab = lab("tpk");
    let bench = env!("CARGO_BIN_EXE_xsk-bench");
    let mut child = Command::new("ip")
        .args(["netns", "exec", &lab.ns_a.name, bench, "rxdrop", "--iface", &lab.if_a, "--port", "7005"])
        .args(["--src-ip", &lab.addr_a.to_string(), "--duration", "60s", "--quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    while !xdp_attached(&lab) {
        assert!(Instant::now() < end, "the bench never attached its program");
        std::thread::sleep(Duration::from_millis(50));
    }
    // While it runs, port 7005 belongs to the XSK: a kernel listener gets nothing.
    let addr_a = lab.addr_a;
    let listen = move || {
        let l = TcpListener::bind(SocketAddrV4::new(addr_a, 7005)).unwrap();
        l.set_nonblocking(true).unwrap();
        l
    };
    let l = lab.ns_a.run_in(listen).unwrap();
    let connect = move || TcpStream::connect_timeout(&SocketAddrV4::new(addr_a, 7005).into(), Duration::from_millis(700)).is_ok();
    assert!(!lab.ns_b.run_in(connect).unwrap(), "the kernel answered on a steered port");

    // `ip netns exec` execs the bench in place: this is SIGKILL to the bench itself.
    child.kill().unwrap();
    let _ = child.wait();
    let end = Instant::now() + Duration::from_secs(5);
    while xdp_attached(&lab) {
        assert!(Instant::now() < end, "XDP program outlived its process");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(lab.ns_b.run_in(connect).unwrap(), "kernel TCP to the port after the kill");
    drop(l);
}
