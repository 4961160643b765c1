//! The guest kernel: Debian's `linux-image-cloud-amd64` (a metapackage) resolved to the real
//! image package, fetched with `apt-get download` into the work folder and unpacked there; its
//! modules (the virtio_net chain) resolved through modules.dep and modules.builtin.
//!
//! The machine's apt configuration is only read, never changed. Once unpacked, the kernel is
//! reused from `target/vm/kernel/` without asking apt again (`--refresh-kernel` re-resolves).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

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

/// Debian suite of `--kernel new` by default: unstable has the newest kernel (7.x, split into
/// linux-binary-* and linux-modules-* packages).
pub const DEFAULT_NEW_SUITE: &str = "sid";

/// The keyring the private apt state trusts (package debian-archive-keyring).
pub const ARCHIVE_KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// Where apt gets a kernel from: the machine's configuration (only read), or a private
/// state for another suite.
#[derive(Debug, Clone)]
pub enum AptSource {
    Host,
    Private(PrivateApt),
}

/// A private apt configuration for one suite: its own sources list, state, lists and cache
/// under `dir` (`-o Dir::State=... -o Dir::Etc::SourceList=... -o Dir::Cache=...`), signed by
/// Debian's archive keyring. `apt-get update` with it never touches /var/lib/apt or
/// /etc/apt.
#[derive(Debug, Clone)]
pub struct PrivateApt {
    pub dir: PathBuf,
    pub suite: String,
    pub mirror: String,
}

impl PrivateApt {
    pub fn new(work: &Path, suite: &str, mirror: &str) -> Self {
        PrivateApt {
            dir: work.join("apt").join(suite),
            suite: suite.into(),
            mirror: mirror.trim_end_matches('/').into(),
        }
    }

    /// The one line of the private sources list.
    pub fn sources_line(&self) -> String {
        format!(
            "deb [signed-by={ARCHIVE_KEYRING}] {} {} main\n",
            self.mirror, self.suite
        )
    }

    /// The `-o` options that point apt at the private state.
    pub fn options(&self) -> Vec<String> {
        let d = self.dir.display();
        vec![
            format!("Dir::State={d}/state"),
            format!("Dir::State::status={d}/state/status"),
            format!("Dir::Cache={d}/cache"),
            format!("Dir::Etc::SourceList={d}/etc/sources.list"),
            format!("Dir::Etc::SourceParts={d}/etc/sources.list.d"),
            format!("Dir::Etc::Preferences={d}/etc/preferences"),
            format!("Dir::Etc::PreferencesParts={d}/etc/preferences.d"),
            "APT::Sandbox::User=root".into(),
            "Acquire::Languages=none".into(),
            "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false".into(),
            "Acquire::IndexTargets::deb::Contents-deb::DefaultEnabled=false".into(),
        ]
        .into_iter()
        .flat_map(|o| ["-o".to_string(), o])
        .collect()
    }

    /// Writes the private configuration (idempotent).
    fn setup(&self) -> Result<()> {
        if !Path::new(ARCHIVE_KEYRING).exists() {
            bail!("{ARCHIVE_KEYRING} is missing (package debian-archive-keyring): the private apt state for {} needs it", self.suite);
        }
        for sub in [
            "state/lists/partial",
            "cache/archives/partial",
            "etc/sources.list.d",
            "etc/preferences.d",
        ] {
            std::fs::create_dir_all(self.dir.join(sub))
                .with_context(|| format!("creating {}", self.dir.join(sub).display()))?;
        }
        let status = self.dir.join("state/status");
        if !status.exists() {
            std::fs::write(&status, "")?;
        }
        std::fs::write(self.dir.join("etc/sources.list"), self.sources_line())?;
        Ok(())
    }

    /// Whether `apt-get update` has filled the private lists.
    fn has_lists(&self) -> bool {
        std::fs::read_dir(self.dir.join("state/lists")).is_ok_and(|d| {
            d.filter_map(|e| e.ok())
                .any(|e| e.file_name().to_string_lossy().ends_with("_Packages"))
        })
    }

    /// `apt-get update` of the private state.
    fn update(&self) -> Result<()> {
        eprintln!(
            "vm-tests: apt-get update of a private apt state for {} ({}; {})",
            self.suite,
            self.mirror,
            self.dir.display()
        );
        let mut c = Command::new("apt-get");
        c.args(self.options()).args(["update", "-q"]);
        run(&mut c)
            .with_context(|| format!("apt-get update of the private state for {}", self.suite))?;
        Ok(())
    }
}

impl AptSource {
    fn command(&self, prog: &str, args: &[&str]) -> Command {
        let mut c = Command::new(prog);
        if let AptSource::Private(p) = self {
            c.args(p.options());
        }
        c.args(args);
        c
    }

    fn describe(&self) -> String {
        match self {
            AptSource::Host => "the machine's apt".into(),
            AptSource::Private(p) => format!("the private apt state for {}", p.suite),
        }
    }

    /// What to run when apt knows no such package.
    fn update_hint(&self) -> &'static str {
        match self {
            AptSource::Host => {
                "run `apt-get update` first (the harness never changes apt's sources)"
            }
            AptSource::Private(_) => "try --refresh-kernel (apt-get update of the private state)",
        }
    }
}

/// The mirror of the machine's Debian sources (for the private state), else deb.debian.org.
pub fn host_mirror() -> String {
    let mut texts: Vec<String> = Vec::new();
    if let Ok(t) = std::fs::read_to_string("/etc/apt/sources.list") {
        texts.push(t);
    }
    if let Ok(d) = std::fs::read_dir("/etc/apt/sources.list.d") {
        let mut files: Vec<PathBuf> = d.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        files.sort();
        for f in files {
            let n = f.to_string_lossy();
            if n.ends_with(".list") || n.ends_with(".sources") {
                if let Ok(t) = std::fs::read_to_string(&f) {
                    texts.push(t);
                }
            }
        }
    }
    texts
        .iter()
        .find_map(|t| mirror_in(t))
        .unwrap_or_else(|| "http://deb.debian.org/debian".into())
}

/// The first Debian archive URI (ending in `/debian`) of a sources.list or deb822 text.
pub fn mirror_in(text: &str) -> Option<String> {
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with('#') {
            continue;
        }
        let uris: Vec<&str> = if let Some(rest) = l.strip_prefix("URIs:") {
            rest.split_whitespace().collect()
        } else if l.starts_with("deb ") {
            l.split_whitespace()
                .filter(|w| w.contains("://"))
                .take(1)
                .collect()
        } else {
            continue;
        };
        if let Some(u) = uris
            .into_iter()
            .map(|u| u.trim_end_matches('/'))
            .find(|u| u.ends_with("/debian"))
        {
            return Some(u.to_string());
        }
    }
    None
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

fn source_name(apt: &AptSource) -> String {
    match apt {
        AptSource::Host => "host apt".into(),
        AptSource::Private(p) => format!("{} ({}, private apt state)", p.suite, p.mirror),
    }
}

/// `apt-cache depends META` -> the linux-image-* package it depends on (a real package is
/// returned as it is).
fn resolve_package(apt: &AptSource, meta: &str) -> Result<String> {
    let out = run(apt.command(
        "apt-cache",
        &["depends", "--no-recommends", "--no-suggests", meta],
    ))
    .with_context(|| {
        format!(
            "{} knows no package {meta}: {}",
            apt.describe(),
            apt.update_hint()
        )
    })?;
    match image_dependency(meta, &out) {
        Some(p) => Ok(p),
        None => bail!(
            "`apt-cache depends {meta}` ({}) names no linux-image-* package ({}):\n{out}",
            apt.describe(),
            apt.update_hint()
        ),
    }
}

/// The linux-image-* dependency of `meta` in `apt-cache depends` output (or `meta` itself when
/// it is a real image package that depends on none).
pub fn image_dependency(meta: &str, out: &str) -> Option<String> {
    let dep = depends_lines(out).find(|p| p.starts_with("linux-image-") && p != meta);
    match dep {
        Some(p) => Some(p),
        None if meta.starts_with("linux-image-")
            && out.lines().next().is_some_and(|l| l.trim() == meta) =>
        {
            Some(meta.to_string())
        }
        None => None,
    }
}

/// Package names of the `Depends:` lines (alternatives included) of `apt-cache depends`.
fn depends_lines(out: &str) -> impl Iterator<Item = String> + '_ {
    out.lines()
        .filter_map(|l| l.trim().trim_start_matches('|').strip_prefix("Depends:"))
        .map(|p| p.trim().trim_matches(|c| c == '<' || c == '>').to_string())
}

/// The split packages of a 7.x-style image package: its dependencies named
/// `linux-{binary,modules,base}-REL` (REL = the image package's name without `linux-image-`).
fn kernel_parts(apt: &AptSource, image: &str) -> Result<Vec<String>> {
    let out = run(apt.command(
        "apt-cache",
        &["depends", "--no-recommends", "--no-suggests", image],
    ))
    .with_context(|| format!("apt-cache depends {image}"))?;
    Ok(split_parts(image, &out))
}

/// See [`kernel_parts`]: picks the parts out of `apt-cache depends IMAGE` output.
pub fn split_parts(image: &str, depends_out: &str) -> Vec<String> {
    let Some(rel) = image.strip_prefix("linux-image-") else {
        return vec![];
    };
    let mut v: Vec<String> = Vec::new();
    for p in depends_lines(depends_out) {
        let ok = ["linux-binary-", "linux-modules-", "linux-base-"]
            .iter()
            .any(|pre| p.strip_prefix(pre) == Some(rel));
        if ok && !v.contains(&p) {
            v.push(p);
        }
    }
    v
}

/// The version apt would install of `package`.
fn candidate_version(apt: &AptSource, package: &str) -> Result<String> {
    let out = run(apt.command("apt-cache", &["show", "--no-all-versions", package])).with_context(
        || {
            format!(
                "{} has no candidate for {package}: {}",
                apt.describe(),
                apt.update_hint()
            )
        },
    )?;
    out.lines()
        .find_map(|l| l.strip_prefix("Version:"))
        .map(|v| v.trim().to_string())
        .with_context(|| format!("`apt-cache show {package}` has no Version line"))
}

/// `apt-get download PACKAGE=VERSION` into `dir`, unless the .deb is already there.
fn download(apt: &AptSource, dir: &Path, package: &str, version: &str) -> Result<PathBuf> {
    // apt writes an epoch's colon as %3a in file names.
    let file = format!("{package}_{}_amd64.deb", version.replace(':', "%3a"));
    let deb = dir.join(&file);
    if deb.exists() {
        return Ok(deb);
    }
    eprintln!(
        "vm-tests: downloading {package} {version} (apt-get download, {})",
        apt.describe()
    );
    let pv = format!("{package}={version}");
    let mut c = apt.command(
        "apt-get",
        &["download", "-q", "-o", "APT::Sandbox::User=root", &pv],
    );
    c.current_dir(dir);
    run(&mut c).with_context(|| format!("downloading {package}"))?;
    if !deb.exists() {
        bail!("apt-get download {package} left no {}", deb.display());
    }
    Ok(deb)
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

/// Modules shipped in the initramfs but loaded only on demand (`vmt_load NAME` in the guest):
/// netem, and ifb + ingress qdisc + matchall + mirred to impair a guest's incoming traffic.
pub const EXTRA_MODULES: &[&str] = &[
    "sch_netem",
    "ifb",
    "sch_ingress",
    "cls_matchall",
    "act_mirred",
];

impl GuestKernel {
    fn read_modules_file(&self, f: &str) -> Result<String> {
        std::fs::read_to_string(self.modules_dir.join(f))
            .with_context(|| format!("reading {}", self.modules_dir.join(f).display()))
    }

    /// The module plan for the NIC of this kernel.
    pub fn nic_modules(&self) -> Result<ModulePlan> {
        self.module_plan(NIC_MODULES)
    }

    /// The module plan for `wanted` (each built in or loaded after its dependencies).
    pub fn module_plan(&self, wanted: &[&str]) -> Result<ModulePlan> {
        plan_modules(
            &self
                .read_modules_file("modules.builtin")
                .unwrap_or_default(),
            &self.read_modules_file("modules.dep")?,
            wanted,
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
            "CONFIG_NET_SCH_NETEM",
            "CONFIG_IFB",
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
    fn split_7x_packages() {
        // `apt-cache depends linux-image-7.2.13+deb14-cloud-amd64` in sid.
        let out = "linux-image-7.2.13+deb14-cloud-amd64
 |Depends: dracut
 |Depends: initramfs-tools
  Depends: <linux-initramfs-tool>
    dracut
    initramfs-tools
  Depends: linux-base-7.2.13+deb14-cloud-amd64
  Depends: linux-binary-7.2.13+deb14-cloud-amd64
  Depends: linux-modules-7.2.13+deb14-cloud-amd64
";
        assert_eq!(
            split_parts("linux-image-7.2.13+deb14-cloud-amd64", out),
            [
                "linux-base-7.2.13+deb14-cloud-amd64",
                "linux-binary-7.2.13+deb14-cloud-amd64",
                "linux-modules-7.2.13+deb14-cloud-amd64"
            ]
        );
        // 6.x: one package with everything; `linux-base` is Debian's unrelated scripts package.
        let old = "linux-image-6.1.0-57-cloud-amd64\n  Depends: kmod\n  Depends: linux-base\n  Depends: initramfs-tools\n";
        assert!(split_parts("linux-image-6.1.0-57-cloud-amd64", old).is_empty());
    }

    #[test]
    fn metapackage_resolution() {
        let meta = "linux-image-cloud-amd64\n  Depends: linux-base-cloud-amd64\n  Depends: linux-image-7.2.13+deb14-cloud-amd64\n";
        assert_eq!(
            image_dependency("linux-image-cloud-amd64", meta).as_deref(),
            Some("linux-image-7.2.13+deb14-cloud-amd64")
        );
        let real = "linux-image-6.1.0-57-cloud-amd64\n  Depends: kmod\n";
        assert_eq!(
            image_dependency("linux-image-6.1.0-57-cloud-amd64", real).as_deref(),
            Some("linux-image-6.1.0-57-cloud-amd64")
        );
        assert_eq!(image_dependency("foo", "foo\n  Depends: bar\n"), None);
    }

    #[test]
    fn mirrors_of_sources() {
        let deb822 = "Types: deb\n# http://snapshot.debian.org/archive/debian/20250520T000000Z\nURIs: http://deb.debian.org/debian\nSuites: bookworm\n";
        assert_eq!(
            mirror_in(deb822).as_deref(),
            Some("http://deb.debian.org/debian")
        );
        let list = "deb [arch=amd64] http://mirror.example/debian/ bookworm main\n";
        assert_eq!(
            mirror_in(list).as_deref(),
            Some("http://mirror.example/debian")
        );
        assert_eq!(
            mirror_in("URIs: http://deb.debian.org/debian-security\n"),
            None
        );
    }

    #[test]
    fn private_apt_state() {
        let p = PrivateApt::new(Path::new("/w"), "sid", "http://deb.debian.org/debian/");
        assert_eq!(
            p.sources_line(),
            "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian sid main\n"
        );
        let o = p.options().join(" ");
        for want in [
            "-o Dir::State=/w/apt/sid/state",
            "-o Dir::Etc::SourceList=/w/apt/sid/etc/sources.list",
            "-o Dir::Cache=/w/apt/sid/cache",
            "-o Dir::Etc::SourceParts=/w/apt/sid/etc/sources.list.d",
        ] {
            assert!(o.contains(want), "{want} in {o}");
        }
    }

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

    #[test]
    fn chain_with_builtin_virtio_7x() {
        // 7.2 cloud: virtio, virtio_ring and virtio_pci are built in; modules are .ko.xz.
        let builtin = "kernel/drivers/virtio/virtio.ko\nkernel/drivers/virtio/virtio_ring.ko\nkernel/drivers/virtio/virtio_pci.ko\n";
        let dep = "kernel/drivers/net/virtio_net.ko.xz: kernel/drivers/net/net_failover.ko.xz kernel/net/core/failover.ko.xz
kernel/drivers/net/net_failover.ko.xz: kernel/net/core/failover.ko.xz
kernel/net/core/failover.ko.xz:
kernel/net/sched/sch_netem.ko.xz:
";
        let p = plan_modules(builtin, dep, NIC_MODULES).unwrap();
        assert_eq!(p.builtin, ["virtio_pci"]);
        let names: Vec<&str> = p.load.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["failover", "net_failover", "virtio_net"]);
        let n = plan_modules(builtin, dep, &["sch_netem"]).unwrap();
        assert_eq!(
            n.load,
            [(
                "sch_netem".to_string(),
                "kernel/net/sched/sch_netem.ko.xz".to_string()
            )]
        );
    }

    #[test]
    fn missing_module_is_an_error() {
        let e = plan_modules("", "kernel/a.ko:\n", &["virtio_net"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("neither built into"), "{e}");
    }
}
