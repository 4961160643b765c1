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
