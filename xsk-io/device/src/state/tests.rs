use std::fs;
use std::path::Path;

use crate::ethtool::Channels;
use crate::step::Outcome;

use super::files::{check_name, owner_alive, process_start, read_record};
use super::record::MAGIC;
use super::*;

fn sample() -> Record {
    Record {
        pid: 4242,
        pid_start: 99,
        ifname: "tv0".into(),
        ifindex: 7,
        devices: vec![
            DeviceState {
                ifname: "tv0".into(),
                mtu: Some(1500),
                channels: Some(Channels { rx: 2, tx: 2, ..Default::default() }),
                features: vec![("rx-gro".into(), true)],
            },
            DeviceState { ifname: "tv1".into(), mtu: None, channels: None, features: vec![("tx-tcp-segmentation".into(), true), ("tx-udp-segmentation".into(), false)] },
        ],
        sysctls: vec![("net/ipv4/ip_local_port_range".into(), "32768\t60999".into()), ("x/y".into(), "a\\b\nc".into()), ("x/e".into(), "".into())],
    }
}

#[test]
fn record_text_round_trips() {
    let r = sample();
    let t = r.to_text();
    assert!(t.starts_with(MAGIC), "{t}");
    assert!(t.contains("channels rx 2 tx 2 other 0 combined 0\n"), "{t}");
    assert_eq!(Record::parse(&t, Path::new("x")).unwrap(), r);
}

#[test]
fn bad_records_are_refused_with_the_line() {
    let p = Path::new("/run/xsk-io/tv0.state");
    let e = Record::parse("hello", p).unwrap_err().to_string();
    assert!(e.contains("line 1") && e.contains("does not start with"), "{e}");
    let e = Record::parse(&format!("{MAGIC}\ninterface tv0 3\nmtu 1500\n"), p).unwrap_err().to_string();
    assert!(e.contains("line 3") && e.contains("before any device"), "{e}");
    let e = Record::parse(&format!("{MAGIC}\ninterface tv0 3\ndevice tv0\nfeature rx-gro maybe\n"), p).unwrap_err().to_string();
    assert!(e.contains("line 4"), "{e}");
    let e = Record::parse(&format!("{MAGIC}\nowner 1 2\n"), p).unwrap_err().to_string();
    assert!(e.contains("no interface line"), "{e}");
}

#[test]
fn own_process_is_alive_and_a_wrong_start_time_is_not() {
    let me = std::process::id();
    let start = process_start(me).expect("/proc/self/stat");
    assert!(owner_alive(me, start));
    assert!(!owner_alive(me, start + 1), "a reused pid must not pass for the owner");
    assert!(!owner_alive(0, 0));
}

#[test]
fn names_that_would_escape_the_directory_are_refused() {
    for bad in ["", "../etc", "a/b", ".hidden", "a b", "0123456789abcdef"] {
        assert!(matches!(check_name(bad), Err(StateError::BadName(_))), "{bad:?}");
    }
    check_name("eth0").unwrap();
}

/// Lock, record, second owner refused, crash (drop without finish) leaves
/// the record, next owner picks it up. Runs as any user in a temp dir;
/// the interface does not exist, so the device part is skipped.
#[test]
fn second_owner_is_refused_and_a_crash_leaves_the_record() {
    let dir = std::env::temp_dir().join(format!("xsk-io-state-test-{}", std::process::id()));
    // Process-global, but this is the only test that uses the state directory.
    std::env::set_var(STATE_DIR_ENV, &dir);
    let name = "xsknotthere0";
    let (mut a, rec) = Owner::acquire(name).unwrap();
    assert!(rec.pid.is_none());
    a.record_device(DeviceState { ifname: name.into(), mtu: Some(1500), ..Default::default() }).unwrap();
    let e = Owner::acquire(name).unwrap_err();
    assert!(matches!(e, StateError::InUse { .. }), "{e}");
    assert!(e.to_string().contains("this process"), "{e}");
    let on_disk = read_record(a.path()).unwrap().unwrap();
    assert_eq!(on_disk, *a.record());
    let path = a.path().to_path_buf();
    drop(a); // a crash, as far as the files know
    assert!(path.exists(), "the record survives its owner");
    let (b, rec) = Owner::acquire(name).unwrap();
    assert_eq!(rec.pid, Some(std::process::id()));
    assert!(rec.steps.iter().any(|s| matches!(&s.outcome, Outcome::Skipped(w) if w.contains("gone"))), "{:?}", rec.steps);
    assert!(!path.exists(), "applied records are removed");
    assert!(b.finish().is_empty());
    let _ = fs::remove_dir_all(&dir);
}
