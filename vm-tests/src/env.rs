//! What every scenario needs before it boots anything: root, the host tools, no stale
//! namespaces, the guest kernel and a fresh initramfs, and a run folder for the logs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::guest::{Accel, GuestSpec};
use crate::initramfs::{self, InitramfsInfo};
use crate::kernel::{self, GuestKernel, KernelSel};
use crate::netns::{self, HostNet};
use crate::report::{KvTable, ReportHead};
use crate::tools;
use crate::util::{cmd, run, unix_now};

/// Options shared by all scenarios.
#[derive(clap::Args, Debug, Clone)]
pub struct Common {
    /// Acceleration: auto probes KVM with a short boot and falls back to TCG.
    #[arg(long, value_enum, default_value_t = Accel::Auto)]
    pub accel: Accel,
    /// Seconds a KVM guest gets to come up in the auto probe.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub kvm_probe_secs: f64,
    /// QEMU -cpu model under KVM.
    #[arg(long, value_name = "MODEL", default_value = "host")]
    pub kvm_cpu: String,
    /// Seconds a guest gets to come up (TCG, or KVM when forced).
    #[arg(long, value_name = "SECS", default_value_t = 90.0)]
    pub boot_timeout_secs: f64,
    /// Guest memory.
    #[arg(long, value_name = "MB", default_value_t = 256)]
    pub mem_mb: u32,
    /// Guest kernel: 6.1 (what the machine's apt offers: Debian bookworm's cloud kernel) or
    /// new (the cloud kernel of --new-suite, fetched with a private apt state).
    #[arg(long, value_enum, default_value = "6.1")]
    pub kernel: KernelSel,
    /// With `--kernel batch`: boot this bzImage instead of the one vm-tests/kernel/build.sh
    /// made (it needs virtio_pci, virtio_net, BPF and AF_XDP built in; no modules are loaded).
    #[arg(long, value_name = "PATH")]
    pub kernel_image: Option<PathBuf>,
    /// Debian suite of `--kernel new` (sid, forky, trixie-backports, ...).
    #[arg(long, value_name = "SUITE", default_value = crate::kernel_apt::DEFAULT_NEW_SUITE)]
    pub new_suite: String,
    /// Debian mirror of `--kernel new` [default: the one in the machine's apt sources].
    #[arg(long, value_name = "URL")]
    pub new_mirror: Option<String>,
    /// Debian kernel package (metapackage or image package) for the guest.
    #[arg(long, value_name = "PKG", default_value = kernel::DEFAULT_PACKAGE)]
    pub kernel_package: String,
    /// Ask apt again which kernel the package resolves to (else the unpacked one is reused;
    /// for --kernel new this runs apt-get update of the private state).
    #[arg(long)]
    pub refresh_kernel: bool,
    /// Work folder (kernel, initramfs, run logs) [default: <target>/vm].
    #[arg(long, value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// Where rr-server, rr-bench and xsk-bench are [default: <target>/release].
    #[arg(long, value_name = "DIR")]
    pub bin_dir: Option<PathBuf>,
    /// Also write the report as JSON here (it is always written to the run folder).
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,
    /// Ship the host's perf (Debian's linux-perf) in the guest's initramfs and record a
    /// profile of each measured run (set by `cost --profile`).
    #[arg(skip)]
    pub guest_perf: bool,
}

/// One guest kernel with its initramfs.
pub struct KernelSet {
    pub sel: KernelSel,
    pub kernel: GuestKernel,
    pub initramfs: InitramfsInfo,
}

impl KernelSet {
    /// Names of the modules loaded at boot (the NIC chain).
    pub fn modules_loaded(&self) -> Vec<String> {
        self.initramfs
            .modules
            .load
            .iter()
            .map(|(n, _)| n.clone())
            .collect()
    }
}

/// The prepared environment.
pub struct Env {
    pub common: Common,
    pub work: PathBuf,
    pub bin_dir: PathBuf,
    /// This run's logs: `<work>/runs/<scenario>-<time>-<pid>`.
    pub run_dir: PathBuf,
    /// The guest kernels of this run (most scenarios: one, `--kernel`).
    pub kernels: Vec<KernelSet>,
    pub host_kernel: String,
    pub qemu_version: String,
    pub prepare_secs: f64,
    pub started: Instant,
}

/// The cargo target folder: $CARGO_TARGET_DIR, else the workspace's `target`.
pub fn target_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(d);
    }
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap_or(Path::new("."))
        .join("target")
}

impl Env {
    /// Prepares the environment with the one kernel of `--kernel`.
    pub fn prepare(common: &Common, scenario: &str) -> Result<Env> {
        Self::prepare_kernels(common, scenario, &[common.kernel])
    }

    /// Prepares the environment with these guest kernels (each fetched once, each with its own
    /// initramfs: `initramfs.cpio` for 6.1, `initramfs-new.cpio` for new).
    pub fn prepare_kernels(common: &Common, scenario: &str, sels: &[KernelSel]) -> Result<Env> {
        let started = Instant::now();
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            bail!("vm-tests needs root (network namespaces, tap devices, apt-get download)");
        }
        tools::check()?;
        netns::sweep_stale();
        let target = target_dir();
        let work = common.work_dir.clone().unwrap_or_else(|| target.join("vm"));
        // Absolute: apt reads a relative Dir::Etc::SourceList under /etc/apt.
        let work = if work.is_relative() {
            std::env::current_dir()
                .context("reading the current directory")?
                .join(work)
        } else {
            work
        };
        let bin_dir = common
            .bin_dir
            .clone()
            .unwrap_or_else(|| target.join("release"));
        std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
        let run_dir =
            work.join("runs")
                .join(format!("{scenario}-{}-{}", unix_now(), std::process::id()));
        std::fs::create_dir_all(&run_dir)
            .with_context(|| format!("creating {}", run_dir.display()))?;
        prune_runs(&work.join("runs"), 12);

        let mut kernels = Vec::new();
        for &sel in sels {
            let kernel = if sel == KernelSel::Batch {
                kernel::prepare_built(&work, common.kernel_image.as_deref())
            } else {
                kernel::prepare_sel(
                    &work,
                    sel,
                    &common.kernel_package,
                    &common.new_suite,
                    common.new_mirror.as_deref(),
                    common.refresh_kernel,
                )
            }
            .with_context(|| format!("preparing guest kernel {}", sel.label()))?;
            kernel.check_config()?;
            let file = match sel {
                KernelSel::Host => "initramfs.cpio".to_string(),
                other => format!("initramfs-{}.cpio", other.label()),
            };
            let initramfs = initramfs::build(&work, &kernel, &bin_dir, &file, common.guest_perf)?;
            eprintln!(
                "vm-tests: guest kernel {}: {} from {}, modules {}{}, initramfs {:.1} MB",
                sel.label(),
                kernel.describe(),
                kernel.source,
                initramfs
                    .modules
                    .load
                    .iter()
                    .map(|(n, _)| n.as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
                if initramfs.modules.builtin.is_empty() {
                    String::new()
                } else {
                    format!(" (built in: {})", initramfs.modules.builtin.join(" "))
                },
                initramfs.bytes as f64 / 1e6,
            );
            kernels.push(KernelSet {
                sel,
                kernel,
                initramfs,
            });
        }
        let host_kernel = run(&mut cmd("uname", ["-r"]))
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        let qemu_version = run(&mut cmd("qemu-system-x86_64", ["--version"]))
            .ok()
            .and_then(|s| {
                s.lines()
                    .next()
                    .map(|l| l.trim_start_matches("QEMU emulator version ").to_string())
            })
            .unwrap_or_default();
        eprintln!("vm-tests: logs in {}", run_dir.display());
        Ok(Env {
            common: common.clone(),
            work,
            bin_dir,
            run_dir,
            kernels,
            host_kernel,
            qemu_version,
            prepare_secs: started.elapsed().as_secs_f64(),
            started,
        })
    }

    /// The first (for most scenarios the only) kernel.
    pub fn kernel(&self) -> &KernelSet {
        &self.kernels[0]
    }

    /// A guest description for the tap of `net`, with these virtio-net-pci options, booting
    /// the first kernel.
    pub fn spec(&self, name: &str, net: &HostNet, nic_options: &str) -> GuestSpec {
        self.spec_for(self.kernel(), name, net, nic_options)
    }

    /// A guest description for the tap of `net`, with these virtio-net-pci options, booting
    /// `ks`.
    pub fn spec_for(
        &self,
        ks: &KernelSet,
        name: &str,
        net: &HostNet,
        nic_options: &str,
    ) -> GuestSpec {
        self.spec_with(
            ks,
            name,
            net.tap_netdev(),
            net.guest_addr,
            net.prefix_len,
            nic_options,
        )
    }

    /// A guest description with an explicit `-netdev` (e.g. a socket to another guest) and
    /// eth0 address (the MAC is derived from it: 52:54:00:12:<3rd octet>:<4th octet>),
    /// booting `ks`.
    pub fn spec_with(
        &self,
        ks: &KernelSet,
        name: &str,
        netdev: String,
        addr: std::net::Ipv4Addr,
        prefix_len: u8,
        nic_options: &str,
    ) -> GuestSpec {
        GuestSpec {
            name: name.into(),
            kernel: ks.kernel.vmlinuz.clone(),
            initrd: ks.initramfs.path.clone(),
            netdev,
            addr: format!("{addr}/{prefix_len}"),
            mac: format!(
                "52:54:00:12:{:02x}:{:02x}",
                addr.octets()[2],
                addr.octets()[3]
            ),
            nic_options: nic_options.into(),
            mem_mb: self.common.mem_mb,
            smp: 1,
            log_dir: self.run_dir.clone(),
            boot_timeout: Duration::from_secs_f64(self.common.boot_timeout_secs),
            kvm_probe_timeout: Duration::from_secs_f64(self.common.kvm_probe_secs),
            kvm_cpu: self.common.kvm_cpu.clone(),
            icount: None,
            erms: true,
        }
    }

    /// The head of a `scenario` report run in this environment.
    pub fn report_head(&self, scenario: &'static str) -> ReportHead {
        ReportHead::new(scenario, &self.host_kernel, &self.qemu_version)
    }

    /// Writes the report JSON to the run folder, `<work>/<scenario>-report.json` and --json.
    pub fn write_report(&self, scenario: &str, report: &serde_json::Value) -> Result<Vec<PathBuf>> {
        let text = serde_json::to_string_pretty(report)?;
        let mut paths = vec![
            self.run_dir.join("report.json"),
            self.work.join(format!("{scenario}-report.json")),
        ];
        if let Some(p) = &self.common.json {
            paths.push(p.clone());
        }
        for p in &paths {
            std::fs::write(p, &text).with_context(|| format!("writing {}", p.display()))?;
        }
        Ok(paths)
    }

    /// [`Env::write_report`], and a `wrote PATH` line for each file.
    pub fn publish(&self, scenario: &str, report: &serde_json::Value) -> Result<()> {
        for p in self.write_report(scenario, report)? {
            println!("wrote {}", p.display());
        }
        Ok(())
    }

    /// The `time` (since the start) and `logs` rows of a scenario's table.
    pub fn time_and_logs(&self, t: &mut KvTable) {
        t.row(
            "time",
            format!("{:.1} s", self.started.elapsed().as_secs_f64()),
        );
        t.row("logs", self.run_dir.display().to_string());
    }
}

/// Keeps the newest `keep` run folders.
fn prune_runs(dir: &Path, keep: usize) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut v: Vec<(std::time::SystemTime, PathBuf)> = rd
        .filter_map(|e| e.ok())
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    v.sort();
    let n = v.len().saturating_sub(keep);
    for (_, p) in v.into_iter().take(n) {
        let _ = std::fs::remove_dir_all(p);
    }
}
