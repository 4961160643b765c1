//! The kernel backend with the kernel's busy polling in full (socket options and the epoll
//! instance's `EPIOCSPARAMS`) and IRQ suspension's NAPI settings on the interface it serves
//! on: a veth pair between two network namespaces of the test's own (xsk-lab's `Lab`, removed
//! on drop, also when a test panics). Needs root.
//!
//! Each test applies [`NapiTuning`] to the server's veth end, checks the sysfs values changed
//! and `irq-suspend-timeout` was set or its absence detected, serves a bounded echo load
//! with a busy-polling [`KernelTransport`], and checks every value is back after the drop.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use rr_load::{Client, ClientConfig, ClientReport, EchoWorkload, LoadMode};
use stack::codec::LengthPrefixed;
use stack::kernel::{BusyReport, EpollBusy, KernelBusyPoll, KernelConfig, KernelTransport};
use stack::napi::{IrqSuspend, SettingChange, NapiInstances, NapiReport, NapiSettings, NapiState, NapiTuning};
use stack::rr::{Echo, Server, ServerConfig};
use xsk_lab::lab::{Lab, LabConfig};

const MAX_FRAME: usize = 1 << 16;
const REQUESTS: u64 = 400;

fn lab(tag: &str) -> Lab {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "this integration test needs root");
    xsk_lab::lab::sweep_stale(tag);
    Lab::new(&LabConfig { prefix: tag.into(), ..LabConfig::default() }).expect("lab")
}

/// What the server side saw.
struct Served {
    before: NapiState,
    report: NapiReport,
    during: NapiState,
    busy: BusyReport,
    requests: u64,
    after: NapiState,
}

/// Serves echo on `lab.if_a` (in its namespace) with busy polling and `settings` applied,
/// drives `REQUESTS` requests at it from the other namespace, and gives both sides' view.
/// Every wait is bounded.
fn serve_and_load(lab: &Lab, settings: NapiSettings) -> (Served, ClientReport) {
    let stop = Arc::new(AtomicBool::new(false));
    let (addr_tx, addr_rx) = mpsc::channel();
    let (ns_a, if_a, bind) = (lab.ns_a.clone(), lab.if_a.clone(), lab.addr_a);
    let stop2 = stop.clone();
    let server = thread::spawn(move || {
        let _in = ns_a.enter().expect("enter the server namespace");
        let before = NapiState::read(&if_a).expect("read NAPI state");
        let tuning = NapiTuning::apply(&if_a, &settings).expect("apply NAPI settings");
        let report = tuning.report().clone();
        let during = NapiState::read(&if_a).expect("read NAPI state");
        let busy = KernelBusyPoll::new(50).with_budget(16).with_prefer(true);
        let t = KernelTransport::new(KernelConfig::default().with_bind(bind).with_busy(Some(busy))).unwrap();
        let mut server = Server::new(t, LengthPrefixed::new(MAX_FRAME), Echo, ServerConfig::default()).unwrap();
        addr_tx.send(server.local_addr().unwrap()).unwrap();
        let limit = Instant::now() + Duration::from_secs(60);
        server.run_until(|| stop2.load(Ordering::Relaxed) || Instant::now() > limit).unwrap();
        let requests = server.stats().requests;
        let (t, _) = server.into_parts();
        let busy = *t.busy_report();
        drop(t);
        drop(tuning);
        let after = NapiState::read(&if_a).expect("read NAPI state");
        Served { before, report, during, busy, requests, after }
    });
    let addr: SocketAddrV4 = match addr_rx.recv_timeout(Duration::from_secs(10)) {
        Ok(a) => a,
        Err(_) => panic!("server did not start: {:?}", server.join().err()),
    };
    let ns_b = lab.ns_b.clone();
    let client = thread::spawn(move || {
        let _in = ns_b.enter().expect("enter the client namespace");
        let t = KernelTransport::new(KernelConfig::default().with_bind(Ipv4Addr::UNSPECIFIED)).unwrap();
        let cfg = ClientConfig::new(addr)
            .with_connections(4)
            .with_mode(LoadMode::ClosedLoop { depth: 1 })
            .with_duration(Duration::from_secs(10))
            .with_max_requests(Some(REQUESTS));
        Client::new(t, LengthPrefixed::new(MAX_FRAME), EchoWorkload::fixed(64), cfg).run()
    });
    // Stops the server however this function is left (a client panic included), so its
    // thread restores the NAPI settings before the lab goes.
    struct StopOnDrop(Arc<AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let stopping = StopOnDrop(stop);
    let report = client.join().expect("client thread panicked");
    drop(stopping);
    let served = server.join().expect("server thread panicked");
    (served, report.expect("client run"))
}

/// The checks both tests share: the sysfs settings changed and came back, the epoll
/// parameters took, the load was served in full.
fn check_common(s: &Served, c: &ClientReport, settings: &NapiSettings) {
    println!("NAPI: {}", s.report);
    println!("busy: {}", s.busy);
    println!("client: {c}");
    let want_defer = u64::from(settings.defer_hard_irqs.unwrap());
    let want_gro = settings.gro_flush_timeout_ns.unwrap();
    assert_eq!(s.report.defer_hard_irqs, SettingChange::Applied { was: s.before.defer_hard_irqs.unwrap(), now: want_defer });
    assert_eq!(s.report.gro_flush_timeout_ns, SettingChange::Applied { was: s.before.gro_flush_timeout_ns.unwrap(), now: want_gro });
    assert_eq!((s.during.defer_hard_irqs, s.during.gro_flush_timeout_ns), (Some(want_defer), Some(want_gro)));
    assert_ne!(s.before.defer_hard_irqs, Some(want_defer), "the test must see a change");
    assert_eq!(s.after, s.before, "every value restored after the drop");
    // This kernel (6.9+) takes the epoll parameters.
    match s.busy.epoll {
        EpollBusy::Applied(p) => assert_eq!((p.busy_poll_usecs, p.busy_poll_budget, p.prefer_busy_poll), (50, 16, 1)),
        other => panic!("epoll parameters not applied: {other:?} ({})", s.busy),
    }
    assert_eq!((c.errors, c.lost, c.requests), (0, 0, REQUESTS), "{c}");
    assert_eq!(s.requests, REQUESTS);
}

/// A veth as created: without GRO or XDP it has no NAPI instance, so `irq-suspend-timeout`
/// has nothing to be set on. The report must say exactly that, found through netlink (an
/// empty napi-get for the device), and the rest must still be applied and restored.
#[test]
fn busy_kernel_transport_with_irq_suspension_settings_on_a_veth() {
    let lab = lab("nbk");
    let settings = NapiSettings::irq_suspension();
    let (s, c) = serve_and_load(&lab, settings);
    check_common(&s, &c, &settings);
    match &s.report.irq_suspend_timeout_ns {
        IrqSuspend::NoNapiInstance => {
            assert_eq!(s.during.instances, NapiInstances::Listed(Vec::new()), "detected by an empty napi-get");
            assert!(s.report.to_string().contains("no NAPI instance"), "{}", s.report);
        }
        IrqSuspend::Applied(v) => check_applied(v, &s, &settings),
        other => panic!("irq-suspend-timeout: {other:?}; this kernel (6.13+) should have it"),
    }
}

/// A veth with GRO on runs NAPI on receive, so it has instances: `irq-suspend-timeout` is set
/// on each through netlink napi-set, and put back.
#[test]
fn irq_suspend_timeout_on_a_veth_with_napi() {
    let lab = lab("nbg");
    lab.ns_a.run(&["ethtool", "-K", &lab.if_a, "gro", "on"]).expect("ethtool -K gro on");
    let settings = NapiSettings::irq_suspension();
    let (s, c) = serve_and_load(&lab, settings);
    check_common(&s, &c, &settings);
    match &s.report.irq_suspend_timeout_ns {
        IrqSuspend::Applied(v) => check_applied(v, &s, &settings),
        other => panic!("irq-suspend-timeout on a veth with GRO: {other:?} (instances {:?})", s.during.instances),
    }
}

fn check_applied(v: &[stack::napi::NapiInstance], s: &Served, settings: &NapiSettings) {
    let want = settings.irq_suspend_timeout_ns.unwrap();
    assert!(!v.is_empty());
    let NapiInstances::Listed(during) = &s.during.instances else { panic!("{:?}", s.during.instances) };
    let NapiInstances::Listed(before) = &s.before.instances else { panic!("{:?}", s.before.instances) };
    for n in v {
        assert_eq!(n.now, want, "{n:?}");
        assert_eq!(during.iter().find(|d| d.id == n.id).and_then(|d| d.irq_suspend_timeout_ns), Some(want));
        let was = before.iter().find(|b| b.id == n.id).and_then(|b| b.irq_suspend_timeout_ns);
        assert_eq!(was, Some(n.was), "{n:?}");
        assert_ne!(n.was, want, "the test must see a change");
    }
    // The sysfs writes reach the instances too (per-NAPI since 6.13).
    for d in during {
        assert_eq!(d.defer_hard_irqs, settings.defer_hard_irqs.map(u64::from), "{d:?}");
        assert_eq!(d.gro_flush_timeout_ns, settings.gro_flush_timeout_ns, "{d:?}");
    }
}
