//! An embedder's port: the device and its XDP program are yours, the port is
//! `xsk-io`'s alone (no `xsk-device`: no ownership record, no tuning).
//!
//! Your program redirects frames into an `XSKMAP` that you pinned, e.g. with
//! `bpftool map pin` or `bpf_obj_pin`, at `PINNED_XSKMAP`, keyed by queue.
//! This binds `QUEUE` of `IFACE` in copy mode, puts its socket into that map
//! and sends every received frame back to its sender with the Ethernet
//! addresses swapped, for `SECONDS` (default 10), then prints the port's
//! counters.
//!
//! ```text
//! cargo run --release -p xsk-io --example embedder -- IFACE QUEUE PINNED_XSKMAP [SECONDS]
//! ```
//!
//! What your setup must see to: the interface's MTU fits a UMEM frame (1500
//! does), and in generic XDP mode receive aggregation (GRO) is off, or the
//! program sees frames larger than a UMEM frame and the kernel drops them.

use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

use libbpf_rs::{MapCore, MapFlags, MapHandle};
use xsk_io::port::{Port, QueueConfig};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [iface, queue, map, rest @ ..] = args.as_slice() else {
        return Err("usage: embedder IFACE QUEUE PINNED_XSKMAP [SECONDS]".into());
    };
    let queue: u32 = queue.parse()?;
    let seconds: u64 = rest.first().map(|s| s.parse()).transpose()?.unwrap_or(10);

    let mut port = Port::bind(iface, queue, &QueueConfig::default())?;
    let xsks = MapHandle::from_pinned_path(map)?;
    let fd = u32::try_from(port.as_fd().as_raw_fd())?;
    xsks.update(&queue.to_ne_bytes(), &fd.to_ne_bytes(), MapFlags::ANY)?;
    port.log_features();

    let end = Instant::now() + Duration::from_secs(seconds);
    let mut rx = Vec::with_capacity(64); // reserved once: recv does not allocate
    while Instant::now() < end {
        port.recv(&mut rx, 64);
        for mut frame in rx.drain(..) {
            let data = port.umem().data_mut(&mut frame);
            if data.len() >= 12 {
                let (dst, src) = data.split_at_mut(6);
                dst.swap_with_slice(&mut src[..6]);
            }
            if let Err(frame) = port.send(frame) {
                port.release(frame); // TX ring full: drop this one
            }
        }
        port.flush_before_wait()?;
        port.wait(None, Some(Duration::from_millis(100)))?;
    }
    // Out of the map before the socket closes: the program then passes the
    // queue's frames to the kernel again.
    xsks.delete(&queue.to_ne_bytes())?;
    println!("{:?}", port.stats());
    Ok(())
}
