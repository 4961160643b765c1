//! The record: what one owner may change, in a line-based text format that
//! a person can read (and `cat` after a crash).

use std::fmt::Write as _;
use std::path::Path;

use crate::ethtool::Channels;

use super::error::StateError;

pub(super) const MAGIC: &str = "xsk-io-state 1";

/// The original state of one device, as far as the port may change it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeviceState {
    /// The device (the interface itself, or its veth peer).
    pub ifname: String,
    /// MTU in bytes before.
    pub mtu: Option<u32>,
    /// Channel counts before (only when the port changes them).
    pub channels: Option<Channels>,
    /// `requested` bits of the features the port changes.
    pub features: Vec<(String, bool)>,
}

/// Everything one owner may change, recorded before the first change.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    /// The owner's pid.
    pub pid: u32,
    /// Start time of `pid` (clock ticks since boot), so a reused pid is not
    /// mistaken for the owner.
    pub pid_start: u64,
    /// The interface owned.
    pub ifname: String,
    /// The interface's index when recorded: a device re-created under the same
    /// name is not the one that was changed, and is left alone.
    pub ifindex: u32,
    /// Original state of every device the owner changes, in recording order.
    pub devices: Vec<DeviceState>,
    /// `/proc/sys` paths below `/proc/sys/` (e.g. `net/ipv4/ip_local_reserved_ports`)
    /// and their original values.
    pub sysctls: Vec<(String, String)>,
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('\n', "\\n")
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c == '\\' {
            match it.next() {
                Some('n') => out.push('\n'),
                Some(o) => out.push(o),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

impl Record {
    /// The record as text: one fact per line, for people as much as for the parser.
    pub(crate) fn to_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "{MAGIC}");
        let _ = writeln!(s, "# original device state, restored by the next xsk-io start or `xsk-bench restore {}`", self.ifname);
        let _ = writeln!(s, "owner {} {}", self.pid, self.pid_start);
        let _ = writeln!(s, "interface {} {}", self.ifname, self.ifindex);
        for d in &self.devices {
            let _ = writeln!(s, "device {}", d.ifname);
            if let Some(m) = d.mtu {
                let _ = writeln!(s, "mtu {m}");
            }
            if let Some(c) = d.channels {
                let _ = writeln!(s, "channels rx {} tx {} other {} combined {}", c.rx, c.tx, c.other, c.combined);
            }
            for (n, on) in &d.features {
                let _ = writeln!(s, "feature {n} {}", if *on { "on" } else { "off" });
            }
        }
        for (k, v) in &self.sysctls {
            let _ = writeln!(s, "sysctl {k} {}", escape(v));
        }
        s
    }

    pub(crate) fn parse(text: &str, path: &Path) -> Result<Record, StateError> {
        let err = |line: usize, msg: String| StateError::Parse { path: path.to_path_buf(), line, msg };
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, l)) if l == MAGIC => {}
            _ => return Err(err(1, format!("does not start with {MAGIC:?}"))),
        }
        let mut r = Record::default();
        for (i, line) in lines {
            let n = i + 1;
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let (key, rest) = line.split_once(' ').unwrap_or((line, ""));
            let words: Vec<&str> = rest.split_whitespace().collect();
            let num = |w: Option<&&str>| -> Result<u64, StateError> {
                w.and_then(|w| w.parse().ok()).ok_or_else(|| err(n, format!("expected a number in {line:?}")))
            };
            fn device(r: &mut Record, e: impl FnOnce() -> StateError) -> Result<&mut DeviceState, StateError> {
                r.devices.last_mut().ok_or_else(e)
            }
            let no_dev = || err(n, format!("{key} before any device line"));
            match key {
                "owner" => {
                    r.pid = num(words.first())? as u32;
                    r.pid_start = num(words.get(1))?;
                }
                "interface" => {
                    r.ifname = words.first().ok_or_else(|| err(n, "interface without a name".into()))?.to_string();
                    r.ifindex = num(words.get(1))? as u32;
                }
                "device" => {
                    let name = words.first().ok_or_else(|| err(n, "device without a name".into()))?;
                    r.devices.push(DeviceState { ifname: name.to_string(), ..Default::default() });
                }
                "mtu" => device(&mut r, no_dev)?.mtu = Some(num(words.first())? as u32),
                "channels" => {
                    let get = |k: &str| -> Result<u32, StateError> {
                        let i = words.iter().position(|w| *w == k).ok_or_else(|| err(n, format!("channels without {k}")))?;
                        Ok(num(words.get(i + 1))? as u32)
                    };
                    let c = Channels { rx: get("rx")?, tx: get("tx")?, other: get("other")?, combined: get("combined")?, ..Default::default() };
                    device(&mut r, no_dev)?.channels = Some(c);
                }
                "feature" => {
                    let (Some(name), Some(v)) = (words.first(), words.get(1)) else {
                        return Err(err(n, format!("expected `feature NAME on|off`, got {line:?}")));
                    };
                    let on = match *v {
                        "on" => true,
                        "off" => false,
                        _ => return Err(err(n, format!("expected on or off, got {v:?}"))),
                    };
                    device(&mut r, no_dev)?.features.push((name.to_string(), on));
                }
                "sysctl" => {
                    let (k, v) = rest.split_once(' ').unwrap_or((rest, ""));
                    if k.is_empty() {
                        return Err(err(n, "sysctl without a name".into()));
                    }
                    r.sysctls.push((k.to_string(), unescape(v)));
                }
                other => return Err(err(n, format!("unknown key {other:?}"))),
            }
        }
        if r.ifname.is_empty() {
            return Err(err(0, "no interface line".into()));
        }
        Ok(r)
    }
}
