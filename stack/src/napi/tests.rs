//! NAPI tuning against a sysfs tree of the test's own (no root needed), and the netlink
//! encoding; the real interface is the integration test's (stack/tests/kernel_busy.rs).

use super::*;
use std::fs;
use std::sync::atomic::{AtomicU32, Ordering};

/// A fake sysfs root under the temp dir, removed on drop.
struct FakeSys(PathBuf);

impl FakeSys {
    /// An interface `iface` with ifindex `ifindex` and these files.
    fn new(iface: &str, ifindex: u32, files: &[(&str, &str)]) -> FakeSys {
        static N: AtomicU32 = AtomicU32::new(0);
        let root = std::env::temp_dir().join(format!("napi-test-{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed)));
        let dir = root.join("class/net").join(iface);
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("ifindex"), format!("{ifindex}\n")).unwrap();
        for (name, content) in files {
            fs::write(dir.join(name), content).unwrap();
        }
        FakeSys(root)
    }

    fn file(&self, iface: &str, name: &str) -> String {
        fs::read_to_string(self.0.join("class/net").join(iface).join(name)).unwrap()
    }
}

impl Drop for FakeSys {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn both_knobs() -> [(&'static str, &'static str); 2] {
    [(DEFER_HARD_IRQS, "0\n"), (GRO_FLUSH_TIMEOUT, "20000\n")]
}

#[test]
fn apply_reports_and_restores_on_drop() {
    let sys = FakeSys::new("eth9", 9, &both_knobs());
    let t = NapiTuning::apply_in(&sys.0, "eth9", &NapiSettings::deferral_only()).unwrap();
    let r = t.report();
    assert_eq!(r.ifindex, 9);
    assert_eq!(r.defer_hard_irqs, SettingChange::Applied { was: 0, now: 100 });
    assert_eq!(r.gro_flush_timeout_ns, SettingChange::Applied { was: 20000, now: 50000 });
    assert_eq!(r.irq_suspend_timeout_ns, IrqSuspend::NotRequested);
    assert_eq!(sys.file("eth9", DEFER_HARD_IRQS), "100\n");
    assert_eq!(sys.file("eth9", GRO_FLUSH_TIMEOUT), "50000\n");
    let line = r.to_string();
    assert!(line.contains("napi_defer_hard_irqs 0 -> 100") && line.contains("gro_flush_timeout 20000 -> 50000 ns"), "{line}");
    drop(t);
    // Written back whole: "0\n", not "0\n" over the longer "100\n".
    assert_eq!(sys.file("eth9", DEFER_HARD_IRQS), "0\n");
    assert_eq!(sys.file("eth9", GRO_FLUSH_TIMEOUT), "20000\n");
}

#[test]
fn explicit_restore_and_untouched_knobs() {
    let sys = FakeSys::new("eth9", 9, &both_knobs());
    let only_gro = NapiSettings { defer_hard_irqs: None, gro_flush_timeout_ns: Some(7), irq_suspend_timeout_ns: None };
    let t = NapiTuning::apply_in(&sys.0, "eth9", &only_gro).unwrap();
    assert_eq!(t.report().defer_hard_irqs, SettingChange::NotRequested);
    assert_eq!(sys.file("eth9", GRO_FLUSH_TIMEOUT), "7\n");
    t.restore().unwrap();
    assert_eq!(sys.file("eth9", GRO_FLUSH_TIMEOUT), "20000\n");
    assert_eq!(sys.file("eth9", DEFER_HARD_IRQS), "0\n");
}

#[test]
fn a_missing_file_is_reported_as_unsupported() {
    // A kernel before 5.7 has gro_flush_timeout but no napi_defer_hard_irqs.
    let sys = FakeSys::new("eth9", 9, &[(GRO_FLUSH_TIMEOUT, "0\n")]);
    let t = NapiTuning::apply_in(&sys.0, "eth9", &NapiSettings::deferral_only()).unwrap();
    assert_eq!(t.report().defer_hard_irqs, SettingChange::Unsupported);
    assert_eq!(t.report().gro_flush_timeout_ns, SettingChange::Applied { was: 0, now: 50000 });
    assert!(t.report().to_string().contains("napi_defer_hard_irqs not in this kernel"));
    drop(t);
    assert_eq!(sys.file("eth9", GRO_FLUSH_TIMEOUT), "0\n");
}

#[test]
fn a_failure_midway_restores_what_was_changed() {
    let sys = FakeSys::new("eth9", 9, &[(DEFER_HARD_IRQS, "2\n"), (GRO_FLUSH_TIMEOUT, "garbage\n")]);
    let err = NapiTuning::apply_in(&sys.0, "eth9", &NapiSettings::deferral_only()).unwrap_err();
    assert!(matches!(err, NapiError::Parse { .. }), "{err}");
    assert!(err.to_string().contains("expected a number"), "{err}");
    assert_eq!(sys.file("eth9", DEFER_HARD_IRQS), "2\n", "restored after the failure");
}

#[test]
fn unknown_interfaces_are_named() {
    let sys = FakeSys::new("eth9", 9, &both_knobs());
    for bad in ["eth8", "", "..", "eth9/../eth9"] {
        let err = NapiTuning::apply_in(&sys.0, bad, &NapiSettings::deferral_only()).unwrap_err();
        assert!(matches!(err, NapiError::NoSuchInterface { .. }), "{bad:?}: {err}");
        assert!(err.to_string().contains("ip link"), "{err}");
    }
}

#[test]
fn state_reads_without_changing() {
    let sys = FakeSys::new("eth9", 1, &both_knobs());
    let st = NapiState::read_in(&sys.0, "eth9").unwrap();
    assert_eq!((st.ifindex, st.defer_hard_irqs, st.gro_flush_timeout_ns), (1, Some(0), Some(20000)));
    // ifindex 1 is the loopback device of this namespace: netlink answers for it (loopback
    // has no NAPI instance), or says what the kernel lacks.
    match &st.instances {
        NapiInstances::Listed(v) => assert!(v.is_empty(), "{v:?}"),
        NapiInstances::Unsupported(why) => eprintln!("napi-get unsupported: {why}"),
    }
}

/// irq-suspend-timeout on a device without NAPI instances: detected and reported, not an
/// error, and the sysfs settings still applied. Loopback (ifindex 1) stands in for the device.
#[test]
fn irq_suspend_without_napi_instances_is_reported() {
    let sys = FakeSys::new("eth9", 1, &both_knobs());
    let t = NapiTuning::apply_in(&sys.0, "eth9", &NapiSettings::irq_suspension()).unwrap();
    match &t.report().irq_suspend_timeout_ns {
        IrqSuspend::NoNapiInstance => {
            assert!(t.report().to_string().contains("no NAPI instance"), "{}", t.report())
        }
        IrqSuspend::Unsupported(why) => eprintln!("kernel lacks it: {why}"),
        other => panic!("loopback has no NAPI instance, got {other:?}"),
    }
    assert_eq!(t.report().defer_hard_irqs, SettingChange::Applied { was: 0, now: 100 });
}

#[test]
fn netlink_messages_encode_and_parse() {
    let m = genl::encode(0x1234, 0x305, 7, 11, 1, &[Attr::U32(1, 5), Attr::Uint(7, 20_000_000), Attr::Uint(6, 1 << 40), Attr::Str(2, "netdev")]);
    assert_eq!(m.len() % 4, 0);
    assert_eq!(u32::from_ne_bytes(m[0..4].try_into().unwrap()) as usize, m.len());
    assert_eq!(u16::from_ne_bytes(m[4..6].try_into().unwrap()), 0x1234);
    assert_eq!(u16::from_ne_bytes(m[6..8].try_into().unwrap()), 0x305);
    assert_eq!(u32::from_ne_bytes(m[8..12].try_into().unwrap()), 7);
    assert_eq!(&m[16..20], &[11, 1, 0, 0]);
    let a: Vec<(u16, Vec<u8>)> = genl::attrs(&m[20..]).map(|(t, d)| (t, d.to_vec())).collect();
    assert_eq!(a.len(), 4);
    assert_eq!((a[0].0, genl::get_uint(&a[0].1)), (1, Some(5)));
    assert_eq!((a[1].0, a[1].1.len(), genl::get_uint(&a[1].1)), (7, 4, Some(20_000_000)), "fits in 4 bytes");
    assert_eq!((a[2].0, a[2].1.len(), genl::get_uint(&a[2].1)), (6, 8, Some(1 << 40)));
    assert_eq!((a[3].0, a[3].1.as_slice()), (2, &b"netdev\0"[..]));
}

#[test]
fn the_netdev_family_resolves() {
    let mut s = GenlSocket::open().unwrap();
    assert!(s.family("nb-nosuchfam").unwrap().is_none());
    let Some(f) = s.family("netdev").unwrap() else {
        eprintln!("no netdev family in this kernel");
        return;
    };
    assert_ne!(f.id, 0);
    assert!(f.ops.contains(&u32::from(NETDEV_CMD_NAPI_GET)), "{f:?}");
}
