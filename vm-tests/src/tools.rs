//! The host tools the harness needs, checked up front with one clear error that names the
//! Debian packages to install.

use std::path::PathBuf;

use anyhow::{bail, Result};

use crate::util::{elf_kind, which, ElfKind};

/// A program the harness runs, and the Debian package that has it.
#[derive(Debug, Clone, Copy)]
pub struct Tool {
    pub bin: &'static str,
    pub package: &'static str,
    pub why: &'static str,
}

/// Always needed.
pub const REQUIRED: &[Tool] = &[
    Tool {
        bin: "qemu-system-x86_64",
        package: "qemu-system-x86",
        why: "runs the guests",
    },
    Tool {
        bin: "ip",
        package: "iproute2",
        why: "network namespace and tap device on the host",
    },
    Tool {
        bin: "apt-get",
        package: "apt",
        why: "downloads the guest kernel package",
    },
    Tool {
        bin: "apt-cache",
        package: "apt",
        why: "resolves linux-image-cloud-amd64 to a kernel package",
    },
    Tool {
        bin: "dpkg-deb",
        package: "dpkg",
        why: "unpacks the kernel package",
    },
    Tool {
        bin: "depmod",
        package: "kmod",
        why: "modules.dep of the guest kernel (the package ships none)",
    },
    Tool {
        bin: "ldd",
        package: "libc-bin",
        why: "finds the shared libraries of the binaries copied into the guest",
    },
];

/// Where the static busybox is (package busybox-static; the plain `busybox` package installs
/// a dynamically linked one at the same path).
pub const BUSYBOX: &str = "/bin/busybox";

/// Every Debian package the harness may need, for the install hint.
pub const ALL_PACKAGES: &str =
    "qemu-system-x86 busybox-static iproute2 kmod xz-utils zstd binutils";

/// Checks the required tools and the static busybox; one error listing everything missing.
pub fn check() -> Result<()> {
    let mut missing: Vec<String> = Vec::new();
    let mut packages: Vec<&str> = Vec::new();
    for t in REQUIRED {
        if which(t.bin).is_none() {
            missing.push(format!("  {} (package {}): {}", t.bin, t.package, t.why));
            if !packages.contains(&t.package) {
                packages.push(t.package);
            }
        }
    }
    match busybox_problem() {
        None => {}
        Some(p) => {
            missing.push(format!("  {BUSYBOX} (package busybox-static): {p}"));
            packages.push("busybox-static");
        }
    }
    if !missing.is_empty() {
        bail!(
            "vm-tests: host tools missing:\n{}\nfix: apt-get update && apt-get install -y {}",
            missing.join("\n"),
            packages.join(" ")
        );
    }
    if !std::path::Path::new("/dev/net/tun").exists() {
        bail!("vm-tests: /dev/net/tun is missing (tap devices need the tun driver: modprobe tun)");
    }
    Ok(())
}

/// Why the busybox at [`BUSYBOX`] does not do for the guest, if it does not.
fn busybox_problem() -> Option<String> {
    let p = PathBuf::from(BUSYBOX);
    if !p.exists() {
        return Some("not installed; the guest's shell and tools".into());
    }
    match elf_kind(&p) {
        Ok(ElfKind::Static) => None,
        Ok(ElfKind::Dynamic) => Some(
            "dynamically linked (the `busybox` package); the guest needs busybox-static".into(),
        ),
        Ok(ElfKind::NotElf) => Some("not an ELF binary".into()),
        Err(e) => Some(format!("unreadable: {e}")),
    }
}

/// The decompressor for a module file name, if it is compressed: (program, package).
pub fn decompressor(file: &str) -> Option<(&'static str, &'static str)> {
    if file.ends_with(".xz") {
        Some(("xz", "xz-utils"))
    } else if file.ends_with(".zst") {
        Some(("zstd", "zstd"))
    } else if file.ends_with(".gz") {
        Some(("gzip", "gzip"))
    } else {
        None
    }
}

/// Checks one optional tool right where it becomes necessary.
pub fn require(bin: &str, package: &str, why: &str) -> Result<PathBuf> {
    match which(bin) {
        Some(p) => Ok(p),
        None => bail!("vm-tests: `{bin}` is missing ({why}); fix: apt-get install -y {package}"),
    }
}
