use super::link::validate_ifname;
use super::*;
use libbpf_rs::MapType;
use std::ffi::OsStr;

#[test]
fn shareable_between_threads() {
    fn is<T: Send + Sync>() {}
    is::<Steer>();
    is::<SteerError>();
}

#[test]
fn flags_bits_and_ops() {
    assert_eq!(SteerFlags::NONE.bits(), 0);
    assert_eq!(SteerFlags::ARP.bits(), 1);
    assert_eq!(SteerFlags::ICMP.bits(), 2);
    let both = SteerFlags::ARP | SteerFlags::ICMP;
    assert_eq!(both.bits(), 3);
    assert_eq!(both, SteerFlags::ALL);
    assert!(both.contains(SteerFlags::ARP) && both.contains(SteerFlags::ICMP));
    assert!(!SteerFlags::ARP.contains(SteerFlags::ICMP));
    assert!(SteerFlags::ARP.contains(SteerFlags::NONE));
    assert_eq!(both & SteerFlags::ICMP, SteerFlags::ICMP);
    let mut f = SteerFlags::empty();
    assert!(f.is_empty());
    f |= SteerFlags::ICMP;
    assert_eq!(f, SteerFlags::ICMP);
    assert_eq!(SteerFlags::from_bits(3), Some(both));
    assert_eq!(SteerFlags::from_bits(4), None);
    assert_eq!(format!("{:?}", both), "ARP | ICMP");
    assert_eq!(format!("{:?}", SteerFlags::NONE), "NONE");
    assert_eq!(format!("{:?}", SteerFlags::ICMP), "ICMP");
}

#[test]
fn cfg_encoding_matches_struct_steer_cfg() {
    let a6: std::net::Ipv6Addr = "2001:2::99:1".parse().unwrap();
    let v = encode_cfg(
        Ipv4Addr::new(198, 18, 99, 1),
        SteerFlags::ARP | SteerFlags::ICMP,
        Some((40000, 59999)),
        Some(a6),
    );
    // __be32 addr: the octets in wire order.
    assert_eq!(&v[..4], &[198, 18, 99, 1]);
    // __u32 flags: host order.
    assert_eq!(u32::from_ne_bytes(v[4..8].try_into().unwrap()), 3);
    // __u16 port_lo, port_hi: host order.
    assert_eq!(u16::from_ne_bytes(v[8..10].try_into().unwrap()), 40000);
    assert_eq!(u16::from_ne_bytes(v[10..12].try_into().unwrap()), 59999);
    // __u32 v6: host order; __u8 addr6[16]: wire order.
    assert_eq!(u32::from_ne_bytes(v[12..16].try_into().unwrap()), 1);
    assert_eq!(&v[16..32], &a6.octets());
    assert_eq!(encode_cfg(Ipv4Addr::UNSPECIFIED, SteerFlags::NONE, None, None), [0; 32]);
    let any6 = encode_cfg(Ipv4Addr::UNSPECIFIED, SteerFlags::NONE, None, Some(std::net::Ipv6Addr::UNSPECIFIED));
    assert_eq!((u32::from_ne_bytes(any6[12..16].try_into().unwrap()), &any6[16..]), (1, &[0u8; 16][..]));
    // Port 0 is never steered by range.
    assert_eq!(&encode_cfg(Ipv4Addr::UNSPECIFIED, SteerFlags::NONE, Some((0, 0)), None)[8..12], &[0; 4]);
    assert_eq!(u16::from_ne_bytes(encode_cfg(Ipv4Addr::UNSPECIFIED, SteerFlags::NONE, Some((0, 9)), None)[8..10].try_into().unwrap()), 1);
}

#[test]
fn port_ranges_merge_when_they_touch() {
    assert_eq!(merge_range(None, (40000, 59999)), Some((40000, 59999)));
    assert_eq!(merge_range(Some((40000, 59999)), (60000, 60010)), Some((40000, 60010)));
    assert_eq!(merge_range(Some((40000, 59999)), (30000, 39999)), Some((30000, 59999)));
    assert_eq!(merge_range(Some((40000, 59999)), (45000, 45001)), Some((40000, 59999)));
    assert_eq!(merge_range(Some((40000, 59999)), (7000, 7000)), None);
    assert_eq!(merge_range(Some((40000, 65535)), (65535, 65535)), Some((40000, 65535)));
}

#[test]
fn port_keys_are_host_order_u32() {
    assert_eq!(port_key(7777), 7777u32.to_ne_bytes());
    assert_eq!(port_key(0), [0; 4]);
    assert_eq!(port_key(u16::MAX), 65535u32.to_ne_bytes());
}

#[test]
fn port_ranges_cover_bounds_and_terminate() {
    let all: Vec<u16> = (65530..=u16::MAX).collect();
    assert_eq!(all, [65530, 65531, 65532, 65533, 65534, 65535]);
    assert_eq!((0..=u16::MAX).count(), 65536);
    #[allow(clippy::reversed_empty_ranges)]
    let empty = 10u16..=9;
    assert_eq!(empty.count(), 0);
}

#[test]
fn percpu_sum() {
    let vals = vec![
        5u64.to_ne_bytes().to_vec(),
        7u64.to_ne_bytes().to_vec(),
        vec![],
    ];
    assert_eq!(sum_percpu(&vals), 12);
    assert_eq!(sum_percpu(&[]), 0);
    let c = SteerCounters {
        steered: 5,
        passed: 10,
        no_socket: 1,
        deferred: 4,
        ..Default::default()
    };
    assert_eq!(c.total(), 20);
    assert_eq!(
        c.delta(&SteerCounters {
            steered: 2,
            passed: 10,
            no_socket: 0,
            deferred: 1,
            ..Default::default()
        }),
        SteerCounters {
            steered: 3,
            passed: 0,
            no_socket: 1,
            deferred: 3,
            ..Default::default()
        }
    );
}

#[test]
fn ifname_validation() {
    assert!(validate_ifname("eth0").is_ok());
    assert!(validate_ifname("").is_err());
    assert!(validate_ifname("0123456789abcdef").is_err());
    assert!(validate_ifname("a/b").is_err());
    assert!(validate_ifname("a\0b").is_err());
    assert!(matches!(
        ifindex_of("stst-nx0"),
        Err(SteerError::NoSuchInterface { .. })
    ));
}

#[test]
fn loopback_driver_is_readable_without_privileges() {
    // `lo` has no driver name via ethtool on every kernel; only check
    // that asking does not fail badly.
    let _ = driver_name("lo");
}

#[test]
fn queue_range() {
    assert!(check_queue(0).is_ok());
    assert!(check_queue(MAX_QUEUES - 1).is_ok());
    let e = check_queue(MAX_QUEUES).unwrap_err();
    assert_eq!(
        e.to_string(),
        "queue id 64 is out of range: xsks_map has 64 entries (queues 0..=63)"
    );
}

/// Opening (not loading) the embedded objects needs no privileges: check
/// that they have the program and the maps the loader expects, with the
/// layout the Rust side encodes (`acks` for the deferred-ACK maps).
#[test]
fn embedded_object_layout() {
    for (bytes, acks) in [(&STEER_OBJ.0, false), (&STEER_ACKS_OBJ.0, true)] {
        let obj = ObjectBuilder::default()
            .open_memory(bytes)
            .expect("open the steering object");
        let prog = obj
            .progs()
            .find(|p| p.name() == PROG_NAME)
            .expect("program");
        assert_eq!(prog.section(), OsStr::new("xdp"));
        let find = |name: &str| obj.maps().find(|m| m.name() == name);
        let check = |name: &str, ty: MapType, key: u32, value: u32, max: u32| {
            let m = find(name).unwrap_or_else(|| panic!("map {name}"));
            assert_eq!(m.map_type(), ty, "{name} type");
            assert_eq!(m.key_size(), key, "{name} key size");
            assert_eq!(m.value_size(), value, "{name} value size");
            assert_eq!(m.max_entries(), max, "{name} max entries");
        };
        check(MAP_XSKS, MapType::Xskmap, 4, 4, MAX_QUEUES);
        check(MAP_TCP_PORTS, MapType::Array, 4, 1, 65536);
        check(MAP_CFG, MapType::Array, 4, super::maps::CFG_BYTES as u32, 1);
        check(MAP_COUNTERS, MapType::PercpuArray, 4, 8, CNT_COOKIE + 1);
        if acks {
            check(MAP_ACK_STATE, MapType::Array, 4, xsk_io::acks::SLOT_BYTES as u32, MAX_QUEUES);
            check(MAP_ACK_RINGS, MapType::ArrayOfMaps, 4, 4, MAX_QUEUES);
            check(MAP_SYN_COOKIES, MapType::Array, 4, xsk_io::syncookies::PARAMS_BYTES as u32, MAX_QUEUES);
        } else {
            assert!(find(MAP_ACK_STATE).is_none() && find(MAP_ACK_RINGS).is_none());
            assert!(find(MAP_SYN_COOKIES).is_none());
        }
    }
}

#[test]
fn the_verifiers_verdict_is_the_end_of_its_log() {
    let log: Vec<String> = [
        "libbpf: prog 'xsk_steer': BPF program load failed: Permission denied",
        "libbpf: prog 'xsk_steer': -- BEGIN PROG LOAD LOG --",
        "0: R1=ctx() R10=fp0",
        "; void *data_end = (void *)(long)ctx->data_end;",
        "12: (bf) r3 = r2",
        "R3 pointer arithmetic on pkt_end prohibited",
        "processed 12 insns (limit 1000000) max_states_per_insn 0",
        "-- END PROG LOAD LOG --",
        "libbpf: prog 'xsk_steer': failed to load: -13",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(
        super::object::verifier_verdict(&log).as_deref(),
        Some("R3 pointer arithmetic on pkt_end prohibited")
    );
    assert_eq!(super::object::verifier_verdict(&log[..2]), None, "no log, no verdict");
}
