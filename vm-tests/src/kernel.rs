//! The guest kernel: Debian's `linux-image-cloud-amd64` (a metapackage) resolved to the real
//! image package, fetched with `apt-get download` into the work folder and unpacked there; its
//! modules (the virtio_net chain) resolved through modules.dep and modules.builtin.
//!
//! The machine's apt configuration is only read, never changed. Once unpacked, the kernel is
//! reused from `target/vm/kernel/` without asking apt again (`--refresh-kernel` re-resolves).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::kernel_apt::{
    candidate_version, download, host_mirror, kernel_parts, resolve_package, source_name, AptSource,
    PrivateApt,
};
use crate::tools;
use crate::util::{cmd, run};

/// Default metapackage: Debian's kernel for cloud VMs (virtio drivers as modules).
pub const DEFAULT_PACKAGE: &str = "linux-image-cloud-amd64";

/// Modules the guest must have for its NIC: `virtio_pci` (the PCI transport, pulls
/// virtio, virtio_ring, virtio_pci_modern_dev and virtio_pci_legacy_dev) and `virtio_net`
/// (pulls net_failover and failover). Each is either built in or loaded with its
/// dependencies first.
pub const NIC_MODULES: &[&str] = &["virtio_pci", "virtio_net"];

/// Which guest kernel a run boots (`--kernel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum, Serialize, Deserialize)]
pub enum KernelSel {
    /// The kernel the machine's own apt offers (Debian bookworm: 6.1). Nothing in apt's
    /// configuration is changed.
    #[value(name = "6.1", alias = "host")]
    #[serde(rename = "6.1")]
    Host,
    /// A current kernel from a newer Debian suite (`--new-suite`, default sid), fetched with a
    /// private apt state under `<work>/apt/<suite>` (the machine's sources stay as they are).
    #[value(name = "new")]
    #[serde(rename = "new")]
    New,
    /// Our own build of the new kernel's source with XDP_GENERIC_XMIT_BATCH
    /// (`vm-tests/kernel/build.sh`, cached in `<work>/kbuild/`), or any bzImage given with
    /// `--kernel-image` (everything the guest needs built in).
    #[value(name = "batch")]
    #[serde(rename = "batch")]
    Batch,
}

impl KernelSel {
    pub const ALL: [KernelSel; 2] = [KernelSel::Host, KernelSel::New];

    pub fn label(self) -> &'static str {
        match self {
            KernelSel::Host => "6.1",
            KernelSel::New => "new",
            KernelSel::Batch => "batch",
        }
    }

    /// Parses `6.1`, `host`, `new` or `all` (-> both), comma-separated lists allowed.
    pub fn parse_list(items: &[String]) -> Result<Vec<KernelSel>> {
        let mut v = Vec::new();
        for it in items.iter().flat_map(|s| s.split(',')) {
            let add: &[KernelSel] = match it.trim() {
                "6.1" | "host" => &[KernelSel::Host],
                "new" => &[KernelSel::New],
                "batch" => &[KernelSel::Batch],
                "all" => &KernelSel::ALL,
                "" => &[],
                other => bail!("unknown kernel {other:?}: use 6.1, new or all"),
            };
            for k in add {
                if !v.contains(k) {
                    v.push(*k);
                }
            }
        }
        if v.is_empty() {
            v.push(KernelSel::Host);
        }
        Ok(v)
    }
}

/// An unpacked guest kernel.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GuestKernel {
    /// The metapackage asked for (e.g. linux-image-cloud-amd64).
    pub meta: String,
    /// The image package it resolved to (e.g. linux-image-6.1.0-57-cloud-amd64).
    pub package: String,
    /// Its Debian version (e.g. 6.1.192-3).
    pub version: String,
    /// Where it came from: "host apt" or the suite of the private state.
    #[serde(default)]
    pub source: String,
    /// Every package unpacked (the image package, and since Debian's 7.x kernels also
    /// linux-binary-*, linux-modules-* and linux-base-*), with versions.
    #[serde(default)]
    pub packages: Vec<String>,
    /// `uname -r` of the guest (from the vmlinuz name).
    pub release: String,
    /// Where the package was unpacked.
    pub root: PathBuf,
    pub vmlinuz: PathBuf,
    /// `lib/modules/RELEASE` inside `root`.
    pub modules_dir: PathBuf,
    pub config: Option<PathBuf>,
    /// Whether the harness made modules.dep (the packages ship none).
    #[serde(default)]
    pub depmod_ran: bool,
}

impl GuestKernel {
    /// "6.1.0-57-cloud-amd64 (linux-image-... 6.1.192-3)".
    pub fn describe(&self) -> String {
        format!("{} ({} {})", self.release, self.package, self.version)
    }
}

/// Finds (or fetches and unpacks) the guest kernel `sel` under `work/kernel`.
pub fn prepare_sel(
    work: &Path,
    sel: KernelSel,
    meta: &str,
    new_suite: &str,
    mirror: Option<&str>,
    refresh: bool,
) -> Result<GuestKernel> {
    match sel {
        KernelSel::Host => prepare(work, meta, refresh),
        KernelSel::New => {
            let mirror = mirror.map(str::to_string).unwrap_or_else(host_mirror);
            let apt = PrivateApt::new(work, new_suite, &mirror);
            prepare_from(work, meta, refresh, &AptSource::Private(apt))
        }
        KernelSel::Batch => prepare_built(work, None),
    }
}

/// What `vm-tests/kernel/build.sh` records next to the bzImage it built.
#[derive(Debug, Deserialize)]
struct BuiltRecord {
    bzimage: PathBuf,
    release: String,
    debian_source: String,
    config: PathBuf,
}

/// Where build.sh leaves the batched-xmit kernel.
pub fn built_record_path(work: &Path) -> PathBuf {
    work.join("kbuild").join("batch.json")
}

/// The kernel built by `vm-tests/kernel/build.sh` (or `image`, any bzImage with virtio_net, AF_XDP
/// and BPF built in). It has no modules: a `modules.builtin` naming the NIC's modules and an
/// empty `modules.dep` are written for the initramfs builder.
pub fn prepare_built(work: &Path, image: Option<&Path>) -> Result<GuestKernel> {
    let (vmlinuz, release, source, config) = match image {
        Some(p) => {
            if !p.is_file() {
                bail!("--kernel-image {}: no such file", p.display());
            }
            let cfg = p.with_file_name(".config");
            (
                p.to_path_buf(),
                "custom".to_string(),
                format!("--kernel-image {}", p.display()),
                cfg.is_file().then_some(cfg),
            )
        }
        None => {
            let rec = built_record_path(work);
            let text = std::fs::read_to_string(&rec).map_err(|_| {
                anyhow::anyhow!(
                    "the batched-xmit kernel is not built ({} is missing): run vm-tests/kernel/build.sh \
                     (fetches Debian's linux-source, applies vm-tests/kernel/xdp-generic-xmit-batch.patch, \
                     builds a small bzImage; 20-60 min on 2 cores)",
                    rec.display()
                )
            })?;
            let r: BuiltRecord = serde_json::from_str(&text)
                .with_context(|| format!("parsing {}", rec.display()))?;
            if !r.bzimage.is_file() {
                bail!(
                    "{} names {}, which is missing: run vm-tests/kernel/build.sh again",
                    rec.display(),
                    r.bzimage.display()
                );
            }
            (
                r.bzimage,
                r.release,
                format!(
                    "own build of Debian {} + xdp-generic-xmit-batch.patch",
                    r.debian_source
                ),
                Some(r.config),
            )
        }
    };
    let modules_dir = work.join("kbuild").join(format!(
        "modules-{}",
        if image.is_some() { "custom" } else { "batch" }
    ));
    std::fs::create_dir_all(&modules_dir)
        .with_context(|| format!("creating {}", modules_dir.display()))?;
    let builtin: String = [
        "kernel/drivers/virtio/virtio_pci.ko",
        "kernel/drivers/net/virtio_net.ko",
    ]
    .iter()
    .map(|m| format!("{m}\n"))
    .collect();
    std::fs::write(modules_dir.join("modules.builtin"), builtin)?;
    std::fs::write(modules_dir.join("modules.dep"), "")?;
    Ok(GuestKernel {
        meta: "own build".into(),
        package: vmlinuz
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default(),
        version: release.clone(),
        source,
        packages: vec![],
        release,
        root: vmlinuz.parent().map(Path::to_path_buf).unwrap_or_default(),
        vmlinuz,
        modules_dir,
        config,
        depmod_ran: false,
    })
}

/// Finds (or fetches and unpacks) the guest kernel from the machine's apt under `work/kernel`.
pub fn prepare(work: &Path, meta: &str, refresh: bool) -> Result<GuestKernel> {
    prepare_from(work, meta, refresh, &AptSource::Host)
}

fn prepare_from(work: &Path, meta: &str, refresh: bool, apt: &AptSource) -> Result<GuestKernel> {
    let dir = work.join("kernel");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let state = match apt {
        AptSource::Host => dir.join(format!("{meta}.json")),
        AptSource::Private(p) => dir.join(format!("{}-{meta}.json", p.suite)),
    };
    if !refresh {
        if let Ok(text) = std::fs::read_to_string(&state) {
            if let Ok(k) = serde_json::from_str::<GuestKernel>(&text) {
                if k.vmlinuz.exists() && k.modules_dir.join("modules.dep").exists() {
                    let mut k = k;
                    if k.source.is_empty() {
                        k.source = source_name(apt);
                    }
                    return Ok(k);
                }
            }
        }
    }
    if let AptSource::Private(p) = apt {
        p.setup()?;
        if refresh || !p.has_lists() {
            p.update()?;
        }
    }
    let package = resolve_package(apt, meta)?;
    let version = candidate_version(apt, &package)?;
    let root = dir.join(format!("{package}_{version}"));
    // Since Debian's 7.x kernels the image package is empty and depends on
    // linux-binary-REL (vmlinuz), linux-modules-REL (compressed modules, no modules.dep) and
    // linux-base-REL (config, System.map, modules.builtin): fetch those as well.
    let mut parts = vec![(package.clone(), version.clone())];
    for p in kernel_parts(apt, &package)? {
        let v = candidate_version(apt, &p)?;
        parts.push((p, v));
    }
    let mut debs = Vec::new();
    for (p, v) in &parts {
        debs.push(download(apt, &dir, p, v)?);
    }
    if !root.exists() || refresh {
        let tmp = dir.join(format!(".unpack-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        for deb in &debs {
            run(cmd(
                "dpkg-deb",
                [std::ffi::OsStr::new("-x"), deb.as_os_str(), tmp.as_os_str()],
            ))?;
        }
        let _ = std::fs::remove_dir_all(&root);
        std::fs::rename(&tmp, &root)
            .with_context(|| format!("moving the unpacked kernel to {}", root.display()))?;
    }
    let mut k = describe_unpacked(meta, &package, &version, &root)?;
    k.source = source_name(apt);
    k.packages = parts.iter().map(|(p, v)| format!("{p} {v}")).collect();
    std::fs::write(&state, serde_json::to_string_pretty(&k)?)
        .with_context(|| format!("writing {}", state.display()))?;
    Ok(k)
}

/// Finds vmlinuz, the modules folder and the config in an unpacked kernel (Debian 6.x:
/// `boot/vmlinuz-REL`, `boot/config-REL`, `lib/modules/REL`; 7.x: everything in
/// `usr/lib/modules/REL/{vmlinuz,config}`), and makes sure modules.dep exists (Debian
/// packages ship none: depmod runs at install time).
fn describe_unpacked(meta: &str, package: &str, version: &str, root: &Path) -> Result<GuestKernel> {
    let boot = root.join("boot");
    let in_boot = std::fs::read_dir(&boot)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vmlinuz-"))
        });
    let (vmlinuz, release) = match in_boot {
        Some(v) => {
            let r = v
                .file_name()
                .unwrap()
                .to_string_lossy()
                .trim_start_matches("vmlinuz-")
                .to_string();
            (v, r)
        }
        None => ["usr/lib/modules", "lib/modules"]
            .iter()
            .flat_map(|d| std::fs::read_dir(root.join(d)).into_iter().flatten())
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .find(|p| p.join("vmlinuz").exists())
            .map(|p| {
                let r = p.file_name().unwrap().to_string_lossy().into_owned();
                (p.join("vmlinuz"), r)
            })
            .with_context(|| {
                format!("{package} has neither boot/vmlinuz-* nor (usr/)lib/modules/*/vmlinuz")
            })?,
    };
    let (base, modules_dir) = ["", "usr"]
        .iter()
        .map(|pre| {
            let base = if pre.is_empty() {
                root.to_path_buf()
            } else {
                root.join(pre)
            };
            let m = base.join("lib/modules").join(&release);
            (base, m)
        })
        .find(|(_, m)| m.join("kernel").exists())
        .with_context(|| format!("{package} has no (usr/)lib/modules/{release}/kernel"))?;
    let mut depmod_ran = false;
    if !modules_dir.join("modules.dep").exists() {
        tools::require("depmod", "kmod", "modules.dep of the guest kernel")?;
        run(cmd(
            "depmod",
            [
                std::ffi::OsStr::new("-b"),
                base.as_os_str(),
                std::ffi::OsStr::new(&release),
            ],
        ))
        .context("generating modules.dep of the guest kernel")?;
        depmod_ran = true;
    }
    let config = [
        boot.join(format!("config-{release}")),
        modules_dir.join("config"),
    ]
    .into_iter()
    .find(|p| p.exists());
    Ok(GuestKernel {
        meta: meta.into(),
        package: package.into(),
        version: version.into(),
        source: String::new(),
        packages: vec![],
        release,
        root: root.to_path_buf(),
        vmlinuz,
        modules_dir,
        config,
        depmod_ran,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_lists() {
        let l = |v: &[&str]| {
            KernelSel::parse_list(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>())
        };
        assert_eq!(l(&["all"]).unwrap(), KernelSel::ALL);
        assert_eq!(
            l(&["new", "6.1", "new"]).unwrap(),
            [KernelSel::New, KernelSel::Host]
        );
        assert_eq!(l(&["host"]).unwrap(), [KernelSel::Host]);
        assert!(l(&["5.10"]).is_err());
    }
}
