//! The decisions: pure functions from a [`DeviceSnapshot`] and the
//! [`TuneOptions`] to a [`Plan`] of checks and changes. No I/O here.
//!
//! Kernel facts used below are cited by function name (Linux 6.x):
//! `xsk_rcv_check` (net/xdp/xsk.c), `netif_receive_generic_xdp`,
//! `generic_xdp_install`, `netif_elide_gro` (net/core/dev.c, netdevice.h),
//! `virtnet_xdp_set`, `virtnet_set_channels`, `virtnet_probe`
//! (drivers/net/virtio_net.c), `veth_xdp_set`, `veth_xmit` (drivers/net/veth.c).

use super::ethtool::{Channels, FeatureState};
use super::snapshot::{vbit, DeviceSnapshot, Peer, VirtioFeatures};
use super::options::{QueueLayout, TuneOptions};
use super::step::{Outcome, Step};
use crate::AttachMode;

use crate::sys::XDP_PACKET_HEADROOM;
pub const ETH_HLEN: u32 = 14;
pub const VLAN_HLEN: u32 = 4;
/// `SKB_DATA_ALIGN(sizeof(struct skb_shared_info))` on x86_64 with the
/// default `MAX_SKB_FRAGS` = 17 (48 + 17 * 16 bytes). Checked on 6.18: a veth
/// peer's `maxmtu` becomes 3506 = 4096 - 256 - 320 - 14 once XDP is attached.
pub const SKB_SHARED_INFO: u32 = 320;
const SMP_CACHE_BYTES: u32 = 64;

const fn skb_data_align(x: u32) -> u32 {
    (x + SMP_CACHE_BYTES - 1) & !(SMP_CACHE_BYTES - 1)
}

/// Largest frame a copy-mode socket accepts: `xsk_rcv_check` drops (and counts
/// in `rx_dropped`) any frame longer than chunk size minus `XDP_PACKET_HEADROOM`
/// minus the UMEM headroom, unless the socket was bound with `XDP_USE_SG`.
pub fn xsk_max_frame(frame_size: u32, umem_headroom: u32) -> u32 {
    frame_size.saturating_sub(XDP_PACKET_HEADROOM + umem_headroom)
}

/// Largest MTU `virtio_net` accepts for a single-buffer (non-frags) XDP
/// program: `max_sz = PAGE_SIZE - SKB_DATA_ALIGN(VIRTIO_XDP_HEADROOM +
/// sizeof(struct skb_shared_info)) - ETH_HLEN` in `virtnet_xdp_set` (3506 on x86_64).
pub fn virtio_xdp_max_mtu(page_size: u32) -> u32 {
    page_size.saturating_sub(skb_data_align(XDP_PACKET_HEADROOM + SKB_SHARED_INFO) + ETH_HLEN)
}

/// The virtio-net header in front of every received frame (`struct
/// virtio_net_hdr_mrg_rxbuf`, 12 bytes with VERSION_1 or MRG_RXBUF).
const VIRTIO_NET_HDR_LEN: u32 = 12;

/// Largest MTU that native XDP on `virtio_net` actually *delivers*: a frame
/// that spans two mergeable buffers is copied into one page together with its
/// virtio-net header (`xdp_linearize_page`), so 12 bytes fewer than the limit
/// `virtnet_xdp_set` enforces. Above it (3495..=3506 on x86_64) attach works
/// and small packets flow, but full-size frames vanish without a counter:
/// found by vm-tests (6.1 and 7.2 guests), so the port refuses it.
pub fn virtio_xdp_usable_mtu(page_size: u32) -> u32 {
    virtio_xdp_max_mtu(page_size).saturating_sub(VIRTIO_NET_HDR_LEN)
}

/// Largest peer MTU `veth` accepts for a single-buffer XDP program:
/// `SKB_WITH_OVERHEAD(PAGE_SIZE - VETH_XDP_HEADROOM) - peer->hard_header_len`
/// in `veth_xdp_set` (VETH_XDP_HEADROOM = 256 + NET_IP_ALIGN, 0 on x86) = 3506.
pub fn veth_xdp_max_peer_mtu(page_size: u32) -> u32 {
    page_size.saturating_sub(XDP_PACKET_HEADROOM + SKB_SHARED_INFO + ETH_HLEN)
}

/// Drivers with a native XDP implementation this module knows how to prepare.
pub fn has_native_xdp(driver: &str) -> bool {
    matches!(driver, "virtio_net" | "veth")
}

/// The change a [`Change`] makes (and, from its originals, how to undo it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// `ETHTOOL_SFEATURES`: `set` the named features; `original` holds their
    /// `requested` bits before, to put back on restore.
    Features {
        ifname: String,
        set: Vec<(String, bool)>,
        original: Vec<(String, bool)>,
    },
    /// `ETHTOOL_SCHANNELS` from `from` to `to`.
    Channels {
        ifname: String,
        from: Channels,
        to: Channels,
    },
}

impl Op {
    /// The operation that undoes this one.
    pub fn undo(&self) -> Op {
        match self {
            Op::Features {
                ifname,
                set,
                original,
            } => Op::Features {
                ifname: ifname.clone(),
                set: original.clone(),
                original: set.clone(),
            },
            Op::Channels { ifname, from, to } => Op::Channels {
                ifname: ifname.clone(),
                from: *to,
                to: *from,
            },
        }
    }
}

/// A change to the device: shown as `what from -> to`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub what: String,
    pub from: String,
    pub to: String,
    pub op: Op,
    /// What to run by hand if the change fails.
    pub fix: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// A check, already decided.
    Check(Step),
    /// A change to make (or, in check-only mode, to report).
    Change(Change),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The resolved mode: `Skb` or `Drv`, never `Auto`.
    pub mode: AttachMode,
    pub items: Vec<Item>,
}

impl Plan {
    pub fn first_failure(&self) -> Option<&Step> {
        self.items.iter().find_map(|i| match i {
            Item::Check(s) if s.is_failed() => Some(s),
            _ => None,
        })
    }

    #[cfg(test)]
    pub fn changes(&self) -> impl Iterator<Item = &Change> {
        self.items.iter().filter_map(|i| match i {
            Item::Change(c) => Some(c),
            _ => None,
        })
    }

    /// The checks only (changes left out).
    #[cfg(test)]
    pub fn checks(&self) -> impl Iterator<Item = &Step> {
        self.items.iter().filter_map(|i| match i {
            Item::Check(s) => Some(s),
            _ => None,
        })
    }
}

fn check(what: impl Into<String>, outcome: Outcome) -> Item {
    Item::Check(Step {
        what: what.into(),
        outcome,
    })
}

fn ok(what: impl Into<String>) -> Item {
    check(what, Outcome::Ok)
}

fn skipped(what: impl Into<String>, why: impl Into<String>) -> Item {
    check(what, Outcome::Skipped(why.into()))
}

fn warn(what: impl Into<String>, note: impl Into<String>, fix: impl Into<String>) -> Item {
    check(
        what,
        Outcome::Warn {
            note: note.into(),
            fix: fix.into(),
        },
    )
}

fn failed(what: impl Into<String>, error: impl Into<String>, fix: impl Into<String>) -> Item {
    check(
        what,
        Outcome::Failed {
            error: error.into(),
            fix: fix.into(),
        },
    )
}

/// Turn features off on `ifname` (one change for the whole group).
fn features_off(what: String, ifname: &str, names: &[(&str, FeatureState)], fix: String) -> Item {
    Item::Change(Change {
        what,
        from: "on".into(),
        to: "off".into(),
        op: Op::Features {
            ifname: ifname.to_string(),
            set: names.iter().map(|(n, _)| (n.to_string(), false)).collect(),
            original: names
                .iter()
                .map(|(n, s)| (n.to_string(), s.requested))
                .collect(),
        },
        fix,
    })
}

/// Decide everything for `s` under `o`. With `AttachMode::Auto`, native mode
/// is chosen for drivers that have it unless its checks fail where generic
/// mode's pass.
pub fn plan(s: &DeviceSnapshot, o: &TuneOptions) -> Plan {
    let d = &s.driver;
    let (mut p, why) = match o.mode {
        AttachMode::Skb | AttachMode::Drv => (plan_for(s, o, o.mode), format!("mode {}", o.mode)),
        AttachMode::Auto if has_native_xdp(d) => {
            let drv = plan_for(s, o, AttachMode::Drv);
            match drv.first_failure() {
                None => (drv, format!("mode auto -> drv ({d} has native XDP)")),
                Some(f) => {
                    let why = format!("mode auto -> skb (native mode fails: {})", f.what);
                    let skb = plan_for(s, o, AttachMode::Skb);
                    if skb.first_failure().is_none() {
                        (skb, why)
                    } else {
                        (
                            drv,
                            format!(
                                "mode auto -> drv ({d} has native XDP; generic mode fails too)"
                            ),
                        )
                    }
                }
            }
        }
        AttachMode::Auto => (
            plan_for(s, o, AttachMode::Skb),
            format!("mode auto -> skb (no native XDP support known for {d})"),
        ),
    };
    p.items.insert(0, ok(why));
    p
}

fn plan_for(s: &DeviceSnapshot, o: &TuneOptions, mode: AttachMode) -> Plan {
    let mut items = vec![frame_fit(s, o)];
    match s.driver.as_str() {
        "virtio_net" => virtio_net(s, o, mode, &mut items),
        "veth" => veth(s, o, mode, &mut items),
        other => {
            items.push(skipped(
                format!("driver {other}"),
                "no specific tuning known",
            ));
            other_driver_queues(s, o, &mut items);
        }
    }
    // virtio_net decides rx-gro-hw itself (it is the guest offloads switch there).
    let skip: &[&str] = if s.driver == "virtio_net" {
        &["rx-gro-hw"]
    } else {
        &[]
    };
    offloads(s, mode, skip, &mut items);
    Plan { mode, items }
}

/// Common: the MTU must fit one UMEM frame. Why: a copy-mode socket without
/// `XDP_USE_SG` drops every frame longer than the frame minus its headroom
/// (`xsk_rcv_check` -> `rx_dropped`), silently as far as the peer is concerned.
/// Counted: Ethernet header and one VLAN tag on top of the MTU.
fn frame_fit(s: &DeviceSnapshot, o: &TuneOptions) -> Item {
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
fn offloads(s: &DeviceSnapshot, mode: AttachMode, skip: &[&str], items: &mut Vec<Item>) {
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
fn other_driver_queues(s: &DeviceSnapshot, o: &TuneOptions, items: &mut Vec<Item>) {
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

fn virtio_net(s: &DeviceSnapshot, o: &TuneOptions, mode: AttachMode, items: &mut Vec<Item>) {
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

fn veth(s: &DeviceSnapshot, o: &TuneOptions, mode: AttachMode, items: &mut Vec<Item>) {
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

#[cfg(test)]
mod tests {
    use super::super::snapshot::PeerSnapshot;
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
}
