use super::*;
use super::apply::DeviceOps;
use crate::AttachMode;
use ethtool::FeatureState;
use plan::Change;
use snapshot::{Peer, PeerSnapshot};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

/// A fake device: feature `requested` bits per (ifname, feature), channel
/// counts per ifname, a log of calls, and features that refuse to change.
#[derive(Default)]
struct Fake {
    features: HashMap<(String, String), bool>,
    channels: HashMap<String, Channels>,
    stuck: Vec<String>,
    fail_channels: bool,
    log: Arc<Mutex<Vec<String>>>,
}

impl DeviceOps for Fake {
    fn set_features(
        &mut self,
        ifname: &str,
        set: &[(String, bool)],
    ) -> Result<Vec<(String, bool)>, String> {
        self.log.lock().unwrap().push(format!("K {ifname} {set:?}"));
        Ok(set
            .iter()
            .map(|(n, on)| {
                if !self.stuck.contains(n) {
                    self.features.insert((ifname.into(), n.clone()), *on);
                }
                (
                    n.clone(),
                    *self
                        .features
                        .get(&(ifname.into(), n.clone()))
                        .unwrap_or(&true),
                )
            })
            .collect())
    }

    fn set_channels(&mut self, ifname: &str, ch: &Channels) -> Result<(), String> {
        self.log
            .lock()
            .unwrap()
            .push(format!("L {ifname} rx {} combined {}", ch.rx, ch.combined));
        if self.fail_channels {
            return Err("ETHTOOL_SCHANNELS: Invalid argument (os error 22)".into());
        }
        self.channels.insert(ifname.into(), *ch);
        Ok(())
    }
}

fn feat(active: bool, changeable: bool) -> FeatureState {
    FeatureState {
        active,
        requested: active,
        changeable,
    }
}

fn veth() -> DeviceSnapshot {
    let mut s = DeviceSnapshot::example("veth");
    s.ifname = "tv0".into();
    s.channels = Some(Channels {
        max_rx: 2,
        max_tx: 2,
        rx: 2,
        tx: 1,
        ..Default::default()
    });
    s.rx_queues = 2;
    s.features = BTreeMap::from([
        ("rx-gro".into(), feat(true, true)),
        ("rx-lro".into(), feat(false, false)),
    ]);
    s.peer = Peer::Here(PeerSnapshot {
        ifname: "tv1".into(),
        ifindex: 3,
        mtu: 1500,
        tx_queues: 1,
        features: BTreeMap::from([("tx-tcp-segmentation".into(), feat(true, true))]),
    });
    s
}

/// Plan and execute on `fake`; restores go to a second fake sharing its log.
fn run(s: &DeviceSnapshot, o: &TuneOptions, fake: Fake) -> (Result<Tuning, TuneError>, Fake) {
    let mut fake = fake;
    let p = plan::plan(s, o);
    let restore = Box::new(Fake {
        log: fake.log.clone(),
        ..Default::default()
    });
    let r = execute(s, &p, o, &mut fake, restore);
    (r, fake)
}

fn skb() -> TuneOptions {
    TuneOptions {
        mode: AttachMode::Skb,
        ..Default::default()
    }
}

#[test]
fn display_of_steps() {
    let s = Step {
        what: "virtio_net: gro-hw".into(),
        outcome: Outcome::Changed {
            from: "on".into(),
            to: "off".into(),
        },
    };
    assert_eq!(s.to_string(), "virtio_net: gro-hw on -> off");
    let s = Step {
        what: "veth: rx-lro off".into(),
        outcome: Outcome::Ok,
    };
    assert_eq!(s.to_string(), "veth: rx-lro off: ok");
    let s = Step {
        what: "virtio_net: mtu 9000 for native XDP".into(),
        outcome: Outcome::Failed {
            error: "too big".into(),
            fix: "run: ip link set dev eth0 mtu 1500".into(),
        },
    };
    assert_eq!(s.to_string(), "virtio_net: mtu 9000 for native XDP: FAILED: too big (fix: run: ip link set dev eth0 mtu 1500)");
}

#[test]
fn apply_then_restore_in_reverse() {
    let log = Arc::new(Mutex::new(vec![]));
    let (r, _) = run(
        &veth(),
        &skb(),
        Fake {
            log: log.clone(),
            ..Default::default()
        },
    );
    let mut t = r.unwrap();
    assert_eq!(t.mode, AttachMode::Skb);
    let changed: Vec<String> = t
        .steps
        .iter()
        .filter(|s| matches!(s.outcome, Outcome::Changed { .. }))
        .map(|s| s.to_string())
        .collect();
    assert_eq!(
        changed,
        [
            "veth: rx channels 2 -> 1",
            "veth: peer tv1 segmentation offloads (tx-tcp-segmentation) on -> off",
            "veth: rx-gro on -> off"
        ]
    );
    assert_eq!(t.pending_restore(), 3);
    let back: Vec<String> = t.restore().iter().map(|s| s.to_string()).collect();
    assert_eq!(
        back,
        [
            "veth: rx-gro off -> on",
            "veth: peer tv1 segmentation offloads (tx-tcp-segmentation) off -> on",
            "veth: rx channels 1 -> 2"
        ]
    );
    assert!(t.restore().is_empty(), "idempotent");
    let log = log.lock().unwrap().clone();
    assert_eq!(
        log,
        [
            "L tv0 rx 1 combined 0",
            "K tv1 [(\"tx-tcp-segmentation\", false)]",
            "K tv0 [(\"rx-gro\", false)]",
            "K tv0 [(\"rx-gro\", true)]",
            "K tv1 [(\"tx-tcp-segmentation\", true)]",
            "L tv0 rx 2 combined 0",
        ]
    );
}

#[test]
fn check_only_changes_nothing() {
    let log = Arc::new(Mutex::new(vec![]));
    let o = TuneOptions {
        apply: false,
        ..skb()
    };
    let (r, _) = run(
        &veth(),
        &o,
        Fake {
            log: log.clone(),
            ..Default::default()
        },
    );
    let t = r.unwrap();
    assert!(!t.applied);
    assert_eq!(t.pending_restore(), 0);
    assert!(log.lock().unwrap().is_empty());
    assert!(t
        .steps
        .iter()
        .any(|s| s.to_string() == "veth: rx-gro on -> off (check only: not applied)"));
    assert!(
        t.summary().contains("check only, 3 would change"),
        "{}",
        t.summary()
    );
}

#[test]
fn failed_check_applies_nothing_and_reports_everything() {
    let log = Arc::new(Mutex::new(vec![]));
    let mut s = veth();
    s.mtu = 9000;
    let (r, _) = run(
        &s,
        &skb(),
        Fake {
            log: log.clone(),
            ..Default::default()
        },
    );
    let e = r.unwrap_err();
    assert!(log.lock().unwrap().is_empty(), "nothing applied");
    let TuneError::Step {
        step, fix, report, ..
    } = &e
    else {
        panic!("{e}")
    };
    assert_eq!(step, "veth: mtu 9000 in 4096-byte frames");
    assert_eq!(
        fix,
        "run: ip link set dev tv0 mtu 3822 (or use a larger frame_size)"
    );
    assert!(report.iter().any(
        |s| matches!(&s.outcome, Outcome::Skipped(r) if r.contains("not applied because"))
    ));
    assert!(e
        .to_string()
        .contains("fix: run: ip link set dev tv0 mtu 3822"));
}

#[test]
fn failed_change_rolls_back_earlier_ones() {
    let log = Arc::new(Mutex::new(vec![]));
    let fake = Fake {
        log: log.clone(),
        stuck: vec!["rx-gro".into()],
        ..Default::default()
    };
    let (r, _) = run(&veth(), &skb(), fake);
    let e = r.unwrap_err();
    let TuneError::Step {
        step,
        error,
        report,
        ..
    } = &e
    else {
        panic!("{e}")
    };
    assert_eq!(step, "veth: rx-gro");
    assert!(error.contains("rx-gro stays on"), "{error}");
    let lines: Vec<String> = report.iter().map(|s| s.to_string()).collect();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("rollback: veth: rx channels 1 -> 2")),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("rollback: veth: peer tv1 segmentation")),
        "{lines:#?}"
    );
}

#[test]
fn channel_failure_names_the_ethtool_fix() {
    let mut s = DeviceSnapshot::example("virtio_net");
    s.channels = Some(Channels {
        max_combined: 4,
        combined: 4,
        ..Default::default()
    });
    s.rx_queues = 4;
    let (r, _) = run(
        &s,
        &skb(),
        Fake {
            fail_channels: true,
            ..Default::default()
        },
    );
    let e = r.unwrap_err();
    assert_eq!(e.fix(), "run: ethtool -L eth0 combined 1");
    assert!(
        e.to_string()
            .starts_with("virtio_net: combined channels: ETHTOOL_SCHANNELS: Invalid argument"),
        "{e}"
    );
}

#[test]
fn drop_restores() {
    let log = Arc::new(Mutex::new(vec![]));
    let (r, _) = run(
        &veth(),
        &skb(),
        Fake {
            log: log.clone(),
            ..Default::default()
        },
    );
    drop(r.unwrap());
    assert_eq!(log.lock().unwrap().len(), 6, "3 changes, 3 restores");
}

#[test]
fn queue_layout_parses() {
    assert_eq!("single".parse::<QueueLayout>(), Ok(QueueLayout::Single));
    assert_eq!("all".parse::<QueueLayout>(), Ok(QueueLayout::All));
    assert!("some".parse::<QueueLayout>().is_err());
}

#[allow(dead_code)]
fn _plan_types_are_public(c: Change) -> Op {
    c.op
}
