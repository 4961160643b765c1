//! The checks every driver gets: the MTU against the frame size, receive
//! aggregation, and the queues of a driver this module does not tune.

use super::super::options::{QueueLayout, TuneOptions};
use super::super::snapshot::DeviceSnapshot;
use super::items::{failed, features_off, ok, skipped, warn, Item};
use super::limits::{virtio_xdp_usable_mtu, xsk_max_frame, ETH_HLEN, VLAN_HLEN};
use xsk_io::sys::XDP_PACKET_HEADROOM;
use crate::AttachMode;

/// Common: the MTU must fit one UMEM frame. Why: a copy-mode socket without
/// `XDP_USE_SG` drops every frame longer than the frame minus its headroom
/// (`xsk_rcv_check` -> `rx_dropped`), silently as far as the peer is concerned.
/// Counted: Ethernet header and one VLAN tag on top of the MTU.
pub(super) fn frame_fit(s: &DeviceSnapshot, o: &TuneOptions) -> Item {
    let d = &s.driver;
    let room = xsk_max_frame(o.frame_size, 0);
    let need = s.mtu + ETH_HLEN + VLAN_HLEN;
    let what = format!("{d}: mtu {} in {}-byte frames", s.mtu, o.frame_size);
    if room <= ETH_HLEN + VLAN_HLEN + 68 {
        return failed(
            what,
            format!(
                "a {}-byte frame leaves {room} bytes after {} bytes of headroom",
                o.frame_size, XDP_PACKET_HEADROOM
            ),
            "use frame_size 4096 (or 2048)",
        );
    }
    if need <= room {
        ok(format!("{what} ({need} <= {room})"))
    } else {
        failed(
            what,
            format!(
                "frames up to {need} bytes (mtu + 18) exceed the {room} bytes a copy-mode frame holds \
                 after {} bytes of headroom; xsk_rcv_check drops them",
                XDP_PACKET_HEADROOM
            ),
            format!("run: ip link set dev {} mtu {} (or use a larger frame_size)", s.ifname, {
                // One step to a working MTU: native XDP on virtio_net allows less still.
                let fit = room - ETH_HLEN - VLAN_HLEN;
                if s.driver == "virtio_net" && o.mode == AttachMode::Drv {
                    fit.min(virtio_xdp_usable_mtu(s.page_size))
                } else {
                    fit
                }
            }),
        )
    }
}

/// Common: GRO, LRO and hardware GRO off.
///
/// Why, generic (skb) mode: the program runs in `__netif_receive_skb_core`,
/// after GRO/LRO built super-frames of up to 64 KiB; `netif_receive_generic_xdp`
/// linearizes them and the copy-mode socket drops anything above the frame
/// size. The kernel elides GRO while a generic program is attached
/// (`netif_elide_gro`) and turns LRO/GRO_HW off on attach (`generic_xdp_install`)
/// but never back on; doing it here closes the window before attach and makes
/// it restorable.
///
/// Why, native mode: the program runs in the driver before GRO, so `rx-gro` is
/// irrelevant; LRO/hardware GRO happen before the driver and still matter.
pub(super) fn offloads(s: &DeviceSnapshot, mode: AttachMode, skip: &[&str], items: &mut Vec<Item>) {
    let d = &s.driver;
    for name in ["rx-gro", "rx-lro", "rx-gro-hw"] {
        if skip.contains(&name) {
            continue;
        }
        let what = format!("{d}: {name}");
        let Some(st) = s.features.get(name).copied() else {
            items.push(skipped(what, "not reported by the driver"));
            continue;
        };
        if mode == AttachMode::Drv && name == "rx-gro" {
            items.push(skipped(what, "native XDP runs in the driver before GRO"));
            continue;
        }
        let short = match name {
            "rx-gro" => "gro",
            "rx-lro" => "lro",
            other => other,
        };
        let fix = format!("run: ethtool -K {} {short} off", s.ifname);
        if !st.active {
            items.push(ok(format!("{what} off")));
        } else if st.changeable {
            items.push(features_off(what, &s.ifname, &[(name, st)], fix));
        } else {
            items.push(failed(
                what,
                format!("{name} is on and fixed: aggregated frames would exceed the copy-mode frame and be dropped"),
                format!("{fix} is refused by the driver: turn receive aggregation off in the device's configuration"),
            ));
        }
    }
}

/// Single layout on drivers we don't tune: only check.
pub(super) fn other_driver_queues(s: &DeviceSnapshot, o: &TuneOptions, items: &mut Vec<Item>) {
    let n = s.rx_queue_count();
    let what = format!("{}: {n} rx queues", s.driver);
    match o.queues {
        QueueLayout::Single if n > 1 => items.push(warn(
            what,
            format!(
                "only queue 0 is bound: frames the NIC steers to queues 1..{} are not seen",
                n - 1
            ),
            format!(
                "run: ethtool -L {} combined 1 (or use QueueLayout::All)",
                s.ifname
            ),
        )),
        _ => items.push(ok(what)),
    }
}
