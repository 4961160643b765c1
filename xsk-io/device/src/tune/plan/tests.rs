use crate::ethtool::{Channels, FeatureState};
use super::super::options::QueueLayout;
use super::super::snapshot::{vbit, Peer, PeerSnapshot, VirtioFeatures};
use crate::step::{Outcome, Step};
use super::limits::{veth_xdp_max_peer_mtu, virtio_xdp_max_mtu, virtio_xdp_usable_mtu, xsk_max_frame};
use super::veth::is_segmentation_offload;
use super::*;
use std::collections::BTreeMap;

/// The peer's segmentation features as veth on 6.18 has them.
const SEGMENTATION: [&str; 8] = [
    "tx-tcp-segmentation",
    "tx-tcp-ecn-segmentation",
    "tx-tcp-mangleid-segmentation",
    "tx-tcp6-segmentation",
    "tx-tcp-accecn-segmentation",
    "tx-sctp-segmentation",
    "tx-udp-segmentation",
    "tx-gso-list",
];

fn feat(active: bool, changeable: bool) -> FeatureState {
    FeatureState {
        active,
        requested: active,
        changeable,
    }
}

#[test]
fn segmentation_offload_names() {
    for n in SEGMENTATION {
        assert!(is_segmentation_offload(n), "{n}");
    }
    assert!(is_segmentation_offload("tx-udp_tnl-segmentation"));
    assert!(!is_segmentation_offload("tx-generic-segmentation"));
    assert!(!is_segmentation_offload("rx-gro"));
}

fn opts(mode: AttachMode, queues: QueueLayout) -> TuneOptions {
    TuneOptions {
        mode,
        queues,
        frame_size: 4096,
        apply: true,
    }
}

/// A QEMU virtio-net-pci NIC, 4 queue pairs, default offloads, 2 vCPUs.
fn virtio() -> DeviceSnapshot {
    let mut s = DeviceSnapshot::example("virtio_net");
    s.rx_queues = 4;
    s.tx_queues = 4;
    s.channels = Some(Channels {
        max_combined: 4,
        combined: 4,
        ..Default::default()
    });
    s.features = BTreeMap::from([
        ("rx-gro".into(), feat(true, true)),
        ("rx-lro".into(), feat(false, false)),
        ("rx-gro-hw".into(), feat(true, true)),
        ("rx-checksum".into(), feat(true, false)),
    ]);
    s.virtio = Some(VirtioFeatures::from_bits(&[
        0,
        vbit::GUEST_CSUM,
        vbit::CTRL_GUEST_OFFLOADS,
        vbit::GUEST_TSO4,
        vbit::GUEST_TSO6,
        vbit::GUEST_ECN,
        vbit::GUEST_UFO,
        vbit::MRG_RXBUF,
        vbit::MQ,
        vbit::VERSION_1,
    ]));
    s
}

/// virtio without CTRL_GUEST_OFFLOADS (e.g. a minimal vhost-user backend).
fn virtio_no_ctrl() -> DeviceSnapshot {
    let mut s = virtio();
    s.virtio = Some(VirtioFeatures::from_bits(&[
        vbit::GUEST_CSUM,
        vbit::GUEST_TSO4,
        vbit::GUEST_TSO6,
        vbit::MRG_RXBUF,
        vbit::VERSION_1,
    ]));
    s.features.insert("rx-gro-hw".into(), feat(true, false));
    s
}

fn veth(peer: Peer) -> DeviceSnapshot {
    let mut s = DeviceSnapshot::example("veth");
    s.ifname = "tv0".into();
    s.channels = Some(Channels {
        max_rx: 2,
        max_tx: 2,
        rx: 1,
        tx: 1,
        ..Default::default()
    });
    s.features = BTreeMap::from([
        ("rx-gro".into(), feat(true, true)),
        ("rx-lro".into(), feat(false, false)),
        ("rx-gro-hw".into(), feat(false, false)),
    ]);
    s.peer = peer;
    s
}

fn peer_here(mtu: u32, tx_queues: u32, tso: bool) -> Peer {
    Peer::Here(PeerSnapshot {
        ifname: "tv1".into(),
        ifindex: 7,
        mtu,
        tx_queues,
        features: SEGMENTATION
            .iter()
            .map(|n| (n.to_string(), feat(tso, true)))
            .chain([("tx-generic-segmentation".to_string(), feat(true, true))])
            .collect(),
    })
}

fn change<'a>(p: &'a Plan, what: &str) -> Option<&'a Change> {
    p.changes().find(|c| c.what.contains(what))
}

fn step<'a>(p: &'a Plan, what: &str) -> Option<&'a Step> {
    p.checks().find(|s| s.what.contains(what))
}

fn failures(p: &Plan) -> Vec<String> {
    p.checks()
        .filter(|s| s.is_failed())
        .map(|s| s.to_string())
        .collect()
}

#[test]
fn kernel_limits() {
    assert_eq!(virtio_xdp_max_mtu(4096), 3506);
    assert_eq!(virtio_xdp_usable_mtu(4096), 3494);
    assert_eq!(veth_xdp_max_peer_mtu(4096), 3506);
    assert_eq!(xsk_max_frame(4096, 0), 3840);
    assert_eq!(xsk_max_frame(2048, 0), 1792);
    assert_eq!(xsk_max_frame(2048, 64), 1728); // with UMEM headroom
}

#[test]
fn frame_fit_decides_on_mtu_plus_headers() {
    let mut s = DeviceSnapshot::example("e1000");
    let mut o = opts(AttachMode::Skb, QueueLayout::Single);
    o.frame_size = 2048;
    assert!(matches!(
        frame_fit(&s, &o),
        Item::Check(Step {
            outcome: Outcome::Ok,
            ..
        })
    ));
    s.mtu = 1775; // 1775 + 18 = 1793 > 1792
    let Item::Check(st) = frame_fit(&s, &o) else {
        panic!()
    };
    let Outcome::Failed { fix, .. } = &st.outcome else {
        panic!("{st}")
    };
    assert_eq!(
        fix,
        "run: ip link set dev eth0 mtu 1774 (or use a larger frame_size)"
    );
    s.mtu = 1774;
    assert!(!matches!(
        frame_fit(&s, &o),
        Item::Check(Step {
            outcome: Outcome::Failed { .. },
            ..
        })
    ));
    o.frame_size = 256;
    assert!(matches!(
        frame_fit(&s, &o),
        Item::Check(Step {
            outcome: Outcome::Failed { .. },
            ..
        })
    ));
}

#[test]
fn virtio_single_reduces_combined_channels() {
    let p = plan(&virtio(), &opts(AttachMode::Skb, QueueLayout::Single));
    let c = change(&p, "combined channels").expect("channel change");
    assert_eq!((c.from.as_str(), c.to.as_str()), ("4", "1"));
    assert_eq!(c.fix, "run: ethtool -L eth0 combined 1");
    let Op::Channels { to, from, .. } = &c.op else {
        panic!()
    };
    assert_eq!((from.combined, to.combined, to.max_combined), (4, 1, 4));
    // Undo goes back to 4.
    let Op::Channels { to: back, .. } = c.op.undo() else {
        panic!()
    };
    assert_eq!(back.combined, 4);
    // The All layout keeps the channels.
    let p = plan(&virtio(), &opts(AttachMode::Skb, QueueLayout::All));
    assert!(change(&p, "combined channels").is_none());
}

#[test]
fn virtio_drv_reports_dedicated_or_shared_xdp_tx_queues() {
    // Single: 1 + 2 cpus <= 4: dedicated, and RX may spread after attach.
    let p = plan(&virtio(), &opts(AttachMode::Drv, QueueLayout::Single));
    assert!(failures(&p).is_empty(), "{:?}", failures(&p));
    assert!(step(
        &p,
        "XDP TX queues (1 queue pairs + 2 cpus vs 4 max): dedicated"
    )
    .is_some());
    assert!(matches!(
        step(&p, "rx queues after attach").unwrap().outcome,
        Outcome::Warn { .. }
    ));
    // All: 4 + 2 > 4: shared under a lock, not fatal.
    let p = plan(&virtio(), &opts(AttachMode::Drv, QueueLayout::All));
    assert!(failures(&p).is_empty());
    assert!(step(&p, "vs 4 max): shared under a lock").is_some());
    assert!(step(&p, "rx queues after attach").is_none());
    // A single-queue VM (QEMU default): always shared.
    let mut s = virtio();
    s.channels = Some(Channels {
        max_combined: 1,
        combined: 1,
        ..Default::default()
    });
    let p = plan(&s, &opts(AttachMode::Drv, QueueLayout::Single));
    assert!(change(&p, "combined").is_none());
    assert!(step(&p, "1 max): shared").is_some());
}

#[test]
fn virtio_drv_turns_guest_offloads_off_when_controllable() {
    let p = plan(&virtio(), &opts(AttachMode::Drv, QueueLayout::Single));
    let c = change(&p, "rx-gro-hw").expect("rx-gro-hw change");
    assert_eq!(c.to, "off");
    assert_eq!(
        c.op,
        Op::Features {
            ifname: "eth0".into(),
            set: vec![("rx-gro-hw".into(), false)],
            original: vec![("rx-gro-hw".into(), true)]
        }
    );
    // Native mode: software GRO is irrelevant, skipped.
    assert!(matches!(
        step(&p, "virtio_net: rx-gro").unwrap().outcome,
        Outcome::Skipped(_)
    ));
    assert!(!p.changes().any(|c| c.what == "virtio_net: rx-gro"));
    // guest_csum is cleared by the driver at attach.
    assert!(step(&p, "guest_csum (virtnet_xdp_set clears it at attach)").is_some());
}

#[test]
fn virtio_drv_without_ctrl_guest_offloads_fails_with_qemu_hint() {
    let p = plan(
        &virtio_no_ctrl(),
        &opts(AttachMode::Drv, QueueLayout::Single),
    );
    let f = step(&p, "guest offloads").expect("guest offloads step");
    let Outcome::Failed { error, fix } = &f.outcome else {
        panic!("{f}")
    };
    assert!(
        error.contains("Can't set XDP while host is implementing GRO_HW/CSUM"),
        "{error}"
    );
    assert!(
        error.contains("guest_tso4, guest_tso6, guest_csum"),
        "{error}"
    );
    assert_eq!(fix, "start the VM with QEMU -device virtio-net-pci,...,guest_tso4=off,guest_tso6=off,guest_csum=off");
    // Unknown virtio features: decided from the fixed rx-gro-hw, classic hint.
    let mut s = virtio_no_ctrl();
    s.virtio = None;
    let p = plan(&s, &opts(AttachMode::Drv, QueueLayout::Single));
    let Outcome::Failed { fix, .. } = &step(&p, "guest offloads").unwrap().outcome else {
        panic!()
    };
    assert!(
        fix.ends_with(
            "guest_tso4=off,guest_tso6=off,guest_ecn=off,guest_ufo=off,guest_csum=off"
        ),
        "{fix}"
    );
}

#[test]
fn virtio_csum_only_without_ctrl_still_refuses_native() {
    let mut s = virtio_no_ctrl();
    s.virtio = Some(VirtioFeatures::from_bits(&[
        vbit::GUEST_CSUM,
        vbit::VERSION_1,
    ]));
    s.features.insert("rx-gro-hw".into(), feat(false, false));
    let p = plan(&s, &opts(AttachMode::Drv, QueueLayout::Single));
    assert_eq!(failures(&p).len(), 1, "{:?}", failures(&p));
    // Generic mode does not help either: guest_csum is fatal there, so
    // only the QEMU options do.
    let p = plan(&s, &opts(AttachMode::Skb, QueueLayout::Single));
    let w = step(&p, "guest_csum negotiated").unwrap();
    let Outcome::Failed { fix, .. } = &w.outcome else {
        panic!("{w}")
    };
    assert!(fix.ends_with("guest_csum=off"), "{fix}");
}

#[test]
fn virtio_skb_mode_offloads() {
    let p = plan(&virtio(), &opts(AttachMode::Skb, QueueLayout::Single));
    // The only failure: guest_csum (partial checksums in generic mode).
    assert_eq!(failures(&p).len(), 1, "{:?}", failures(&p));
    assert!(change(&p, "virtio_net: rx-gro-hw").is_some());
    assert!(p.changes().any(|c| c.what == "virtio_net: rx-gro"));
    // rx-gro-hw is decided once, by the virtio_net part.
    assert_eq!(
        p.items
            .iter()
            .filter(|i| format!("{i:?}").contains("rx-gro-hw"))
            .count(),
        1
    );
    // guest_csum: a failure naming drv mode and the QEMU options.
    let Outcome::Failed { fix, .. } = &step(&p, "guest_csum negotiated").unwrap().outcome else {
        panic!()
    };
    assert_eq!(
        fix,
        "attach in drv mode (virtio_net turns guest offloads off for native XDP), or start the VM with QEMU -device virtio-net-pci,...,guest_tso4=off,guest_tso6=off,guest_ecn=off,guest_ufo=off,guest_csum=off"
    );
    // Fixed-on guest TSO in generic mode: 64 KiB GSO frames -> fail.
    let p = plan(
        &virtio_no_ctrl(),
        &opts(AttachMode::Skb, QueueLayout::Single),
    );
    let f = failures(&p);
    assert_eq!(f.len(), 2, "{f:?}");
    assert!(
        f.iter().any(|f| f.contains("virtio_net: rx-gro-hw") && f.contains("64 KiB")),
        "{f:?}"
    );
    // Unknown virtio bits: fall back to rx-checksum [fixed] for the warning.
    let mut s = virtio();
    s.virtio = None;
    let p = plan(&s, &opts(AttachMode::Skb, QueueLayout::Single));
    assert!(matches!(
        step(&p, "rx-checksum on [fixed]").unwrap().outcome,
        Outcome::Warn { .. }
    ));
}

#[test]
fn virtio_drv_mtu_limit() {
    let mut s = virtio();
    s.mtu = 3494;
    let p = plan(&s, &opts(AttachMode::Drv, QueueLayout::Single));
    assert!(failures(&p).is_empty(), "{:?}", failures(&p));
    // 3495..=3506: the driver accepts the program but drops full frames.
    s.mtu = 3506;
    let p = plan(&s, &opts(AttachMode::Drv, QueueLayout::Single));
    let f = step(&p, "mtu 3506 for native XDP").unwrap();
    let Outcome::Failed { fix, error } = &f.outcome else {
        panic!("{f}")
    };
    assert_eq!(fix, "run: ip link set dev eth0 mtu 3494");
    assert!(error.contains("3494") && error.contains("3506"), "{error}");
    s.mtu = 3507;
    // Generic mode has no such limit (3507 + 18 fits a 4096 frame); with
    // guest_csum off, nothing else fails there either.
    s.virtio = Some(VirtioFeatures::from_bits(&[vbit::VERSION_1, vbit::CTRL_GUEST_OFFLOADS]));
    assert!(failures(&plan(&s, &opts(AttachMode::Skb, QueueLayout::Single))).is_empty());
    // Auto picks generic then.
    assert_eq!(
        plan(&s, &opts(AttachMode::Auto, QueueLayout::Single)).mode,
        AttachMode::Skb
    );
    // 9000 fails in both: Auto reports the native plan.
    s.mtu = 9000;
    let p = plan(&s, &opts(AttachMode::Auto, QueueLayout::Single));
    assert_eq!(p.mode, AttachMode::Drv);
    assert_eq!(failures(&p).len(), 2, "{:?}", failures(&p));
}

#[test]
fn virtio_legacy_device_without_any_layout() {
    let mut s = virtio();
    s.virtio = Some(VirtioFeatures::from_bits(&[
        vbit::CTRL_GUEST_OFFLOADS,
        vbit::MRG_RXBUF,
    ]));
    let p = plan(&s, &opts(AttachMode::Drv, QueueLayout::Single));
    assert!(step(&p, "legacy device without ANY_LAYOUT").is_some_and(|s| s.is_failed()));
}

#[test]
fn veth_skb_turns_gro_and_peer_segmentation_off() {
    let s = veth(peer_here(1500, 1, true));
    let p = plan(&s, &opts(AttachMode::Skb, QueueLayout::Single));
    assert!(failures(&p).is_empty(), "{:?}", failures(&p));
    let gro = change(&p, "veth: rx-gro").unwrap();
    assert_eq!(gro.to_string_pair(), ("on", "off"));
    assert_eq!(gro.fix, "run: ethtool -K tv0 gro off");
    let seg = change(&p, "peer tv1 segmentation offloads").unwrap();
    let Op::Features {
        ifname,
        set,
        original,
    } = &seg.op
    else {
        panic!()
    };
    assert_eq!(ifname, "tv1");
    assert_eq!(set.len(), SEGMENTATION.len());
    assert!(original.iter().all(|(_, on)| *on));
    // Peer already segmenting in software: nothing to do.
    let p = plan(
        &veth(peer_here(1500, 1, false)),
        &opts(AttachMode::Skb, QueueLayout::Single),
    );
    assert!(step(&p, "peer tv1 segmentation offloads off").is_some());
    // Peer elsewhere: a warning with the command to run there.
    let p = plan(
        &veth(Peer::Elsewhere { ifindex: 2 }),
        &opts(AttachMode::Skb, QueueLayout::Single),
    );
    assert!(matches!(
        step(&p, "peer segmentation").unwrap().outcome,
        Outcome::Warn { .. }
    ));
}

#[test]
fn veth_drv_peer_checks() {
    let o = opts(AttachMode::Drv, QueueLayout::Single);
    let p = plan(&veth(peer_here(1500, 1, true)), &o);
    assert!(failures(&p).is_empty(), "{:?}", failures(&p));
    assert!(matches!(
        step(&p, "veth: rx-gro").unwrap().outcome,
        Outcome::Skipped(_)
    ));
    assert!(
        change(&p, "segmentation").is_none(),
        "the kernel does it in native mode"
    );
    // Peer MTU above 3506.
    let p = plan(&veth(peer_here(9000, 1, true)), &o);
    let f = step(&p, "peer tv1 mtu 9000").unwrap();
    let Outcome::Failed { fix, .. } = &f.outcome else {
        panic!("{f}")
    };
    assert_eq!(fix, "run: ip link set dev tv1 mtu 1500");
    // Peer with 2 tx queues, we have 1 rx queue.
    let p = plan(&veth(peer_here(1500, 2, true)), &o);
    let f = step(&p, "rx queues 1 vs peer tv1 tx queues 2").unwrap();
    assert!(f.is_failed());
    // Peer in another namespace: skipped with a note.
    let p = plan(&veth(Peer::Elsewhere { ifindex: 2 }), &o);
    assert!(matches!(
        step(&p, "peer checks").unwrap().outcome,
        Outcome::Skipped(_)
    ));
    // Auto on veth: native.
    assert_eq!(
        plan(
            &veth(Peer::Elsewhere { ifindex: 2 }),
            &opts(AttachMode::Auto, QueueLayout::Single)
        )
        .mode,
        AttachMode::Drv
    );
}

#[test]
fn veth_single_reduces_rx_channels() {
    let mut s = veth(peer_here(1500, 2, false));
    s.channels = Some(Channels {
        max_rx: 2,
        max_tx: 2,
        rx: 2,
        tx: 1,
        ..Default::default()
    });
    s.rx_queues = 2;
    let p = plan(&s, &opts(AttachMode::Skb, QueueLayout::Single));
    let c = change(&p, "veth: rx channels").unwrap();
    assert_eq!(c.fix, "run: ethtool -L tv0 rx 1");
    let Op::Channels { to, .. } = &c.op else {
        panic!()
    };
    assert_eq!((to.rx, to.tx), (1, 1));
    // Native: after the reduction, 1 rx < 2 peer tx queues fails.
    let p = plan(&s, &opts(AttachMode::Drv, QueueLayout::Single));
    assert!(step(&p, "rx queues 1 vs peer tv1 tx queues 2")
        .unwrap()
        .is_failed());
    // All layout: 2 >= 2.
    let p = plan(&s, &opts(AttachMode::Drv, QueueLayout::All));
    assert!(failures(&p).is_empty(), "{:?}", failures(&p));
}

#[test]
fn other_drivers_get_common_steps_only() {
    let mut s = DeviceSnapshot::example("e1000e");
    s.features = BTreeMap::from([
        ("rx-gro".into(), feat(true, true)),
        ("rx-lro".into(), feat(true, true)),
        ("rx-gro-hw".into(), feat(true, false)),
    ]);
    s.channels = Some(Channels {
        max_combined: 4,
        combined: 4,
        ..Default::default()
    });
    let p = plan(&s, &opts(AttachMode::Auto, QueueLayout::Single));
    assert_eq!(p.mode, AttachMode::Skb);
    assert!(
        matches!(&step(&p, "driver e1000e").unwrap().outcome, Outcome::Skipped(r) if r == "no specific tuning known")
    );
    assert!(change(&p, "e1000e: rx-gro").is_some());
    assert!(change(&p, "e1000e: rx-lro").is_some());
    assert!(step(&p, "e1000e: rx-gro-hw").unwrap().is_failed());
    assert!(
        change(&p, "combined").is_none(),
        "no channel changes on unknown drivers"
    );
    let Outcome::Warn { fix, .. } = &step(&p, "4 rx queues").unwrap().outcome else {
        panic!()
    };
    assert_eq!(
        fix,
        "run: ethtool -L eth0 combined 1 (or use QueueLayout::All)"
    );
}

#[test]
fn legacy_feature_source_only_knows_gro() {
    let mut s = DeviceSnapshot::example("foo");
    s.features = BTreeMap::from([("rx-gro".into(), feat(true, true))]);
    let p = plan(&s, &opts(AttachMode::Skb, QueueLayout::Single));
    assert!(change(&p, "foo: rx-gro").is_some());
    assert!(matches!(
        step(&p, "foo: rx-lro").unwrap().outcome,
        Outcome::Skipped(_)
    ));
}

impl Change {
    fn to_string_pair(&self) -> (&str, &str) {
        (&self.from, &self.to)
    }
}
