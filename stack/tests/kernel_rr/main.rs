//! End-to-end request/response on loopback: a `Server` in a thread, a `Client` in the test
//! thread. Every run is bounded by a request count *and* a duration.
//!
//! One suite, two test targets: `kernel_rr` runs it over the kernel backend
//! ([`KernelTransport`], epoll) and `uring_rr` (feature `uring`) over the io_uring backend
//! (`stack::uring::UringTransport`). The target's crate name picks the backend at run time
//! ([`Which`]); a test that builds its own transport is written once, generic over
//! [`Backend`], and [`on_backend!`] calls it with this target's transport type.
//!
//! This file holds what every group shares (the backend choice, the server thread, the client
//! run, the allocation counter); the tests are in the files next to it:
//!
//! | file | what | per backend |
//! |---|---|---|
//! | `main.rs` | that the target runs the backend its name says | same on both |
//! | `services.rs` | `Echo` over each codec, `Kv` | same on both |
//! | `limits.rs` | an oversized frame, back-pressure, no allocation per request | same on both |
//! | `load.rs` | open loop, a refused connect, churn and storms, the loopback baseline | same on both |
//! | `pending.rs` | `Reply::Pending`: answers that come later | same on both |
//! | `shutdown.rs` | `Server::shutdown` | same on both |

use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use rr_load::{Client, ClientConfig, ClientReport, LoadMode, Workload};
use stack::codec::Codec;
use stack::kernel::{KernelConfig, KernelTransport};
use stack::rr::{Handler, Server, ServerConfig, ServerStats};
use stack::Transport;

/// Evaluates `body` with the type name `T` standing for this target's transport type (see
/// [`Which`]): `on_backend!(|T| test_body::<T>())`. A test's body is written once, generic
/// over [`Backend`].
macro_rules! on_backend {
    (|$t:ident| $body:expr) => {
        match $crate::which() {
            $crate::Which::Kernel => {
                type $t = ::stack::kernel::KernelTransport;
                $body
            }
            #[cfg(feature = "uring")]
            $crate::Which::Uring => {
                type $t = ::stack::uring::UringTransport;
                $body
            }
        }
    };
}

mod limits;
mod load;
mod pending;
mod services;
mod shutdown;

const MAX_FRAME: usize = 1 << 20;

/// The backend a test target runs the suite on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Which {
    /// `kernel_rr`: [`KernelTransport`].
    Kernel,
    /// `uring_rr`: `stack::uring::UringTransport` (the target requires feature `uring`).
    #[cfg(feature = "uring")]
    Uring,
}

/// This target's backend, from its crate name (`kernel_rr` or `uring_rr`, Cargo.toml's
/// `[[test]]` names for this one `main.rs`).
fn which() -> Which {
    match env!("CARGO_CRATE_NAME") {
        "kernel_rr" => Which::Kernel,
        #[cfg(feature = "uring")]
        "uring_rr" => Which::Uring,
        other => panic!("test target {other}: no backend for it (kernel_rr, or uring_rr with feature uring)"),
    }
}

/// The target runs the backend its name says: a mix-up would pass every test on the wrong one.
#[test]
fn target_runs_its_backend() {
    let name = on_backend!(|T| T::open().name());
    assert_eq!(format!("{name}_rr"), env!("CARGO_CRATE_NAME"));
}

/// A transport the suite opens: on loopback (127.0.0.1), the backend's default settings.
trait Backend: Transport + Sized + 'static {
    fn open() -> Self;
}

impl Backend for KernelTransport {
    fn open() -> Self {
        KernelTransport::new(KernelConfig::default()).unwrap()
    }
}

#[cfg(feature = "uring")]
impl Backend for stack::uring::UringTransport {
    fn open() -> Self {
        stack::uring::UringTransport::new(stack::uring::UringConfig::default()).unwrap()
    }
}

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
    /// Ends the server's wait at once when it is told to stop: a server with no poll timeout
    /// (the baseline's) would otherwise sleep on after its clients left.
    wake: stack::Waker,
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
        self.wake.wake();
        self.handle.join().expect("server thread panicked")
    }
}

/// A server over this target's backend in a thread of its own.
fn spawn_server<C, H>(codec: C, handler: H, cfg: ServerConfig) -> RunningServer<H>
where
    C: Codec + Clone + Send + 'static,
    H: Handler + Send + 'static,
{
    on_backend!(|T| spawn_server_on::<T, C, H>(codec, handler, cfg))
}

/// A server over `T` in a thread of its own (the transport is made in that thread).
fn spawn_server_on<T, C, H>(codec: C, handler: H, cfg: ServerConfig) -> RunningServer<H>
where
    T: Backend,
    C: Codec + Clone + Send + 'static,
    H: Handler + Send + 'static,
{
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let stop2 = stop.clone();
    let handle = thread::spawn(move || {
        let transport = T::open();
        let mut server = Server::new(transport, codec, handler, cfg).unwrap();
        let wake = server.transport_mut().waker().unwrap();
        tx.send((server.local_addr().unwrap(), wake)).unwrap();
        // Safety net: a test that forgets to stop the server must not hang the suite.
        let limit = Instant::now() + Duration::from_secs(60);
        let allocs = thread_allocs();
        server.run_until(|| stop2.load(Ordering::Relaxed) || Instant::now() > limit).unwrap();
        let allocs = thread_allocs() - allocs;
        let stats = server.stats();
        (stats, server.into_parts().1, allocs)
    });
    let (addr, wake) = rx.recv_timeout(Duration::from_secs(5)).expect("server did not start");
    RunningServer { addr, stop, wake, handle }
}

fn client_cfg(addr: SocketAddrV4, connections: usize, mode: LoadMode, max_requests: u64) -> ClientConfig {
    ClientConfig::new(addr)
        .with_connections(connections)
        .with_mode(mode)
        .with_duration(Duration::from_secs(10))
        .with_max_requests(Some(max_requests))
}

/// A client run over this target's backend, in this thread.
fn run_client<C: Codec + Clone, W: Workload>(codec: C, workload: W, cfg: ClientConfig) -> ClientReport {
    on_backend!(|T| run_client_on::<T, C, W>(codec, workload, cfg))
}

fn run_client_on<T: Backend, C: Codec + Clone, W: Workload>(codec: C, workload: W, cfg: ClientConfig) -> ClientReport {
    Client::new(T::open(), codec, workload, cfg).run().expect("client run failed")
}

fn assert_clean(report: &ClientReport, expected: u64) {
    assert_eq!(report.errors, 0, "{report}");
    assert_eq!(report.lost, 0, "{report}");
    assert_eq!(report.requests, expected, "{report}");
    assert_eq!(report.latency.len(), expected);
}
