//! Attach the steering program to an interface and print its counters.
//!
//! ```text
//! steer_probe <ifname> [--mode skb|drv|auto] [--addr A.B.C.D] [--port N]...
//!             [--ports LO-HI] [--flags arp,icmp] [--secs N (0 = forever)] [--xsk QUEUE]
//! ```
//!
//! Needs root (CAP_NET_ADMIN + CAP_BPF). Run it inside a network namespace
//! you made for the purpose, e.g. `ip netns exec stst-a steer_probe veth0`.
//!
//! `--xsk Q` binds a bare copy-mode AF_XDP socket to queue Q (UMEM and rings
//! registered, but the fill ring is never filled) and registers it: frames
//! steered to it are counted `steered` by the program and then dropped by
//! the socket for lack of buffers (its `rx_fill_ring_empty_descs` /
//! `rx_dropped` grow). Without `--xsk`, steer decisions fall back to the
//! kernel and are counted `no_socket`.

use std::net::Ipv4Addr;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use xsk_device::steer::{Steer, SteerFlags};
use xsk_io::AttachMode;

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();

    if let Err(e) = run() {
        eprintln!("steer_probe: {e}");
        let mut src = std::error::Error::source(&*e);
        while let Some(s) = src {
            eprintln!("  caused by: {s}");
            src = s.source();
        }
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let ifname = args.next().ok_or("usage: steer_probe <ifname> [options]")?;
    let mut mode = AttachMode::Auto;
    let mut addr = Ipv4Addr::UNSPECIFIED;
    let mut flags = SteerFlags::NONE;
    let mut ports: Vec<std::ops::RangeInclusive<u16>> = Vec::new();
    let mut secs: u64 = 10;
    let mut xsk_queue: Option<u32> = None;
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--mode" => mode = val()?.parse()?,
            "--addr" => addr = val()?.parse()?,
            "--port" => {
                let p: u16 = val()?.parse()?;
                ports.push(p..=p);
            }
            "--ports" => {
                let v = val()?;
                let (lo, hi) = v.split_once('-').ok_or("--ports LO-HI")?;
                ports.push(lo.parse()?..=hi.parse()?);
            }
            "--flags" => {
                for f in val()?.split(',').filter(|f| !f.is_empty()) {
                    flags |= match f {
                        "arp" => SteerFlags::ARP,
                        "icmp" => SteerFlags::ICMP,
                        other => return Err(format!("unknown flag {other:?}").into()),
                    };
                }
            }
            "--secs" => secs = val()?.parse()?,
            "--xsk" => xsk_queue = Some(val()?.parse()?),
            other => return Err(format!("unknown option {other:?}").into()),
        }
    }

    let steer = Steer::attach(&ifname, mode)?;
    println!(
        "attached: if={} ifindex={} mode={} link_id={} pid={}",
        ifname,
        steer.ifindex(),
        steer.mode(),
        steer.link_id(),
        std::process::id()
    );
    steer.set_addr(addr, flags)?;
    for r in &ports {
        steer.add_tcp_port_range(r.clone())?;
    }
    println!("config: addr={addr} flags={flags:?} tcp ports={ports:?}");

    let xsk = match xsk_queue {
        Some(q) => {
            let fd = bare_xsk(steer.ifindex(), q)?;
            steer.register_xsk(q, fd.as_fd())?;
            println!(
                "registered bare AF_XDP socket fd {} on queue {q}",
                fd.as_raw_fd()
            );
            Some(fd)
        }
        None => None,
    };

    let mut tick = 0u64;
    loop {
        std::thread::sleep(Duration::from_secs(1));
        tick += 1;
        let c = steer.counters()?;
        let xs = xsk.as_ref().map(xsk_stats).unwrap_or_default();
        println!(
            "t={tick}s steered={} passed={} no_socket={}{xs}",
            c.steered, c.passed, c.no_socket
        );
        if secs != 0 && tick >= secs {
            break;
        }
    }
    if let Some(q) = xsk_queue {
        steer.unregister_xsk(q)?;
        steer.unregister_xsk(q)?; // idempotent
    }
    drop(steer);
    println!("detached");
    Ok(())
}

/// A copy-mode AF_XDP socket bound to (ifindex, queue), with a 64-frame
/// UMEM and 64-entry rings; enough to be accepted by an XSKMAP.
fn bare_xsk(ifindex: u32, queue: u32) -> Result<OwnedFd, Box<dyn std::error::Error>> {
    const FRAMES: usize = 64;
    const FRAME: usize = 4096;
    unsafe {
        let raw = libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0);
        if raw < 0 {
            return Err(format!("socket(AF_XDP): {}", std::io::Error::last_os_error()).into());
        }
        let fd = OwnedFd::from_raw_fd(raw);
        // Leaked on purpose: the UMEM must outlive the socket; this is a probe.
        let area = libc::mmap(
            std::ptr::null_mut(),
            FRAMES * FRAME,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        if area == libc::MAP_FAILED {
            return Err(format!("mmap: {}", std::io::Error::last_os_error()).into());
        }
        let mut reg: libc::xdp_umem_reg = std::mem::zeroed();
        reg.addr = area as u64;
        reg.len = (FRAMES * FRAME) as u64;
        reg.chunk_size = FRAME as u32;
        let set = |opt, val: *const libc::c_void, len: usize, what: &str| -> Result<(), String> {
            if libc::setsockopt(raw, libc::SOL_XDP, opt, val, len as libc::socklen_t) != 0 {
                return Err(format!(
                    "setsockopt({what}): {}",
                    std::io::Error::last_os_error()
                ));
            }
            Ok(())
        };
        set(
            libc::XDP_UMEM_REG,
            (&reg as *const libc::xdp_umem_reg).cast(),
            size_of_val(&reg),
            "XDP_UMEM_REG",
        )?;
        let n: u32 = FRAMES as u32;
        let np = (&n as *const u32).cast();
        set(libc::XDP_UMEM_FILL_RING, np, 4, "XDP_UMEM_FILL_RING")?;
        set(
            libc::XDP_UMEM_COMPLETION_RING,
            np,
            4,
            "XDP_UMEM_COMPLETION_RING",
        )?;
        set(libc::XDP_RX_RING, np, 4, "XDP_RX_RING")?;
        let mut sa: libc::sockaddr_xdp = std::mem::zeroed();
        sa.sxdp_family = libc::AF_XDP as u16;
        sa.sxdp_flags = libc::XDP_COPY;
        sa.sxdp_ifindex = ifindex;
        sa.sxdp_queue_id = queue;
        if libc::bind(
            raw,
            (&sa as *const libc::sockaddr_xdp).cast(),
            size_of_val(&sa) as libc::socklen_t,
        ) != 0
        {
            return Err(format!(
                "bind(AF_XDP, queue {queue}): {}",
                std::io::Error::last_os_error()
            )
            .into());
        }
        Ok(fd)
    }
}

fn xsk_stats(fd: &OwnedFd) -> String {
    let mut st: libc::xdp_statistics = unsafe { std::mem::zeroed() };
    let mut len = size_of_val(&st) as libc::socklen_t;
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            libc::XDP_STATISTICS,
            (&mut st as *mut libc::xdp_statistics).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return format!(" xsk_stats_err={}", std::io::Error::last_os_error());
    }
    format!(
        " | xsk rx_dropped={} rx_fill_ring_empty={} rx_invalid={}",
        st.rx_dropped, st.rx_fill_ring_empty_descs, st.rx_invalid_descs
    )
}
