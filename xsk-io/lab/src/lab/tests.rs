use super::names::{base36, parse_base36};
use super::registry::{pid_alive, registry};
use super::*;
use std::collections::HashSet;
use std::process::Command;

#[test]
fn base36_round_trip() {
    for n in [0u64, 1, 35, 36, 4194304, 36u64.pow(6) - 1, u32::MAX as u64] {
        assert_eq!(parse_base36(&base36(n)), Some(n), "{n}");
    }
    assert_eq!(base36(4194304), "2hwcg");
    assert_eq!(parse_base36(""), None);
    assert_eq!(parse_base36("A"), None);
    assert_eq!(parse_base36("-1"), None);
}

#[test]
fn names_fit_ifnamsiz_at_worst_case() {
    let pid_max = 4_194_304; // PID_MAX_LIMIT on 64-bit
    for prefix in ["x", "xb", "lab", "abcd"] {
        for pid in [1, 999, 32768, pid_max] {
            let cap = counter_capacity(prefix.len(), pid);
            assert!(cap >= 36u64.pow(3), "{prefix} {pid}: {cap}");
            for counter in [0, 1, cap / 2, cap - 1] {
                for side in [Side::A, Side::B] {
                    let name = lab_name(prefix, pid, counter, side).unwrap();
                    assert!(name.len() <= MAX_IFNAME_LEN, "{name}");
                    assert_eq!(parse_lab_name(prefix, &name), Some(LabName { pid, counter, side }));
                }
            }
            assert!(lab_name(prefix, pid, cap, Side::A).is_err() || cap == 36u64.pow(8));
        }
    }
}

#[test]
fn names_unique_per_pid_counter_side() {
    let mut seen = HashSet::new();
    for pid in [7, 36, 1296, 4_194_304] {
        for counter in 0..500 {
            for side in [Side::A, Side::B] {
                assert!(seen.insert(lab_name("xb", pid, counter, side).unwrap()));
            }
        }
    }
}

#[test]
fn invalid_prefixes_rejected() {
    for p in ["", "abcde", "x-b", "XB", "x b", "x/"] {
        assert!(lab_name(p, 1, 0, Side::A).is_err(), "{p:?}");
        assert!(LabConfig::new(p).validate().is_err(), "{p:?}");
    }
    assert!(LabConfig::default().validate().is_ok());
    assert!(LabConfig { mtu: 67, ..LabConfig::default() }.validate().is_err());
    assert!(LabConfig { peer_queues: Some(0), ..LabConfig::default() }.validate().is_err());
}

#[test]
fn parse_rejects_foreign_names() {
    assert_eq!(parse_lab_name("xb", "xb-1k-0a").map(|n| n.pid), Some(36 + 20));
    // Another prefix that merely starts with ours.
    assert_eq!(parse_lab_name("xb", "xbq-1k-0a"), None);
    assert_eq!(parse_lab_name("xb", "xb-1k-0c"), None);
    assert_eq!(parse_lab_name("xb", "xb-1k-a"), None); // no counter
    assert_eq!(parse_lab_name("xb", "xb-0-0a"), None); // pid 0
    assert_eq!(parse_lab_name("xb", "xb--0a"), None);
    assert_eq!(parse_lab_name("xb", "xb-1k-0a-x"), None);
    assert_eq!(parse_lab_name("xb", "xb-zzzzzzz-0a"), None); // > i32::MAX
    assert_eq!(parse_lab_name("xb", "docker"), None);
    assert_eq!(parse_lab_name("xb", "xb-1K-0a"), None);
}

#[test]
fn partial_lab_is_torn_down() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping partial_lab_is_torn_down: needs root");
        return;
    }
    let name = lab_name("lu", std::process::id(), 1_000_000 + u64::from(std::process::id() % 1000), Side::A).unwrap();
    {
        let mut partial = Partial(Vec::new());
        assert!(netns_add(&mut partial, &name).unwrap());
        assert!(Netns { name: name.clone() }.exists());
        // Same name again: reported as taken, not as an error.
        assert!(!netns_add(&mut Partial(Vec::new()), &name).unwrap());
    } // dropped as on an error return in Lab::new
    assert!(!Netns { name: name.clone() }.exists());
    assert!(!registry().contains(&name));
}

#[test]
fn pid_liveness() {
    assert!(pid_alive(std::process::id()));
    let mut child = Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    // Reaped: gone unless the pid was reused in the meantime (very unlikely).
    assert!(!pid_alive(pid));
}
