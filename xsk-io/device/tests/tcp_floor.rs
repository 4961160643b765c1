//! The floor probe (`examples/tcp_floor.rs`, the floor study's instrument) answers a kernel
//! TCP client as the echo server does: requests of several sizes over two connections in
//! turn, each answered byte for byte, and both connections closed by the client's FIN.
//! Needs root (a veth lab of two namespaces).

use std::io::{Read, Write};
use std::net::{SocketAddrV4, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use xsk_io::AttachMode;
use xsk_lab::lab::{Lab, LabConfig};

#[path = "../examples/tcp_floor.rs"]
#[allow(dead_code)]
mod tcp_floor;

#[test]
fn the_floor_echoes_a_kernel_client_over_two_connections_and_closes_them() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this integration test needs root (network namespaces, XDP, AF_XDP)");
    xsk_lab::lab::sweep_stale("tfl");
    let lab = Lab::new(&LabConfig { prefix: "tfl".into(), ..LabConfig::default() }).expect("building the veth lab");
    let port = 7011;
    let args = tcp_floor::Args { iface: lab.if_a.clone(), addr: None, port, attach: AttachMode::Auto, ready_file: None };
    let stop = Arc::new(AtomicBool::new(false));
    let (ready_tx, ready_rx) = mpsc::channel();
    let ns_a = lab.ns_a.clone();
    let stop2 = stop.clone();
    let server = std::thread::spawn(move || {
        let _in_a = ns_a.enter().expect("entering the server's namespace");
        tcp_floor::serve(&args, &|| stop2.load(Ordering::Relaxed), |addr, _, _| ready_tx.send(addr).unwrap())
            .map(|s| (s.frames, s.open))
            .map_err(|e| e.to_string())
    });
    let addr = ready_rx.recv_timeout(Duration::from_secs(20)).expect("the floor came up");
    assert_eq!(addr, lab.addr_a, "shared: the interface's own address");

    let client = lab.ns_b.run_in(move || -> Result<usize, String> {
        let mut answered = 0;
        for conn in 0..2u8 {
            let mut s = TcpStream::connect_timeout(&SocketAddrV4::new(addr, port).into(), Duration::from_secs(5))
                .map_err(|e| format!("connect {conn}: {e}"))?;
            s.set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| e.to_string())?;
            s.set_nodelay(true).map_err(|e| e.to_string())?;
            for i in 0..100usize {
                let len = [1, 64, 700, 1400][i % 4];
                let req: Vec<u8> = (0..len).map(|b| (b + i + conn as usize) as u8).collect();
                s.write_all(&req).map_err(|e| format!("write {conn}/{i}: {e}"))?;
                let mut got = vec![0u8; len];
                s.read_exact(&mut got).map_err(|e| format!("read {conn}/{i}: {e}"))?;
                if got != req {
                    return Err(format!("connection {conn}, request {i}: the answer differs"));
                }
                answered += 1;
            }
            s.shutdown(std::net::Shutdown::Write).map_err(|e| e.to_string())?;
            // The floor answers the FIN with its own: the read sees the end.
            let mut rest = Vec::new();
            s.read_to_end(&mut rest).map_err(|e| format!("the floor's FIN on {conn}: {e}"))?;
            if !rest.is_empty() {
                return Err(format!("{} bytes after the last answer", rest.len()));
            }
        }
        Ok(answered)
    });
    stop.store(true, Ordering::Relaxed);
    let (frames, open) = server.join().unwrap().expect("the floor ran cleanly");
    assert_eq!(client.expect("client thread").expect("the client's requests"), 200);
    assert!(frames >= 200, "{frames} frames received");
    assert_eq!(open, 0, "both connections closed by their FIN");
}
