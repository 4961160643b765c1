//! Putting a device and the sysctls back as a record says, where they
//! differ, each step reported.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::ethtool::{self, Channels};
use crate::step::{Outcome, Step};

use super::record::{DeviceState, Record};

fn ok_step(what: String, from: String, to: String) -> Step {
    Step { what, outcome: Outcome::Changed { from, to } }
}

fn failed_step(what: String, error: String, fix: String) -> Step {
    Step { what, outcome: Outcome::Failed { error, fix } }
}

fn onoff(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// Puts one device back where it differs from `d`: features, then channels, then MTU.
fn restore_device(d: &DeviceState) -> Vec<Step> {
    let mut steps = Vec::new();
    let ifname = &d.ifname;
    if !d.features.is_empty() {
        let what = format!("{ifname}: features");
        match ethtool::features(ifname) {
            Ok(table) => {
                let differ: Vec<(&str, bool)> = d
                    .features
                    .iter()
                    .filter(|(n, on)| table.state(n).is_some_and(|s| s.requested != *on))
                    .map(|(n, on)| (n.as_str(), *on))
                    .collect();
                if !differ.is_empty() {
                    let list = differ.iter().map(|(n, on)| format!("{n} {}", onoff(*on))).collect::<Vec<_>>().join(" ");
                    steps.push(match ethtool::set_features(ifname, &table, &differ) {
                        Ok(_) => ok_step(what, "changed".into(), list),
                        Err(e) => failed_step(what, format!("ETHTOOL_SFEATURES: {e}"), format!("run: ethtool -K {ifname} {list}")),
                    });
                }
            }
            // Without the string set only rx-gro can have been changed (legacy ETHTOOL_SGRO).
            Err(_) => {
                for (n, on) in d.features.iter().filter(|(n, _)| n == "rx-gro") {
                    if ethtool::gro(ifname).ok() != Some(*on) {
                        steps.push(match ethtool::set_gro(ifname, *on) {
                            Ok(()) => ok_step(format!("{ifname}: {n}"), onoff(!on).into(), onoff(*on).into()),
                            Err(e) => failed_step(format!("{ifname}: {n}"), format!("ETHTOOL_SGRO: {e}"), format!("run: ethtool -K {ifname} gro {}", onoff(*on))),
                        });
                    }
                }
            }
        }
    }
    if let Some(want) = d.channels {
        let what = format!("{ifname}: channels");
        match ethtool::channels(ifname) {
            Ok(now) if (now.rx, now.tx, now.other, now.combined) == (want.rx, want.tx, want.other, want.combined) => {}
            Ok(now) => {
                let set = Channels { rx: want.rx, tx: want.tx, other: want.other, combined: want.combined, ..now };
                let show = |c: &Channels| format!("rx {} tx {} combined {}", c.rx, c.tx, c.combined);
                steps.push(match ethtool::set_channels(ifname, &set) {
                    Ok(()) => ok_step(what, show(&now), show(&set)),
                    Err(e) => failed_step(what, format!("ETHTOOL_SCHANNELS: {e}"), format!("run: ethtool -L {ifname} {}", show(&set))),
                });
            }
            Err(e) => steps.push(failed_step(what, format!("ETHTOOL_GCHANNELS: {e}"), format!("run: ethtool -l {ifname}"))),
        }
    }
    if let Some(want) = d.mtu {
        match crate::ifaddr::mtu(ifname) {
            Ok(now) if now == want => {}
            Ok(now) => steps.push(match crate::ifaddr::set_mtu(ifname, want) {
                Ok(()) => ok_step(format!("{ifname}: mtu"), now.to_string(), want.to_string()),
                Err(e) => failed_step(format!("{ifname}: mtu"), format!("SIOCSIFMTU: {e}"), format!("run: ip link set dev {ifname} mtu {want}")),
            }),
            Err(e) => steps.push(failed_step(format!("{ifname}: mtu"), e.to_string(), format!("run: ip link show {ifname}"))),
        }
    }
    steps
}

pub(super) fn sysctl_path(name: &str) -> PathBuf {
    Path::new("/proc/sys").join(name.trim_start_matches('/'))
}

/// Reads a sysctl (`net/ipv4/ip_local_reserved_ports`), without the trailing newline.
pub fn read_sysctl(name: &str) -> io::Result<String> {
    let v = fs::read_to_string(sysctl_path(name))?;
    Ok(v.strip_suffix('\n').unwrap_or(&v).to_string())
}

pub(super) fn write_sysctl(name: &str, value: &str) -> io::Result<()> {
    // An empty write is refused by some handlers (e.g. port ranges): a newline is "empty" to all.
    let v = if value.is_empty() { "\n".to_string() } else { value.to_string() };
    fs::write(sysctl_path(name), v)
}

pub(super) fn restore_sysctls(sysctls: &[(String, String)]) -> Vec<Step> {
    let mut steps = Vec::new();
    // Newest first, like every undo.
    for (k, v) in sysctls.iter().rev() {
        let now = read_sysctl(k).unwrap_or_default();
        if now == *v {
            continue;
        }
        steps.push(match write_sysctl(k, v) {
            Ok(()) => ok_step(format!("sysctl {k}"), now, v.clone()),
            Err(e) => failed_step(format!("sysctl {k}"), e.to_string(), format!("run: sysctl -w {}={v:?}", k.replace('/', "."))),
        });
    }
    steps
}

/// Applies a record (after a crash): every device where it differs, then the sysctls.
pub(crate) fn apply_record(r: &Record) -> Vec<Step> {
    let mut steps = Vec::new();
    let index_now = xsk_io::sys::if_nametoindex(&r.ifname).ok();
    if index_now != Some(r.ifindex) {
        steps.push(Step {
            what: format!("{}: device state", r.ifname),
            outcome: Outcome::Skipped(format!(
                "the recorded device (ifindex {}) is gone{}",
                r.ifindex,
                index_now.map_or(String::new(), |i| format!("; {} is now ifindex {i}, a different device", r.ifname))
            )),
        });
    } else {
        for d in &r.devices {
            steps.extend(restore_device(d));
        }
    }
    steps.extend(restore_sysctls(&r.sysctls));
    steps
}
