//! The NET_RX accountant against the kernel: a sender's own process runs the receive of what it
//! sends over loopback (netif_rx, then the softirq at the sender's bh-enable), so the time lands
//! in the slot of the process that sent, whichever slot that is. Needs root (BPF).

use std::net::UdpSocket;
use std::process::Command;
use std::time::Duration;

use apps::netrx::NetRx;

#[test]
fn loopback_receive_is_charged_to_the_sender() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this integration test needs root");
    // A process that sends nothing.
    let mut idle = Command::new("sleep").arg("30").spawn().expect("spawn sleep");
    let (me, other) = (std::process::id(), idle.id());
    // Three accountants at once, this process in each slot in turn.
    let as_client = NetRx::attach(other, me).expect("attach the NET_RX accountant");
    let as_server = NetRx::attach(me, other).expect("attach a second accountant");
    let as_neither = NetRx::attach(other, other).expect("attach a third accountant");
    let before = [as_client.read().unwrap(), as_server.read().unwrap(), as_neither.read().unwrap()];

    let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
    rx.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut buf = [0u8; 64];
    for i in 0..2_000u32 {
        tx.send_to(&i.to_ne_bytes(), rx.local_addr().unwrap()).unwrap();
        rx.recv_from(&mut buf).unwrap();
    }
    let c = as_client.read().unwrap() - before[0];
    let s = as_server.read().unwrap() - before[1];
    let n = as_neither.read().unwrap() - before[2];
    let _ = idle.kill();
    let _ = idle.wait();

    // At least 20 ns a datagram: a sum of real softirq runs, not a count.
    let floor = Duration::from_micros(40);
    assert!(c.in_client >= floor && c.in_server.is_zero(), "as the client: {c:?}");
    assert!(s.in_server >= floor && s.in_client.is_zero(), "as the server: {s:?}");
    assert!(n.elsewhere >= floor && n.in_server.is_zero() && n.in_client.is_zero(), "as neither: {n:?}");
}

/// `netrx-watch` around a client command: the command's own loopback traffic (ping runs the
/// receive of what it sends) lands in the client's slot from its first packet (the gate holds
/// it until the accountant is attached), none in the server's; the command's exit status is
/// passed through (a missing command: the shell's 127).
#[test]
fn netrx_watch_charges_a_client_command_its_own_receive() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this integration test needs root");
    let mut idle = Command::new("sleep").arg("30").spawn().expect("spawn sleep");
    let out = std::env::temp_dir().join(format!("netrx-watch-{}.json", std::process::id()));
    let watch = |cmd: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_netrx-watch"))
            .args(["--server", &idle.id().to_string(), "--out", out.to_str().unwrap(), "--"])
            .args(cmd)
            .status()
            .expect("run netrx-watch")
    };
    // ping is in scripts/setup's test packages (iputils-ping); -i 0.002 needs root.
    let st = watch(&["ping", "-q", "-c", "200", "-i", "0.002", "127.0.0.1"]);
    assert!(st.success(), "{st}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let ns = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"));
    assert!(ns("in_client_ns") >= 4_000, "200 echoes received in ping's own context: {v}");
    assert_eq!(ns("in_server_ns"), 0, "{v}");
    assert!(ns("client_syscalls") >= 400, "ping's sendto and recvmsg: {v}");
    assert_eq!(watch(&["sh", "-c", "exit 3"]).code(), Some(3), "the command's status");
    assert_eq!(watch(&["/nonexistent/command"]).code(), Some(127), "sh's status for a missing command");
    let _ = idle.kill();
    let _ = idle.wait();
    let _ = std::fs::remove_file(&out);
}

/// `apps::netrx::watch` with its output captured (rr-demo's Redis cases): the command's
/// stdout comes back, its environment is the one the `Command` was given, and its own
/// loopback traffic lands in the client's slot.
#[test]
fn watch_captures_the_commands_output() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this integration test needs root");
    let mut idle = Command::new("sleep").arg("30").spawn().expect("spawn sleep");
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "echo \"$NETRX_TEST\"; exec ping -q -c 100 -i 0.002 127.0.0.1 > /dev/null"]);
    cmd.env("NETRX_TEST", "from the command");
    let (out, d) = apps::netrx::watch(idle.id(), &cmd, true).expect("watch");
    let _ = idle.kill();
    let _ = idle.wait();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "from the command\n");
    assert!(d.in_client >= Duration::from_micros(2) && d.in_server.is_zero(), "{d:?}");
}
