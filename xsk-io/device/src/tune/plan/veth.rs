//! veth: receive channels, and the peer's MTU, TX queues and segmentation
//! offloads.

use crate::ethtool::{Channels, FeatureState};
use super::super::options::{QueueLayout, TuneOptions};
use super::super::snapshot::{DeviceSnapshot, Peer};
use super::items::{failed, features_off, ok, skipped, warn, Change, Item, Op};
use super::limits::veth_xdp_max_peer_mtu;
use crate::AttachMode;

/// Is `name` one of the segmentation offloads of `NETIF_F_GSO_SOFTWARE`
/// (what veth_xdp_set takes from the peer): every TCP TSO flavour (6.18 adds
/// `tx-tcp-accecn-segmentation`), SCTP, UDP L4, fraglist, and the tunnel
/// (encap) segmentation veth also offers. Not `tx-generic-segmentation`:
/// software GSO segments before `ndo_start_xmit`, which is what we want.
pub fn is_segmentation_offload(name: &str) -> bool {
    (name.starts_with("tx-")
        && name.ends_with("-segmentation")
        && name != "tx-generic-segmentation")
        || name == "tx-gso-list"
}

pub(super) fn veth(s: &DeviceSnapshot, o: &TuneOptions, mode: AttachMode, items: &mut Vec<Item>) {
    let d = &s.driver;
    let ifn = &s.ifname;

    // Queues. Why: veth_xmit delivers to our rx queue numbered like the peer's
    // tx queue; a Single layout needs everything on rx queue 0.
    let mut rx_after = s.rx_queue_count();
    match (o.queues, s.channels) {
        (QueueLayout::Single, Some(ch)) if ch.rx > 1 => {
            let to = Channels { rx: 1, ..ch };
            items.push(Item::Change(Change {
                what: format!("{d}: rx channels"),
                from: ch.rx.to_string(),
                to: "1".into(),
                op: Op::Channels {
                    ifname: ifn.clone(),
                    from: ch,
                    to,
                },
                fix: format!("run: ethtool -L {ifn} rx 1"),
            }));
            rx_after = 1;
        }
        (QueueLayout::Single, _) if rx_after > 1 => items.push(failed(
            format!("{d}: {rx_after} rx queues"),
            "can't read the channel counts to reduce them",
            format!("run: ethtool -L {ifn} rx 1"),
        )),
        (QueueLayout::Single, _) => items.push(ok(format!("{d}: rx queues 1"))),
        (QueueLayout::All, _) => {
            items.push(ok(format!("{d}: {rx_after} rx queues, one socket each")))
        }
    }

    let max_peer_mtu = veth_xdp_max_peer_mtu(s.page_size);
    match (&s.peer, mode) {
        (Peer::Here(p), AttachMode::Drv) => {
            // Why: veth_xdp_set refuses "Peer MTU is too large to set XDP".
            let what = format!("{d}: peer {} mtu {}", p.ifname, p.mtu);
            if p.mtu <= max_peer_mtu {
                items.push(ok(format!("{what} (<= {max_peer_mtu})")));
            } else {
                items.push(failed(
                    what,
                    format!("veth_xdp_set: \"Peer MTU is too large to set XDP\" (max {max_peer_mtu})"),
                    format!("run: ip link set dev {} mtu 1500", p.ifname),
                ));
            }
            // Why: veth_xdp_set refuses "XDP expects number of rx queues not
            // less than peer tx queues": skbs sent on a peer tx queue without
            // a matching rx queue bypass the NAPI/XDP path (veth_xmit).
            let what = format!("{d}: rx queues {rx_after} vs peer {} tx queues {}", p.ifname, p.tx_queues);
            if rx_after >= p.tx_queues {
                items.push(ok(what));
            } else {
                items.push(failed(
                    what,
                    "veth_xdp_set: \"XDP expects number of rx queues not less than peer tx queues\"",
                    format!("run: ethtool -L {} tx {rx_after}", p.ifname),
                ));
            }
            items.push(ok(format!(
                "{d}: peer {} segmentation offloads (veth_xdp_set turns them off while XDP is attached)",
                p.ifname
            )));
        }
        (Peer::Here(p), _) => {
            // Why: with TSO/GSO on, the peer's TCP/UDP stack hands veth_xmit
            // GSO packets of up to 64 KiB that veth forwards unsegmented; the
            // generic program sees them whole (netif_receive_generic_xdp
            // linearizes) and the copy-mode socket drops them. Native mode gets
            // this for free from veth_xdp_set; generic mode doesn't.
            let on: Vec<(&str, FeatureState)> = p
                .features
                .iter()
                .filter(|(n, st)| is_segmentation_offload(n) && st.active)
                .map(|(n, st)| (n.as_str(), *st))
                .collect();
            let changeable: Vec<(&str, FeatureState)> = on.iter().copied().filter(|(_, st)| st.changeable).collect();
            let fixed: Vec<&str> = on.iter().filter(|(_, st)| !st.changeable).map(|(n, _)| *n).collect();
            let what = format!("{d}: peer {} segmentation offloads", p.ifname);
            if !changeable.is_empty() {
                let names: Vec<&str> = changeable.iter().map(|(n, _)| *n).collect();
                let list = if names.len() <= 3 {
                    names.join(", ")
                } else {
                    format!("{} features: tx-*-segmentation, tx-gso-list", names.len())
                };
                items.push(features_off(
                    format!("{what} ({list})"),
                    &p.ifname,
                    &changeable,
                    format!("run: ethtool -K {} tso off tx-udp-segmentation off tx-gso-list off", p.ifname),
                ));
            }
            if !fixed.is_empty() {
                items.push(warn(
                    format!("{what} ({}) fixed on", fixed.join(", ")),
                    "the peer may send GSO packets larger than a frame, which the copy-mode socket drops",
                    "turn them off on the peer",
                ));
            }
            if on.is_empty() {
                items.push(ok(format!("{what} off")));
            }
        }
        (Peer::Elsewhere { ifindex }, AttachMode::Drv) => items.push(skipped(
            format!("{d}: peer checks (peer mtu <= {max_peer_mtu}, peer tx queues <= {rx_after})"),
            format!("peer (ifindex {ifindex}) is in another network namespace; veth_xdp_set checks it at attach"),
        )),
        (Peer::Elsewhere { ifindex }, _) => items.push(warn(
            format!("{d}: peer segmentation offloads"),
            format!(
                "peer (ifindex {ifindex}) is in another network namespace: if its TSO/GSO is on, its \
                 TCP/UDP send GSO packets of up to 64 KiB, which generic XDP passes whole and the \
                 copy-mode socket drops"
            ),
            "in the peer's namespace run: ethtool -K <peer> tso off tx-udp-segmentation off tx-gso-list off",
        )),
        (Peer::NotVeth, _) => items.push(skipped(format!("{d}: peer"), "no veth peer found")),
    }
}
