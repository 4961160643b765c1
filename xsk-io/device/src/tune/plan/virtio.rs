//! virtio_net: channels, the XDP TX queues of native mode, the guest offloads
//! and the MTU.

use crate::ethtool::Channels;
use super::super::options::{QueueLayout, TuneOptions};
use super::super::snapshot::{vbit, DeviceSnapshot, VirtioFeatures};
use super::items::{failed, features_off, ok, skipped, warn, Change, Item, Op};
use super::limits::{virtio_xdp_max_mtu, virtio_xdp_usable_mtu};
use crate::AttachMode;

/// QEMU `-device virtio-net-pci` property names of the guest offload bits.
const QEMU_GUEST_OFFLOADS: [(usize, &str); 7] = [
    (vbit::GUEST_TSO4, "guest_tso4"),
    (vbit::GUEST_TSO6, "guest_tso6"),
    (vbit::GUEST_ECN, "guest_ecn"),
    (vbit::GUEST_UFO, "guest_ufo"),
    (vbit::GUEST_USO4, "guest_uso4"),
    (vbit::GUEST_USO6, "guest_uso6"),
    (vbit::GUEST_CSUM, "guest_csum"),
];

/// The QEMU options that turn off the negotiated guest offloads (all of them,
/// because QEMU only offers guest TSO/ECN/UFO/USO together with guest_csum).
/// Unknown features: the classic list.
fn qemu_offloads_off(v: Option<&VirtioFeatures>) -> String {
    let names: Vec<&str> = match v {
        Some(v) => QEMU_GUEST_OFFLOADS
            .iter()
            .filter(|(b, _)| v.has(*b))
            .map(|(_, n)| *n)
            .collect(),
        None => vec![],
    };
    let names = if names.is_empty() {
        vec![
            "guest_tso4",
            "guest_tso6",
            "guest_ecn",
            "guest_ufo",
            "guest_csum",
        ]
    } else {
        names
    };
    let opts: Vec<String> = names.iter().map(|n| format!("{n}=off")).collect();
    format!(
        "start the VM with QEMU -device virtio-net-pci,...,{}",
        opts.join(",")
    )
}

pub(super) fn virtio_net(s: &DeviceSnapshot, o: &TuneOptions, mode: AttachMode, items: &mut Vec<Item>) {
    let d = &s.driver;
    let ifn = &s.ifname;
    let v = s.virtio.as_ref();

    // (a) Channels. Why: with several queue pairs the host spreads flows over
    // all RX queues; a Single layout binds queue 0 only. Must happen before the
    // program is attached: virtnet_set_channels returns -EINVAL while XDP is loaded.
    let mut queue_pairs = s.channels.map(|c| c.combined);
    match (o.queues, s.channels) {
        (QueueLayout::Single, Some(ch)) if ch.combined > 1 => {
            let to = Channels {
                combined: 1,
                rx: 0,
                tx: 0,
                other: 0,
                ..ch
            };
            items.push(Item::Change(Change {
                what: format!("{d}: combined channels"),
                from: ch.combined.to_string(),
                to: "1".into(),
                op: Op::Channels {
                    ifname: ifn.clone(),
                    from: ch,
                    to,
                },
                fix: format!("run: ethtool -L {ifn} combined 1"),
            }));
            queue_pairs = Some(1);
        }
        (QueueLayout::Single, None) if s.rx_queues > 1 => items.push(failed(
            format!("{d}: {} rx queues", s.rx_queues),
            "ETHTOOL_GCHANNELS failed, so the queue pairs can't be reduced to one",
            format!("run: ethtool -L {ifn} combined 1"),
        )),
        (QueueLayout::Single, _) => items.push(ok(format!("{d}: combined channels 1"))),
        (QueueLayout::All, _) => items.push(ok(format!(
            "{d}: {} rx queues, one socket each",
            s.rx_queue_count()
        ))),
    }

    if mode == AttachMode::Drv {
        // (a') XDP TX queues. Why: virtnet_xdp_set wants nr_cpu_ids extra queue
        // pairs for XDP_TX/REDIRECT; with fewer it warns "XDP request N queues
        // but max is M" and shares the regular TX queues under a lock (before
        // 5.12 it refused with "Too few free TX rings available").
        match (queue_pairs, s.channels) {
            (Some(qp), Some(ch)) => {
                let want = qp + s.nr_cpu_ids;
                let what = format!(
                    "{d}: XDP TX queues ({qp} queue pairs + {} cpus vs {} max)",
                    s.nr_cpu_ids, ch.max_combined
                );
                if want <= ch.max_combined {
                    items.push(ok(format!("{what}: dedicated")));
                    // With dedicated XDP queues virtnet_xdp_set raises the device's
                    // queue pairs and real_num_rx_queues to qp + nr_cpu_ids, so the
                    // host may deliver RX to the new queues too.
                    let note = format!(
                        "after attach the device runs {want} queue pairs and rx queues {qp}..{} can \
                         receive traffic too",
                        want - 1
                    );
                    match o.queues {
                        QueueLayout::Single => items.push(warn(
                            format!("{d}: rx queues after attach"),
                            format!("{note}; only queue 0 is bound"),
                            format!(
                                "use QueueLayout::All, or give the VM fewer than {} queue pairs \
                                 (QEMU queues=1) so XDP shares TX queue locks and RX stays on queue 0",
                                1 + s.nr_cpu_ids
                            ),
                        )),
                        QueueLayout::All => items.push(warn(
                            format!("{d}: rx queues after attach"),
                            note,
                            format!("bind sockets after attaching, on all {want} queues (rx_queue_count())"),
                        )),
                    }
                } else {
                    items.push(ok(format!(
                        "{what}: shared under a lock (slower XDP_TX/REDIRECT)"
                    )));
                }
            }
            _ => items.push(skipped(
                format!("{d}: XDP TX queues"),
                "channel counts unknown",
            )),
        }
    }

    // (b) Guest offloads. rx-gro-hw is virtio_net's switch for the guest
    // TSO4/TSO6/ECN/UFO/USO offloads (virtnet_set_features), changeable only
    // with VIRTIO_NET_F_CTRL_GUEST_OFFLOADS (virtnet_probe).
    let gro_hw = s.features.get("rx-gro-hw").copied();
    let ctrl = v.map(|v| v.has(vbit::CTRL_GUEST_OFFLOADS));
    let gro_bits: Vec<&str> = QEMU_GUEST_OFFLOADS[..6]
        .iter()
        .filter(|(b, _)| v.is_some_and(|v| v.has(*b)))
        .map(|(_, n)| *n)
        .collect();
    let csum = v.map(|v| v.has(vbit::GUEST_CSUM));
    let what = format!("{d}: rx-gro-hw");
    let gro_hw_fixed_on = gro_hw.is_some_and(|g| g.active && !g.changeable);
    match mode {
        AttachMode::Drv => {
            // Why: without CTRL_GUEST_OFFLOADS virtnet_xdp_set refuses any
            // program while a guest offload (TSO/ECN/UFO/USO/CSUM) is negotiated;
            // with it, it clears them itself (virtnet_clear_guest_offloads).
            let refused = match ctrl {
                Some(false) => !gro_bits.is_empty() || csum == Some(true),
                Some(true) => false,
                None => gro_hw_fixed_on,
            };
            if refused {
                let mut neg = gro_bits.clone();
                if csum == Some(true) {
                    neg.push("guest_csum");
                }
                let neg = if neg.is_empty() {
                    "guest TSO".to_string()
                } else {
                    neg.join(", ")
                };
                items.push(failed(
                    format!("{d}: guest offloads"),
                    format!(
                        "no VIRTIO_NET_F_CTRL_GUEST_OFFLOADS and {neg} negotiated: virtnet_xdp_set refuses \
                         native XDP (\"Can't set XDP while host is implementing GRO_HW/CSUM, disable \
                         GRO_HW/CSUM first\")"
                    ),
                    qemu_offloads_off(v),
                ));
            } else {
                match gro_hw {
                    Some(g) if g.active && g.changeable => items.push(features_off(
                        what,
                        ifn,
                        &[("rx-gro-hw", g)],
                        format!("run: ethtool -K {ifn} rx-gro-hw off"),
                    )),
                    Some(g) if g.active => items.push(ok(format!(
                        "{what} on [fixed] (virtnet_xdp_set clears guest offloads at attach)"
                    ))),
                    Some(_) => items.push(ok(format!("{what} off"))),
                    None => items.push(skipped(what, "not reported by the driver")),
                }
                if csum == Some(true) {
                    items.push(ok(format!(
                        "{d}: guest_csum (virtnet_xdp_set clears it at attach)"
                    )));
                }
            }
        }
        _ => {
            // Why: the host hands the guest GSO frames of up to 64 KiB while
            // guest TSO/UFO/USO are on; in generic mode they reach the program
            // whole and the copy-mode socket drops them.
            match gro_hw {
                Some(g) if g.active && g.changeable => items.push(features_off(
                    what,
                    ifn,
                    &[("rx-gro-hw", g)],
                    format!("run: ethtool -K {ifn} rx-gro-hw off"),
                )),
                Some(g) if g.active => items.push(failed(
                    what,
                    "on and fixed (no VIRTIO_NET_F_CTRL_GUEST_OFFLOADS): the host sends GSO frames of up \
                     to 64 KiB, which the copy-mode socket drops",
                    qemu_offloads_off(v),
                )),
                Some(_) => items.push(ok(format!("{what} off"))),
                None => items.push(skipped(what, "not reported by the driver")),
            }
            // Why: with VIRTIO_NET_F_GUEST_CSUM the host may pass packets whose
            // L4 checksum is not filled in (VIRTIO_NET_HDR_F_NEEDS_CSUM ->
            // CHECKSUM_PARTIAL); the socket copies the bytes as they are. Since
            // 2024 virtnet_probe sets rx-checksum always, fixed, so only the
            // virtio feature bits tell.
            let note =
                "frames from senders on the host arrive CHECKSUM_PARTIAL: the copy-mode socket \
                        sees TCP/UDP checksums not filled in, and a stack that checks them drops them";
            match csum {
                // Fatal in generic mode: the frames carry no mark saying which
                // checksums are partial, so the stack could only stop checking
                // them all (found by vm-tests: connections never came up).
                Some(true) => items.push(failed(
                    format!("{d}: guest_csum negotiated"),
                    note,
                    format!(
                        "attach in drv mode (virtio_net turns guest offloads off for native XDP), or {}",
                        qemu_offloads_off(v)
                    ),
                )),
                Some(false) => items.push(ok(format!("{d}: guest_csum off"))),
                None => match s.features.get("rx-checksum") {
                    Some(c) if c.active && !c.changeable => items.push(warn(
                        format!("{d}: rx-checksum on [fixed], virtio features unreadable"),
                        format!("if guest_csum is negotiated, {note}"),
                        qemu_offloads_off(v),
                    )),
                    _ => {}
                },
            }
        }
    }

    if mode == AttachMode::Drv {
        // (c) MTU. Why: without multi-buffer XDP a packet must fit one page
        // next to the headroom and skb_shared_info (virtnet_xdp_set: "MTU too
        // large to enable XDP without frags").
        let max = virtio_xdp_usable_mtu(s.page_size);
        let what = format!("{d}: mtu {} for native XDP", s.mtu);
        if s.mtu <= max {
            items.push(ok(format!("{what} (<= {max})")));
        } else {
            items.push(failed(
                what,
                format!(
                    "single-buffer XDP delivers frames up to MTU {max} (virtnet_xdp_set allows {}, but frames \
                     spanning two buffers are linearised with the 12-byte virtio-net header)",
                    virtio_xdp_max_mtu(s.page_size)
                ),
                format!("run: ip link set dev {ifn} mtu {max}"),
            ));
        }
        // Why: mergeable buffers on a legacy device without ANY_LAYOUT put the
        // header in its own buffer: "XDP expects header/data in single page,
        // any_header_sg required" (virtnet_xdp_set).
        if let Some(v) = v {
            if v.has(vbit::MRG_RXBUF) && !v.has(vbit::ANY_LAYOUT) && !v.has(vbit::VERSION_1) {
                items.push(failed(
                    format!("{d}: legacy device without ANY_LAYOUT"),
                    "XDP expects header/data in single page, any_header_sg required",
                    "use a modern virtio device (QEMU disable-legacy=on) or mrg_rxbuf=off",
                ));
            }
        }
    }
}
