//! Integration tests of the port on a real veth pair between two network
//! namespaces, with the kernel on the other side. Need root.

use std::time::{Duration, Instant};

use xsk_device::{DeviceError, Iface, PortConfig, SteerSpec};
use xsk_io::port::Port;
use xsk_io::umem::Frame;
use xsk_io::AttachMode;
use xsk_lab::lab::{Lab, LabConfig};
use xsk_lab::pktgen::{self, FrameSpec, Proto};

mod books;
mod embed;
mod kick;
mod link;
mod shed;
mod traffic;

/// Prepares the interface and opens one port, which keeps the interface
/// prepared until it is dropped.
fn open(cfg: &PortConfig) -> Result<Port, DeviceError> {
    Iface::open(cfg).map(|(_, port)| port)
}

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

fn spec(lab: &Lab, a_to_b: bool, proto: Proto, dst_port: u16, size: usize) -> FrameSpec {
    let (src_mac, dst_mac, src_ip, dst_ip) = if a_to_b {
        (lab.mac_a, lab.mac_b, lab.addr_a, lab.addr_b)
    } else {
        (lab.mac_b, lab.mac_a, lab.addr_b, lab.addr_a)
    };
    FrameSpec { src_mac, dst_mac, src_ip, dst_ip, src_port: 40000, dst_port, proto, size }
}

/// Marks a frame with a sequence number in its payload (after the TCP/UDP header).
fn stamp(buf: &mut [u8], proto: Proto, seq: u32) {
    let at = pktgen::min_size(proto);
    if let Some(b) = buf.get_mut(at..at + 4) {
        b.copy_from_slice(&seq.to_be_bytes());
    }
}

fn steered_cfg(lab: &Lab, mode: AttachMode, port: u16) -> PortConfig {
    let mut cfg = PortConfig::new(&lab.if_a);
    cfg.attach = mode;
    cfg.steer = Some(SteerSpec::new(lab.addr_a).with_tcp_ports(vec![port]));
    cfg
}

fn recv_one(port: &mut Port, timeout: Duration) -> Option<Frame> {
    let mut v = Vec::with_capacity(1);
    let end = Instant::now() + timeout;
    while Instant::now() < end {
        if port.recv(&mut v, 1) == 1 {
            return v.pop();
        }
        port.flush().unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    None
}
