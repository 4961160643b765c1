//! Round trips: one ping out and back, and the reflector's rewrite of the
//! frame (`pong`), with the TCP checksum kept valid or left to the device.

use std::time::{Duration, Instant};

use anyhow::Result;

use xsk_io::port::Port;
use xsk_io::umem::Frame;
use xsk_lab::signals;
use xsk_lab::pktgen::{self, FrameSpec};

/// The source port of pingpong's frames, steered back to its socket.
pub(crate) const PING_PORT: u16 = 4000;
/// Round trips kept for the percentiles (4 bytes each).
pub(crate) const MAX_SAMPLES: usize = 20_000_000;

/// What became of one ping.
pub(crate) enum Ping {
    /// Its reply came back after this long.
    Back(Duration),
    /// No reply within 100 ms.
    Lost,
    /// Not sent: no free frame or no TX ring room (completions were taken back).
    NotSent,
}

/// Where the ping's sequence number goes: the first 8 payload bytes after the
/// Ethernet, IPv4 and TCP headers, which the reflector leaves alone.
pub(crate) const SEQ_AT: usize = 54;

/// One round trip: a frame out carrying `seq`, busy-polling the RX ring until the reply
/// with the same `seq` is back (100 ms at most). A late reply to an earlier ping is
/// released and not taken for this one's.
pub(crate) fn ping(port: &mut Port, spec: &FrameSpec, rx: &mut Vec<Frame>, tx_csum: bool, seq: u64) -> Result<Ping> {
    let Some(mut f) = port.alloc() else {
        // Every frame in flight or in a ring: take completions back first.
        port.flush()?;
        return Ok(Ping::NotSent);
    };
    let len = pktgen::build(spec, port.umem().buf_mut(&mut f));
    f.set_len(len);
    {
        let d = port.umem().data_mut(&mut f);
        stamp(d, seq);
        if tx_csum {
            partial_tcp_csum(d);
        }
    }
    let t0 = Instant::now();
    if let Err(f) = send(port, f, tx_csum) {
        port.release(f);
        port.flush()?;
        return Ok(Ping::NotSent);
    }
    port.flush()?;
    let deadline = t0 + Duration::from_millis(100);
    loop {
        if port.recv(rx, 1) > 0 {
            let rtt = t0.elapsed();
            let mut ours = false;
            for mut f in rx.drain(..) {
                let d = port.umem().data_mut(&mut f);
                ours |= d.len() < SEQ_AT + 8 || d[SEQ_AT..SEQ_AT + 8] == seq.to_be_bytes();
                port.release(f);
            }
            if ours {
                return Ok(Ping::Back(rtt));
            }
        }
        if signals::interrupted() || Instant::now() > deadline {
            return Ok(Ping::Lost);
        }
        std::hint::spin_loop();
    }
}

/// Writes `seq` at [`SEQ_AT`] of a TCP frame long enough for it, and its checksum again.
pub(crate) fn stamp(d: &mut [u8], seq: u64) {
    if d.len() < SEQ_AT + 8 {
        return;
    }
    d[SEQ_AT..SEQ_AT + 8].copy_from_slice(&seq.to_be_bytes());
    d[50..52].fill(0);
    let c = pktgen::checksum(&d[34..], u32::from(pseudo_sum(d)));
    d[50..52].copy_from_slice(&c.to_be_bytes());
}

/// Queues `f`, with the TCP checksum offloaded if `tx_csum` (TX metadata: the checksum at
/// offset 16 of the TCP header after a 14-byte Ethernet and a 20-byte IPv4 header).
pub(crate) fn send(port: &mut Port, f: Frame, tx_csum: bool) -> Result<(), Frame> {
    if tx_csum {
        port.split().1.send_csum(f, 34, 16)
    } else {
        port.send(f)
    }
}

/// Writes the pseudo-header sum (not complemented) into the TCP checksum of an
/// Ethernet/IPv4 (20-byte header)/TCP frame: what a CHECKSUM_PARTIAL packet carries.
pub(crate) fn partial_tcp_csum(d: &mut [u8]) {
    if d.len() < 54 || d[12..14] != [0x08, 0x00] || d[14] != 0x45 || d[23] != 6 {
        return;
    }
    let sum = pseudo_sum(d);
    d[50..52].copy_from_slice(&sum.to_be_bytes());
}

/// The folded (not complemented) TCP pseudo-header sum of an Ethernet/IPv4 (20-byte
/// header) frame: addresses, protocol, TCP length from the IP total length.
pub(crate) fn pseudo_sum(d: &[u8]) -> u16 {
    let tcp_len = u32::from(u16::from_be_bytes([d[16], d[17]])).saturating_sub(20);
    // `checksum` complements its folded sum: undone here.
    !pktgen::checksum(&d[26..34], 6 + tcp_len)
}

/// Swaps the IPv4 source and destination and the TCP/UDP ports of an Ethernet frame
/// (checksums stay valid: their sums do not depend on the order).
pub(crate) fn swap_ip_and_ports(d: &mut [u8]) {
    if d.len() < 14 + 20 + 4 || d[12..14] != [0x08, 0x00] {
        return;
    }
    let ihl = usize::from(d[14] & 0x0f) * 4;
    if ihl < 20 || d.len() < 14 + ihl + 4 {
        return;
    }
    for i in 0..4 {
        d.swap(26 + i, 30 + i);
    }
    let l4 = 14 + ihl;
    for i in 0..2 {
        d.swap(l4 + i, l4 + 2 + i);
    }
}
