//! `vm-tests smoke | matrix | netem | g2g | initramfs`: see the library documentation.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use vm_tests::{batch, cost, env, g2g, initramfs, kernel, matrix, netem, scale, smoke, util};

#[derive(Parser, Debug)]
#[command(
    name = "vm-tests",
    version,
    about = "Runs the AF_XDP stack inside QEMU guests with virtio_net NICs",
    after_help = "\
Needs root, qemu-system-x86, busybox-static, iproute2, kmod, xz-utils (and apt to fetch
Debian's linux-image-cloud-amd64 once; --kernel new fetches sid's with a private apt state
under target/vm/apt/, signed by debian-archive-keyring). Guests get a tap device (or, in g2g,
a UDP socket on 127.0.0.1) inside a network namespace that the harness creates and removes
(198.18.0.0/15); nothing leaves the machine.

Exit status: 0 pass, 1 fail or setup error, 2 bad command line.

Examples:
  vm-tests smoke                      # what CI runs (scripts/vm-smoke)
  vm-tests smoke --kernel new         # the same with sid's cloud kernel (7.x)
  vm-tests smoke --attach skb --addr dedicated
  vm-tests matrix --full              # everything: both kernels, netem, guest to guest
  vm-tests matrix --kernels all --runs 3 --run-secs 3
  vm-tests netem --kernel new         # netem on the guest's eth0, 2,000 checked requests
  vm-tests g2g                        # two guests on a QEMU socket netdev
  vm-tests initramfs --kernel new     # only fetch the kernel and build its initramfs
  vm-tests cost                       # guest CPU/kicks/interrupts per request, icount, 6.1 and new
  vm-tests cost --short               # the CI variant (6.1, 1 and 16 connections)
  vm-tests scale                      # rr-server --threads 1 vs 2 in a 2-vCPU, 2-queue guest
  vm-tests/kernel/build.sh            # build the batched-xmit guest kernel (slow), then:
  vm-tests batch                      # option 10 probe + checks, txonly and RR batch off/on
  vm-tests batch --kernel-image PATH  # the same with another bzImage"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// One guest, rr-server --backend xsk inside, 1,000 checked request/responses from the host.
    Smoke(smoke::SmokeArgs),
    /// Attach modes x offloads x addresses, kernel TCP vs xsk, and kill -9 cleanup.
    Matrix(matrix::MatrixArgs),
    /// netem (loss, reordering) on the guest's eth0 while rr-bench checks every response.
    Netem(netem::NetemArgs),
    /// Two guests joined by a QEMU socket netdev: xsk and kernel servers in one, rr-bench in
    /// the other (checks, kernel vs xsk, netem in the client guest).
    G2g(g2g::G2gArgs),
    /// Deterministic guest cost per request under -icount: kernel TCP vs xsk, 1/16/256
    /// connections; CPU (user/sys/softirq), kicks, interrupts and packets per request.
    Cost(cost::CostArgs),
    /// rr-server --threads 1 vs 2 (kernel TCP and xsk) in a 2-vCPU guest whose virtio_net has
    /// 2 queue pairs: req/s, guest CPU per request, per-thread shares (multi-threaded TCG).
    Scale(scale::ScaleArgs),
    /// XDP_GENERIC_XMIT_BATCH (option 10) in our own guest kernel (vm-tests/kernel/build.sh):
    /// probe and checks at 1/8/32/budget, xsk-bench txonly and RR with batch off/on.
    Batch(batch::BatchArgs),
    /// Only fetch the kernel and build the initramfs; print what went in.
    Initramfs(env::Common),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    util::install_signal_handlers();
    let r = match &cli.cmd {
        Cmd::Smoke(a) => smoke::run(a),
        Cmd::Matrix(a) => matrix::run(a),
        Cmd::Netem(a) => netem::run(a),
        Cmd::G2g(a) => g2g::run(a),
        Cmd::Cost(a) => cost::run(a),
        Cmd::Scale(a) => scale::run(a),
        Cmd::Batch(a) => batch::run(a),
        Cmd::Initramfs(c) => build_only(c),
    };
    match r {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("vm-tests: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn build_only(c: &env::Common) -> anyhow::Result<bool> {
    let e = env::Env::prepare(c, "initramfs")?;
    let ks = e.kernel();
    let info = &ks.initramfs;
    println!(
        "kernel     {} ({} {}; {})",
        ks.kernel.vmlinuz.display(),
        ks.kernel.package,
        ks.kernel.version,
        ks.kernel.source
    );
    println!("packages   {}", ks.kernel.packages.join(", "));
    println!(
        "modules.dep {}",
        if ks.kernel.depmod_ran {
            "made with depmod -b (the packages ship none)"
        } else {
            "present"
        }
    );
    println!("initramfs  {} ({} bytes)", info.path.display(), info.bytes);
    println!(
        "modules    load order: {}",
        info.modules
            .load
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!(
        "           built in (of {:?}): {:?}",
        kernel::NIC_MODULES,
        info.modules.builtin
    );
    println!(
        "binaries   {} (stripped: {})",
        info.binaries.join(" "),
        info.stripped
    );
    println!("libraries  {}", info.libraries.join(" "));
    println!("iproute2   ip {}, tc {}; ethtool {}", info.iproute2, info.tc, info.ethtool);
    println!("perf       {}", info.perf);
    for (m, chain) in &info.extra_modules {
        println!(
            "on demand  {m}: {}",
            if chain.is_empty() {
                "built in".to_string()
            } else {
                chain.join(" ")
            }
        );
    }
    if !info.extra_missing.is_empty() {
        println!("missing    {}", info.extra_missing.join(" "));
    }
    for (k, v) in ks.kernel.config_facts() {
        println!("config     {k}={v}");
    }
    let _ = initramfs::INIT;
    Ok(true)
}
