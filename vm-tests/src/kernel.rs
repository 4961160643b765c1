//! The guest kernel: Debian's `linux-image-cloud-amd64` (a metapackage) resolved to the real
//! image package, fetched with `apt-get download` into the work folder and unpacked there; its
//! modules (the virtio_net chain) resolved through modules.dep and modules.builtin.
//!
//! The machine's apt configuration is only read, never changed. Once unpacked, the kernel is
//! reused from `target/vm/kernel/` without asking apt again (`--refresh-kernel` re-resolves).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::tools;
use crate::util::{cmd, run};

/// Default metapackage: Debian's kernel for cloud VMs (virtio drivers as modules).
pub const DEFAULT_PACKAGE: &str = "linux-image-cloud-amd64";

/// Modules the guest must have for its NIC: `virtio_pci` (the PCI transport, pulls
/// virtio, virtio_ring, virtio_pci_modern_dev and virtio_pci_legacy_dev) and `virtio_net`
/// (pulls net_failover and failover). Each is either built in or loaded with its
/// dependencies first.
pub const NIC_MODULES: &[&str] = &["virtio_pci", "virtio_net"];

/// An unpacked guest kernel.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct GuestKernel {
    /// The metapackage asked for (e.g. linux-image-cloud-amd64).
    pub meta: String,
    /// The image package it resolved to (e.g. linux-image-6.1.0-57-cloud-amd64).
    pub package: String,
    /// Its Debian version (e.g. 6.1.192-3).
    pub version: String,
    /// `uname -r` of the guest (from the vmlinuz name).
    pub release: String,
    /// Where the package was unpacked.
    pub root: PathBuf,
    pub vmlinuz: PathBuf,
    /// `lib/modules/RELEASE` inside `root`.
    pub modules_dir: PathBuf,
    pub config: Option<PathBuf>,
}

/// Finds (or fetches and unpacks) the guest kernel under `work/kernel`.
pub fn prepare(work: &Path, meta: &str, refresh: bool) -> Result<GuestKernel> {
    let dir = work.join("kernel");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let state = dir.join(format!("{meta}.json"));
    if !refresh {
        if let Ok(text) = std::fs::read_to_string(&state) {
            if let Ok(k) = serde_json::from_str::<GuestKernel>(&text) {
                if k.vmlinuz.exists() && k.modules_dir.join("modules.dep").exists() {
                    return Ok(k);
                }
            }
        }
    }
    let package = resolve_package(meta)?;
    let version = candidate_version(&package)?;
    let deb = download(&dir, &package, &version)?;
    let root = dir.join(format!("{package}_{version}"));
    if !root.join("boot").exists() {
        let tmp = dir.join(format!(".unpack-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        run(cmd(
            "dpkg-deb",
            [std::ffi::OsStr::new("-x"), deb.as_os_str(), tmp.as_os_str()],
        ))?;
        let _ = std::fs::remove_dir_all(&root);
        std::fs::rename(&tmp, &root)
            .with_context(|| format!("moving the unpacked kernel to {}", root.display()))?;
    }
    let k = describe_unpacked(meta, &package, &version, &root)?;
    std::fs::write(&state, serde_json::to_string_pretty(&k)?)
        .with_context(|| format!("writing {}", state.display()))?;
    Ok(k)
}

/// `apt-cache depends META` -> the linux-image-* package it depends on (a real package is
/// returned as it is).
fn resolve_package(meta: &str) -> Result<String> {
    let out = run(cmd("apt-cache", ["depends", "--no-recommends", "--no-suggests", meta])).with_context(|| {
        format!("apt knows no package {meta}: run `apt-get update` first (the harness never changes apt's sources)")
    })?;
    let dep = out
        .lines()
        .filter_map(|l| l.trim().trim_start_matches('|').strip_prefix("Depends:"))
        .map(|p| p.trim().trim_matches(|c| c == '<' || c == '>').to_string())
        .find(|p| p.starts_with("linux-image-"));
    match dep {
        Some(p) => Ok(p),
        None if meta.starts_with("linux-image-") && out.lines().next().is_some_and(|l| l.trim() == meta) => {
            Ok(meta.to_string())
        }
        None => bail!("`apt-cache depends {meta}` names no linux-image-* package (run `apt-get update`?):\n{out}"),
    }
}

/// The version apt would install of `package`.
fn candidate_version(package: &str) -> Result<String> {
    let out = run(cmd("apt-cache", ["show", "--no-all-versions", package]))
        .with_context(|| format!("apt has no candidate for {package}: run `apt-get update`"))?;
    out.lines()
        .find_map(|l| l.strip_prefix("Version:"))
        .map(|v| v.trim().to_string())
        .with_context(|| format!("`apt-cache show {package}` has no Version line"))
}

/// `apt-get download PACKAGE=VERSION` into `dir`, unless the .deb is already there.
fn download(dir: &Path, package: &str, version: &str) -> Result<PathBuf> {
    // apt writes an epoch's colon as %3a in file names.
    let file = format!("{package}_{}_amd64.deb", version.replace(':', "%3a"));
    let deb = dir.join(&file);
    if deb.exists() {
        return Ok(deb);
    }
    eprintln!("vm-tests: downloading {package} {version} (apt-get download)");
    let mut c = cmd(
        "apt-get",
        [
            "download",
            "-q",
            "-o",
            "APT::Sandbox::User=root",
            &format!("{package}={version}"),
        ],
    );
    c.current_dir(dir);
    run(&mut c).with_context(|| format!("downloading {package}"))?;
    if !deb.exists() {
        bail!("apt-get download {package} left no {}", deb.display());
    }
    Ok(deb)
}

/// Finds vmlinuz, the modules folder and the config in an unpacked image package, and makes
/// sure modules.dep exists (Debian packages ship none: depmod runs at install time).
fn describe_unpacked(meta: &str, package: &str, version: &str, root: &Path) -> Result<GuestKernel> {
    let boot = root.join("boot");
    let vmlinuz = std::fs::read_dir(&boot)
        .with_context(|| format!("reading {}", boot.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("vmlinuz-"))
        })
        .with_context(|| format!("{package} has no boot/vmlinuz-*"))?;
    let release = vmlinuz
        .file_name()
        .unwrap()
        .to_string_lossy()
        .trim_start_matches("vmlinuz-")
        .to_string();
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
        .find(|(_, m)| m.exists())
        .with_context(|| format!("{package} has no lib/modules/{release}"))?;
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
    }
    let config = boot.join(format!("config-{release}"));
    Ok(GuestKernel {
        meta: meta.into(),
        package: package.into(),
        version: version.into(),
        release,
        root: root.to_path_buf(),
        vmlinuz,
        modules_dir,
        config: config.exists().then_some(config),
    })
}

/// What the NIC needs from this kernel.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ModulePlan {
    /// Wanted modules that are built into the kernel (modules.builtin).
    pub builtin: Vec<String>,
    /// Modules to load, dependencies first: (name, file relative to the modules folder).
    pub load: Vec<(String, String)>,
}

/// Module name of a modules.dep path: basename without `.ko[.xz|.zst|.gz]`, `-` as `_`.
pub fn module_name(path: &str) -> String {
    let base = path.rsplit('/').next().unwrap_or(path);
    let stem = base.split(".ko").next().unwrap_or(base);
    stem.replace('-', "_")
}

/// Parses modules.dep: name -> (path, dependency paths in modules.dep order).
pub fn parse_modules_dep(text: &str) -> BTreeMap<String, (String, Vec<String>)> {
    let mut m = BTreeMap::new();
    for line in text.lines() {
        let Some((path, deps)) = line.split_once(':') else {
            continue;
        };
        let path = path.trim().to_string();
        let deps = deps.split_whitespace().map(str::to_string).collect();
        m.insert(module_name(&path), (path, deps));
    }
    m
}

/// Resolves `wanted` against modules.builtin and modules.dep: built-in ones are only
/// recorded, modular ones are loaded after everything they depend on (depth-first,
/// dependencies first; each module once).
pub fn plan_modules(builtin_txt: &str, dep_txt: &str, wanted: &[&str]) -> Result<ModulePlan> {
    let builtin: HashSet<String> = builtin_txt
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(module_name)
        .collect();
    let deps = parse_modules_dep(dep_txt);
    let by_path: BTreeMap<&str, &str> = deps
        .iter()
        .map(|(n, (p, _))| (p.as_str(), n.as_str()))
        .collect();
    let mut plan = ModulePlan::default();
    let mut done: HashSet<String> = HashSet::new();

    fn visit(
        name: &str,
        deps: &BTreeMap<String, (String, Vec<String>)>,
        by_path: &BTreeMap<&str, &str>,
        done: &mut HashSet<String>,
        stack: &mut Vec<String>,
        plan: &mut ModulePlan,
    ) -> Result<()> {
        if done.contains(name) {
            return Ok(());
        }
        if stack.iter().any(|s| s == name) {
            bail!("module dependency cycle: {} -> {name}", stack.join(" -> "));
        }
        let (path, ds) = deps
            .get(name)
            .with_context(|| format!("module {name} is not in modules.dep"))?;
        stack.push(name.to_string());
        // modules.dep lists dependencies so that loading them from last to first works.
        for d in ds.iter().rev() {
            let dn = by_path
                .get(d.as_str())
                .map(|s| s.to_string())
                .unwrap_or_else(|| module_name(d));
            visit(&dn, deps, by_path, done, stack, plan)?;
        }
        stack.pop();
        done.insert(name.to_string());
        plan.load.push((name.to_string(), path.clone()));
        Ok(())
    }

    for w in wanted {
        let w = w.replace('-', "_");
        if builtin.contains(&w) {
            plan.builtin.push(w);
        } else if deps.contains_key(&w) {
            visit(&w, &deps, &by_path, &mut done, &mut Vec::new(), &mut plan)?;
        } else {
            bail!("module {w} is neither built into the guest kernel (modules.builtin) nor in modules.dep");
        }
    }
    Ok(plan)
}

impl GuestKernel {
    /// The module plan for the NIC of this kernel.
    pub fn nic_modules(&self) -> Result<ModulePlan> {
        let read = |f: &str| {
            std::fs::read_to_string(self.modules_dir.join(f))
                .with_context(|| format!("reading {}", self.modules_dir.join(f).display()))
        };
        plan_modules(
            &read("modules.builtin").unwrap_or_default(),
            &read("modules.dep")?,
            NIC_MODULES,
        )
    }

    /// `CONFIG_*` values of the options AF_XDP in the guest depends on (from boot/config-*).
    pub fn config_facts(&self) -> BTreeMap<String, String> {
        const KEYS: &[&str] = &[
            "CONFIG_XDP_SOCKETS",
            "CONFIG_BPF_SYSCALL",
            "CONFIG_BPF_JIT",
            "CONFIG_DEBUG_INFO_BTF",
            "CONFIG_VIRTIO_NET",
            "CONFIG_VIRTIO_PCI",
            "CONFIG_NET_FAILOVER",
            "CONFIG_MODULE_COMPRESS_NONE",
            "CONFIG_MODULE_COMPRESS_XZ",
            "CONFIG_MODULE_COMPRESS_ZSTD",
        ];
        let mut m = BTreeMap::new();
        let Some(text) = self
            .config
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
        else {
            return m;
        };
        for k in KEYS {
            let v = text
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{k}=")).map(str::to_string))
                .unwrap_or_else(|| "n".into());
            m.insert(k.to_string(), v);
        }
        m
    }

    /// Refuses kernels without AF_XDP sockets or the bpf syscall.
    pub fn check_config(&self) -> Result<()> {
        let f = self.config_facts();
        if f.is_empty() {
            return Ok(()); // no config shipped: find out at run time
        }
        for k in ["CONFIG_XDP_SOCKETS", "CONFIG_BPF_SYSCALL"] {
            if f.get(k).map(String::as_str) != Some("y") {
                bail!(
                    "guest kernel {} has {k}={}: AF_XDP cannot work in it",
                    self.release,
                    f[k]
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEP: &str = "\
kernel/drivers/virtio/virtio.ko: kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/virtio/virtio_ring.ko:
kernel/drivers/virtio/virtio_pci_modern_dev.ko:
kernel/drivers/virtio/virtio_pci_legacy_dev.ko:
kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio_pci_legacy_dev.ko kernel/drivers/virtio/virtio_pci_modern_dev.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/net/core/failover.ko:
kernel/drivers/net/net_failover.ko: kernel/net/core/failover.ko
kernel/drivers/net/virtio_net.ko: kernel/drivers/net/net_failover.ko kernel/net/core/failover.ko kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
";

    #[test]
    fn debian_cloud_6_1_chain() {
        let p = plan_modules("kernel/net/xdp.ko\n", DEP, NIC_MODULES).unwrap();
        let names: Vec<&str> = p.load.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "virtio_ring",
                "virtio",
                "virtio_pci_modern_dev",
                "virtio_pci_legacy_dev",
                "virtio_pci",
                "failover",
                "net_failover",
                "virtio_net"
            ]
        );
        assert!(p.builtin.is_empty());
    }

    #[test]
    fn builtin_modules_are_not_loaded() {
        let builtin = "kernel/drivers/virtio/virtio_pci.ko\nkernel/drivers/virtio/virtio.ko\n";
        let p = plan_modules(builtin, DEP, NIC_MODULES).unwrap();
        assert_eq!(p.builtin, ["virtio_pci"]);
        let names: Vec<&str> = p.load.iter().map(|(n, _)| n.as_str()).collect();
        // virtio is still listed by modules.dep as a file dependency; a real depmod would not
        // list a built-in one, so this only checks the wanted roots.
        assert_eq!(names.last(), Some(&"virtio_net"));
    }

    #[test]
    fn compressed_names() {
        assert_eq!(
            module_name("kernel/drivers/net/virtio_net.ko.xz"),
            "virtio_net"
        );
        assert_eq!(module_name("kernel/net/core/fail-over.ko.zst"), "fail_over");
        assert_eq!(module_name("kernel/a/b.ko"), "b");
    }

    #[test]
    fn missing_module_is_an_error() {
        let e = plan_modules("", "kernel/a.ko:\n", &["virtio_net"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("neither built into"), "{e}");
    }
}
