//! Debian's archive through apt, without changing the machine's apt configuration: the
//! machine's own apt, or a private apt state for another suite; a kernel metapackage resolved
//! to its image (and, from 7.x, module) packages, and those downloaded.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::util::run;

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
    pub fn setup(&self) -> Result<()> {
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
    pub fn has_lists(&self) -> bool {
        std::fs::read_dir(self.dir.join("state/lists")).is_ok_and(|d| {
            d.filter_map(|e| e.ok())
                .any(|e| e.file_name().to_string_lossy().ends_with("_Packages"))
        })
    }

    /// `apt-get update` of the private state.
    pub fn update(&self) -> Result<()> {
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

pub fn source_name(apt: &AptSource) -> String {
    match apt {
        AptSource::Host => "host apt".into(),
        AptSource::Private(p) => format!("{} ({}, private apt state)", p.suite, p.mirror),
    }
}

/// `apt-cache depends META` -> the linux-image-* package it depends on (a real package is
/// returned as it is).
pub fn resolve_package(apt: &AptSource, meta: &str) -> Result<String> {
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
pub fn kernel_parts(apt: &AptSource, image: &str) -> Result<Vec<String>> {
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
pub fn candidate_version(apt: &AptSource, package: &str) -> Result<String> {
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
pub fn download(apt: &AptSource, dir: &Path, package: &str, version: &str) -> Result<PathBuf> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
