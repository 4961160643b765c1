//! vm-tests: the AF_XDP stack inside QEMU guests with virtio_net NICs.
//!
//! The harness fetches Debian's cloud kernel (`apt-get download`), builds an initramfs
//! (static busybox, the virtio_net module chain, rr-server/xsk-bench/rr-bench with their
//! shared libraries, an /init that serves commands over the serial console), boots it with
//! QEMU on a tap device inside a network namespace of its own, and drives scenarios from the
//! host side of that namespace:
//!
//! * `smoke`: one guest, `rr-server --backend xsk` in it, 1,000 checked request/responses.
//! * `matrix`: attach skb/drv x offloads on/off x shared/dedicated address, kernel-TCP vs
//!   xsk, and a `kill -9` of the server leaving no XDP program behind; per guest kernel
//!   (`--kernels 6.1,new`), optionally with `netem` and `g2g` (`--full`: all of it).
//! * `netem`: netem on the guest's eth0 while rr-bench checks 2,000 responses.
//! * `g2g`: two guests joined by a QEMU socket netdev; xsk and kernel servers in one,
//!   rr-bench in the other (checks, kernel vs xsk, netem in the client guest).
//! * `cost`: guest CPU, kicks, interrupts, sleeps and system calls per request under
//!   `-icount`, for kernel TCP (epoll, io_uring, each with or without the NAPI IRQ-suspension
//!   settings) and xsk (the guest helper `vmt-stats` takes the snapshots).
//! * `scale`: `rr-server --threads 1` vs `2`, kernel TCP and xsk, in a 2-vCPU guest with 2
//!   virtio_net queue pairs (multi-threaded TCG): request rate, guest CPU per request, the
//!   threads' shares.
//! * `batch`: XDP_GENERIC_XMIT_BATCH in our own guest kernel (`vm-tests/kernel/build.sh`,
//!   `--kernel batch`): probe and checks, xsk-bench txonly and RR with batching off and on.
//!
//! Guest kernels: `6.1` (Debian bookworm's cloud kernel from the machine's apt) and `new`
//! (the cloud kernel of a newer suite, default sid, fetched with a private apt state).
//!
//! Everything stays on the machine: the host end is a tap inside the harness's own namespace
//! (198.18.0.0/15), every load is bounded, and guests and namespaces are removed on every
//! exit path (including SIGINT/SIGTERM, and SIGKILL of the harness via PDEATHSIG plus a sweep
//! of stale namespaces on the next run).

pub mod axum;
pub mod batch;
pub mod compare;
pub mod cost;
pub mod cost_counts;
pub mod cost_measure;
pub mod cost_report;
pub mod cost_servers;
pub mod cpio;
pub mod env;
pub mod g2g;
pub mod guest;
pub mod initramfs;
pub mod kernel;
pub mod kernel_apt;
pub mod kernel_modules;
pub mod load;
pub mod matrix;
pub mod matrix_case;
pub mod matrix_report;
pub mod netem;
pub mod netns;
pub mod report;
pub mod scale;
pub mod server;
pub mod smoke;
pub mod tools;
pub mod util;
