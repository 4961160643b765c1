//! The stack's loop sleeps with no timeout (as rr-server's does): idle, it
//! does not wake up, and a stop set from another thread, with the
//! transport's waker, ends the sleep at once; another signal ends the sleep and
//! goes back to the caller. Needs root.

use std::io::{Read, Write};
use std::net::{SocketAddrV4, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use stack::transport::Transport;
use stack::xsk::{AddrMode, XskTransport};

mod common;
use common::{dedicated, lab, xsk_cfg, xsk_server};

/// Voluntary context switches of one thread of this process so far: a
/// sleeping loop makes one per wake-up.
fn wakeups(tid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap();
    let v = status.lines().find_map(|l| l.strip_prefix("voluntary_ctxt_switches:")).unwrap();
    v.trim().parse().unwrap()
}

/// Idle before any connection and again after one came and went (its
/// timers, the closing handshake's, run out), then stopped by its waker.
#[test]
fn an_idle_server_sleeps_until_woken() {
    let lab = lab("ssy");
    let (mode, a) = dedicated(&lab);
    let cfg = |mode: AddrMode| xsk_cfg(&lab, mode);
    let srv = xsk_server(&lab.ns_a, cfg(mode.clone()), 7113);
    let idle = |what: &str| {
        let before = wakeups(srv.tid);
        std::thread::sleep(Duration::from_secs(1));
        let woke = wakeups(srv.tid) - before;
        // A loop that checked for a stop on a 10 ms timeout would wake about 100 times.
        assert!(woke <= 5, "{what}: the idle server woke {woke} times in a second");
    };
    std::thread::sleep(Duration::from_millis(200));
    idle("before any connection");
    let dst = SocketAddrV4::new(a, 7113);
    lab.ns_b
        .run_in(move || {
            let mut s = TcpStream::connect_timeout(&dst.into(), Duration::from_secs(3)).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            for i in 0..50u32 {
                // The echo service's framing: a u32 big-endian length, then the payload.
                let mut req = 4u32.to_be_bytes().to_vec();
                req.extend_from_slice(&i.to_be_bytes());
                s.write_all(&req).unwrap();
                let mut back = [0u8; 8];
                s.read_exact(&mut back).unwrap();
                assert_eq!(back[..], req[..]);
            }
        })
        .unwrap();
    // The client closed first (TIME-WAIT is its own); the server's side is done at once.
    std::thread::sleep(Duration::from_millis(500));
    idle("after the connection closed");
    let t0 = Instant::now();
    let (stats, _) = srv.finish();
    assert!(t0.elapsed() < Duration::from_secs(1), "the stop took {:?}", t0.elapsed());
    assert_eq!(stats.requests, 50);

    // A wake that comes before the poll ends it, also when the poll arms the timer for a
    // deadline of its own (which replaces the wake's expiry).
    let cfg1 = cfg(mode.clone());
    lab.ns_a
        .run_in(move || {
            let mut t = XskTransport::new(cfg1).unwrap();
            let w = t.waker().unwrap();
            let mut ev = Vec::new();
            for timeout in [None, Some(Duration::from_secs(5))] {
                let watchdog = w.clone();
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_secs(5));
                    watchdog.wake();
                });
                w.wake();
                let t0 = Instant::now();
                t.poll(&mut ev, timeout).unwrap();
                assert!(t0.elapsed() < Duration::from_secs(1), "{timeout:?}: woke after {:?}", t0.elapsed());
            }

            // Another signal's interruption goes back to the caller (its action may have set a
            // flag the caller looks at), without a wake, and is not taken for the timer's.
            let got = Arc::new(AtomicBool::new(false));
            signal_hook::flag::register(libc::SIGUSR2, got.clone()).unwrap();
            // First a poll that ends on its own deadline: the wakes above left the timer armed
            // (5 s), which the sleep below would rightly count.
            t.poll(&mut ev, Some(Duration::from_millis(50))).unwrap();
            let wakes = t.stats().device.timer_wakes;
            // SAFETY: gettid(2) takes no arguments and cannot fail.
            let tid = unsafe { libc::syscall(libc::SYS_gettid) } as libc::pid_t;
            let done = Arc::new(AtomicBool::new(false));
            let sender = {
                let (done, watchdog) = (done.clone(), w.clone());
                std::thread::spawn(move || -> std::io::Result<()> {
                    std::thread::sleep(Duration::from_millis(100));
                    let t0 = Instant::now();
                    // Again until the poll returns: one that came before the sleep began (a
                    // slow start) would only have set the flag.
                    while !done.load(Ordering::SeqCst) {
                        if t0.elapsed() > Duration::from_secs(5) {
                            watchdog.wake();
                            return Ok(());
                        }
                        // SAFETY: tgkill(2) takes integers and touches none of our memory. The
                        // id is the polling thread's, which joins this thread before it ends;
                        // should an assertion end it first, a reused id can only name a thread
                        // of this process, where SIGUSR2 has the flag's action.
                        if unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, libc::SIGUSR2) } != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    Ok(())
                })
            };
            let t0 = Instant::now();
            t.poll(&mut ev, None).unwrap();
            let slept = t0.elapsed();
            done.store(true, Ordering::SeqCst);
            sender.join().unwrap().expect("tgkill");
            // At least until the first signal (100 ms): `got` alone would also be set by the other
            // test's signals where both run in one process (plain `cargo test`).
            assert!(
                slept >= Duration::from_millis(80) && slept < Duration::from_secs(1),
                "the sleep ended after {slept:?}, not on the signals sent from 100 ms on"
            );
            assert!(got.load(Ordering::SeqCst), "no signal came");
            assert_eq!(t.stats().device.timer_wakes, wakes, "another signal was counted as the timer's");
        })
        .unwrap();

    // A transport made on one thread and run on another: the poll's own deadline ends it on
    // time, and a wake from a third thread ends a sleep with no limit.
    let cfg2 = cfg(mode);
    let (done, rx) = mpsc::channel();
    lab.ns_a
        .run_in(move || {
            let mut t = XskTransport::new(cfg2).unwrap();
            let w = t.waker().unwrap();
            std::thread::spawn(move || {
                let mut ev = Vec::new();
                let t0 = Instant::now();
                t.poll(&mut ev, Some(Duration::from_millis(300))).unwrap();
                let deadline = t0.elapsed();
                // Ended by the timer, not by a timeout of poll's own.
                assert!(t.stats().device.timer_wakes >= 1, "the 300 ms poll did not end on the timer");
                let waker = w.clone();
                std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(100));
                    waker.wake();
                });
                let t0 = Instant::now();
                t.poll(&mut ev, None).unwrap();
                done.send((deadline, t0.elapsed())).unwrap();
            });
        })
        .unwrap();
    // A timer that signalled the wrong thread would leave the poll asleep: no watchdog through
    // the same timer can end it, so the test waits here instead.
    let (deadline, woken) = rx.recv_timeout(Duration::from_secs(10)).expect("the moved transport's poll never returned");
    assert!(deadline >= Duration::from_millis(299) && deadline < Duration::from_secs(2), "the 300 ms poll took {deadline:?}");
    assert!(woken < Duration::from_secs(2), "the wake ended the sleep after {woken:?}");
}
