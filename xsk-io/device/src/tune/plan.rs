//! The decisions: pure functions from a [`DeviceSnapshot`] and the
//! [`TuneOptions`] to a [`Plan`] of checks and changes. No I/O here.
//!
//! Kernel facts used below are cited by function name (Linux 6.x):
//! `xsk_rcv_check` (net/xdp/xsk.c), `netif_receive_generic_xdp`,
//! `generic_xdp_install`, `netif_elide_gro` (net/core/dev.c, netdevice.h),
//! `virtnet_xdp_set`, `virtnet_set_channels`, `virtnet_probe`
//! (drivers/net/virtio_net.c), `veth_xdp_set`, `veth_xmit` (drivers/net/veth.c).


use super::options::TuneOptions;
use super::snapshot::DeviceSnapshot;
use crate::AttachMode;

mod common;
mod items;
mod limits;
mod veth;
mod virtio;

use common::{frame_fit, offloads, other_driver_queues};
pub use items::{Item, Op, Plan};
// Named outside this module only by tune's tests.
#[cfg(test)]
pub use items::Change;
use items::{ok, skipped};
use limits::has_native_xdp;
use veth::veth;
use virtio::virtio_net;

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

#[cfg(test)]
mod tests;
