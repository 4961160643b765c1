//! End-to-end request/response over the kernel backend on loopback: a `Server` in a thread,
//! a `Client` in the test thread. Every run is bounded by a request count *and* a duration.
//!
//! This file holds what every group shares (the server thread, the client run, the allocation
//! counter); the tests are in the files next to it:
//!
//! | file | what |
//! |---|---|
//! | `services.rs` | `Echo` over each codec, `Kv` |
//! | `limits.rs` | an oversized frame, back-pressure, no allocation per request |
//! | `load.rs` | open loop, a refused connect, churn and storms, the loopback baseline |
//! | `pending.rs` | `Reply::Pending`: answers that come later |
//! | `shutdown.rs` | `Server::shutdown` |

use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use rr_load::{Client, ClientConfig, ClientReport, LoadMode, Workload};
use stack::codec::Codec;
use stack::kernel::{KernelConfig, KernelTransport};
use stack::rr::{Handler, Server, ServerConfig, ServerStats};

mod limits;
mod load;
mod pending;
mod services;
mod shutdown;

const MAX_FRAME: usize = 1 << 20;

/// Counts allocations per thread, to check that the request path does not allocate.
struct CountingAlloc;

thread_local! {
    // `const` init and no destructor: accessing it never allocates (no recursion).
    static ALLOCS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

unsafe impl std::alloc::GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        unsafe { std::alloc::System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        unsafe { std::alloc::System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        unsafe { std::alloc::System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

fn thread_allocs() -> u64 {
    ALLOCS.with(|c| c.get())
}

struct RunningServer<H> {
    addr: SocketAddrV4,
    stop: Arc<AtomicBool>,
    /// Stats, handler, and allocations made by the server thread while serving.
    handle: JoinHandle<(ServerStats, H, u64)>,
}

impl<H> RunningServer<H> {
    fn finish(self) -> (ServerStats, H) {
        let (stats, handler, _) = self.finish_counting();
        (stats, handler)
    }

    fn finish_counting(self) -> (ServerStats, H, u64) {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().expect("server thread panicked")
    }
}

fn spawn_server<C, H>(codec: C, handler: H, cfg: ServerConfig) -> RunningServer<H>
where
    C: Codec + Clone + Send + 'static,
    H: Handler + Send + 'static,
{
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let stop2 = stop.clone();
    let handle = thread::spawn(move || {
        let transport = KernelTransport::new(KernelConfig::default()).unwrap();
        let mut server = Server::new(transport, codec, handler, cfg).unwrap();
        tx.send(server.local_addr().unwrap()).unwrap();
        // Safety net: a test that forgets to stop the server must not hang the suite.
        let limit = Instant::now() + Duration::from_secs(60);
        let allocs = thread_allocs();
        server.run_until(|| stop2.load(Ordering::Relaxed) || Instant::now() > limit).unwrap();
        let allocs = thread_allocs() - allocs;
        let stats = server.stats();
        (stats, server.into_parts().1, allocs)
    });
    let addr = rx.recv_timeout(Duration::from_secs(5)).expect("server did not start");
    RunningServer { addr, stop, handle }
}

fn client_cfg(addr: SocketAddrV4, connections: usize, mode: LoadMode, max_requests: u64) -> ClientConfig {
    ClientConfig::new(addr)
        .with_connections(connections)
        .with_mode(mode)
        .with_duration(Duration::from_secs(10))
        .with_max_requests(Some(max_requests))
}

fn run_client<C: Codec + Clone, W: Workload>(codec: C, workload: W, cfg: ClientConfig) -> ClientReport {
    let transport = KernelTransport::new(KernelConfig::default()).unwrap();
    Client::new(transport, codec, workload, cfg).run().expect("client run failed")
}

fn assert_clean(report: &ClientReport, expected: u64) {
    assert_eq!(report.errors, 0, "{report}");
    assert_eq!(report.lost, 0, "{report}");
    assert_eq!(report.requests, expected, "{report}");
    assert_eq!(report.latency.len(), expected);
}
