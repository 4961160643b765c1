//! The guest kernel's modules: which of those the NIC (and the netem cases) need are built in
//! and which must be loaded, in dependency order, from modules.dep and modules.builtin.

use std::collections::{BTreeMap, HashSet};

use anyhow::{bail, Context, Result};
use serde::Serialize;

use crate::kernel::{GuestKernel, NIC_MODULES};

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
