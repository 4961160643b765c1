//! What the decisions need to know about a device, read once from sysfs and
//! ethtool. The (crate-internal) planner decides on this data alone, so it is unit-tested
//! with hand-made snapshots (e.g. of a virtio_net NIC this host doesn't have).

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::Path;

use crate::ethtool::{self, Channels, FeatureState};
use super::error::TuneError;

/// Negotiated virtio feature bits (`/sys/class/net/X/device/features`, a
/// string of `0`/`1` with bit 0 first; see `features_show` in drivers/virtio/virtio.c).
/// Element `i` is bit `i`; ask with [`has`](Self::has) and the [`vbit`] numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct VirtioFeatures(pub Vec<bool>);

/// Feature bit numbers from include/uapi/linux/virtio_net.h and
/// virtio_config.h (`VIRTIO_NET_F_<NAME>`, `VIRTIO_F_VERSION_1`), the ones
/// the tuning looks at.
pub mod vbit {
    /// The guest accepts packets with partial checksums (`CHECKSUM_PARTIAL`).
    pub const GUEST_CSUM: usize = 1;
    /// The guest may switch its receive offloads at run time.
    pub const CTRL_GUEST_OFFLOADS: usize = 2;
    /// The guest receives TSO IPv4 super-packets.
    pub const GUEST_TSO4: usize = 7;
    /// The guest receives TSO IPv6 super-packets.
    pub const GUEST_TSO6: usize = 8;
    /// The guest receives TSO with ECN.
    pub const GUEST_ECN: usize = 9;
    /// The guest receives UFO.
    pub const GUEST_UFO: usize = 10;
    /// Mergeable receive buffers.
    pub const MRG_RXBUF: usize = 15;
    /// Multiqueue.
    pub const MQ: usize = 22;
    /// Any descriptor layout (the header needs no buffer of its own).
    pub const ANY_LAYOUT: usize = 27;
    /// A virtio 1.0 (modern) device.
    pub const VERSION_1: usize = 32;
    /// The guest receives USO IPv4 super-packets.
    pub const GUEST_USO4: usize = 54;
    /// The guest receives USO IPv6 super-packets.
    pub const GUEST_USO6: usize = 55;
}

impl VirtioFeatures {
    /// Parses the sysfs string (`'1'` is set, anything else clear).
    pub(crate) fn parse(s: &str) -> Self {
        VirtioFeatures(s.trim().bytes().map(|b| b == b'1').collect())
    }

    /// From a list of set bits (for tests).
    #[cfg(test)]
    pub(crate) fn from_bits(bits: &[usize]) -> Self {
        let mut v = vec![false; 64];
        for &b in bits {
            if b >= v.len() {
                v.resize(b + 1, false);
            }
            v[b] = true;
        }
        VirtioFeatures(v)
    }

    /// Whether feature bit `bit` was negotiated (false beyond the string).
    pub fn has(&self, bit: usize) -> bool {
        self.0.get(bit).copied().unwrap_or(false)
    }
}

/// The other end of a veth pair.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Peer {
    /// Not a veth device.
    NotVeth,
    /// The peer is in this network namespace.
    Here(PeerSnapshot),
    /// The peer is in another network namespace (`ifindex` is its index there).
    Elsewhere {
        /// The peer's interface index in its own namespace.
        ifindex: u32,
    },
}

/// What the tuning needs to know about a veth peer in the same namespace
/// (its segmentation offloads decide what arrives on our side).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct PeerSnapshot {
    /// The peer's name.
    pub ifname: String,
    /// The peer's index.
    pub ifindex: u32,
    /// The peer's MTU in bytes.
    pub mtu: u32,
    /// `real_num_tx_queues`
    pub tx_queues: u32,
    /// The peer's features by `ETH_SS_FEATURES` name.
    pub features: BTreeMap<String, FeatureState>,
}

/// Where the feature table came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum FeatureSource {
    /// `ETHTOOL_GSSET_INFO`/`GSTRINGS`/`GFEATURES`: every feature, by name.
    StringSet,
    /// Legacy `ETHTOOL_GGRO`: only `rx-gro` is known.
    LegacyGro,
    /// Neither worked.
    Unknown,
}

/// What the tuning decides on: one device's state, read once by
/// [`crate::tune::snapshot()`] (no changes made).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct DeviceSnapshot {
    /// The interface.
    pub ifname: String,
    /// Its driver (`ETHTOOL_GDRVINFO`).
    pub driver: String,
    /// Its index.
    pub ifindex: u32,
    /// `/sys/class/net/X/iflink`: for a veth, the peer's ifindex (in the peer's namespace).
    pub iflink: u32,
    /// MTU in bytes.
    pub mtu: u32,
    /// `real_num_rx_queues` (count of `/sys/class/net/X/queues/rx-*`).
    pub rx_queues: u32,
    /// `real_num_tx_queues`
    pub tx_queues: u32,
    /// `ETHTOOL_GCHANNELS`, if the driver implements it.
    pub channels: Option<Channels>,
    /// Features by `ETH_SS_FEATURES` name (`rx-gro`, `rx-lro`, `rx-gro-hw`, ...).
    pub features: BTreeMap<String, FeatureState>,
    /// How `features` was read.
    pub feature_source: FeatureSource,
    /// Negotiated virtio feature bits, for virtio_net devices.
    pub virtio: Option<VirtioFeatures>,
    /// `nr_cpu_ids` (from `/sys/devices/system/cpu/possible`): virtio_net wants
    /// that many extra queue pairs for XDP TX.
    pub nr_cpu_ids: u32,
    /// The system page size in bytes (native XDP's MTU limits depend on it).
    pub page_size: u32,
    /// The veth peer, if this is a veth.
    pub peer: Peer,
}

impl DeviceSnapshot {
    /// Receive queues in use now: from the channel counts if the driver
    /// reports them, else from sysfs.
    pub fn rx_queue_count(&self) -> u32 {
        match self.channels {
            Some(ch) if ch.rx_queues() > 0 => ch.rx_queues(),
            _ => self.rx_queues,
        }
    }

    /// A plain device with the given driver, for tests and examples.
    #[cfg(test)]
    pub(crate) fn example(driver: &str) -> Self {
        DeviceSnapshot {
            ifname: "eth0".into(),
            driver: driver.into(),
            ifindex: 2,
            iflink: 2,
            mtu: 1500,
            rx_queues: 1,
            tx_queues: 1,
            channels: None,
            features: BTreeMap::new(),
            feature_source: FeatureSource::StringSet,
            virtio: None,
            nr_cpu_ids: 2,
            page_size: 4096,
            peer: Peer::NotVeth,
        }
    }
}

fn io_err(op: &'static str, ifname: &str, source: io::Error) -> TuneError {
    TuneError::io(op, ifname, source)
}

fn read_u32(path: &Path) -> io::Result<u32> {
    let s = fs::read_to_string(path)?;
    s.trim().parse().map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{}: {e}", path.display()),
        )
    })
}

fn count_queues(ifname: &str, prefix: &str) -> io::Result<u32> {
    let mut n = 0;
    for e in fs::read_dir(format!("/sys/class/net/{ifname}/queues"))? {
        if e?.file_name().to_string_lossy().starts_with(prefix) {
            n += 1;
        }
    }
    Ok(n)
}

/// `nr_cpu_ids` = highest possible CPU + 1 (`/sys/devices/system/cpu/possible`, e.g. `0-3`).
pub(crate) fn parse_cpu_list_max(s: &str) -> Option<u32> {
    s.trim()
        .split(',')
        .filter_map(|part| part.rsplit('-').next()?.trim().parse::<u32>().ok())
        .max()
        .map(|m| m + 1)
}

fn nr_cpu_ids() -> u32 {
    fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|s| parse_cpu_list_max(&s))
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get() as u32)
                .unwrap_or(1)
        })
}

fn page_size() -> u32 {
    xsk_io::sys::page_size() as u32
}

fn feature_table(ifname: &str) -> (BTreeMap<String, FeatureState>, FeatureSource) {
    match ethtool::features(ifname) {
        Ok(f) => (
            f.all().map(|(n, s)| (n.to_string(), s)).collect(),
            FeatureSource::StringSet,
        ),
        Err(_) => match ethtool::gro(ifname) {
            Ok(on) => {
                let st = FeatureState {
                    active: on,
                    requested: on,
                    changeable: true,
                };
                (
                    [("rx-gro".to_string(), st)].into_iter().collect(),
                    FeatureSource::LegacyGro,
                )
            }
            Err(_) => (BTreeMap::new(), FeatureSource::Unknown),
        },
    }
}

/// The veth peer: `iflink` is the peer's ifindex in *its* namespace. It is in
/// ours if a device here has that index, is a veth, and points back at us.
fn find_peer(ifname: &str, ifindex: u32, iflink: u32) -> Peer {
    if iflink == ifindex {
        // Two devices of one namespace can't share an index: the peer is elsewhere.
        return Peer::Elsewhere { ifindex: iflink };
    }
    let Ok(dir) = fs::read_dir("/sys/class/net") else {
        return Peer::Elsewhere { ifindex: iflink };
    };
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name == ifname {
            continue;
        }
        let base = e.path();
        if read_u32(&base.join("ifindex")).ok() != Some(iflink)
            || read_u32(&base.join("iflink")).ok() != Some(ifindex)
            || ethtool::driver(&name).ok().as_deref() != Some("veth")
        {
            continue;
        }
        return Peer::Here(PeerSnapshot {
            mtu: read_u32(&base.join("mtu")).unwrap_or(0),
            tx_queues: count_queues(&name, "tx-").unwrap_or(1),
            features: feature_table(&name).0,
            ifindex: iflink,
            ifname: name,
        });
    }
    Peer::Elsewhere { ifindex: iflink }
}

/// Read everything [`super::plan::plan`] needs about `ifname`.
pub(crate) fn read(ifname: &str) -> Result<DeviceSnapshot, TuneError> {
    let driver = ethtool::driver(ifname).map_err(|e| io_err("ETHTOOL_GDRVINFO", ifname, e))?;
    let base = Path::new("/sys/class/net").join(ifname);
    if !base.exists() {
        // The ioctl found the device in our network namespace, sysfs did not:
        // /sys was mounted for another namespace (setns without remount).
        return Err(io_err(
            "sysfs lookup",
            ifname,
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} missing", base.display()),
            ),
        ));
    }
    let sys =
        |f: &'static str| read_u32(&base.join(f)).map_err(|e| io_err("sysfs read", ifname, e));
    let ifindex = sys("ifindex")?;
    let iflink = sys("iflink")?;
    let mtu = sys("mtu")?;
    let rx_queues = count_queues(ifname, "rx-").map_err(|e| io_err("sysfs queues", ifname, e))?;
    let tx_queues = count_queues(ifname, "tx-").map_err(|e| io_err("sysfs queues", ifname, e))?;
    let channels = ethtool::channels(ifname).ok();
    let (features, feature_source) = feature_table(ifname);
    let virtio = if driver == "virtio_net" {
        fs::read_to_string(base.join("device/features"))
            .ok()
            .map(|s| VirtioFeatures::parse(&s))
    } else {
        None
    };
    let peer = if driver == "veth" {
        find_peer(ifname, ifindex, iflink)
    } else {
        Peer::NotVeth
    };
    Ok(DeviceSnapshot {
        ifname: ifname.to_string(),
        driver,
        ifindex,
        iflink,
        mtu,
        rx_queues,
        tx_queues,
        channels,
        features,
        feature_source,
        virtio,
        nr_cpu_ids: nr_cpu_ids(),
        page_size: page_size(),
        peer,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list_max("0-1\n"), Some(2));
        assert_eq!(parse_cpu_list_max("0"), Some(1));
        assert_eq!(parse_cpu_list_max("0-3,8-11"), Some(12));
        assert_eq!(parse_cpu_list_max(""), None);
    }

    #[test]
    fn virtio_bits() {
        // bit 0 first: CSUM, GUEST_CSUM, CTRL_GUEST_OFFLOADS
        let f = VirtioFeatures::parse("0110000100\n");
        assert!(!f.has(0));
        assert!(f.has(vbit::GUEST_CSUM));
        assert!(f.has(vbit::CTRL_GUEST_OFFLOADS));
        assert!(f.has(vbit::GUEST_TSO4));
        assert!(!f.has(vbit::GUEST_TSO6));
        assert!(!f.has(200));
        assert!(VirtioFeatures::from_bits(&[vbit::VERSION_1]).has(32));
    }

    #[test]
    fn page_size_is_sane() {
        let p = page_size();
        assert!(p >= 4096 && p.is_power_of_two(), "{p}");
    }
}
