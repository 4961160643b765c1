//! The ethtool ioctl layer: `SIOCETHTOOL` on an `AF_INET`/`SOCK_DGRAM` socket.
//!
//! The structs are `#[repr(C)]` copies of `include/uapi/linux/ethtool.h`, with
//! the flexible array members replaced by fixed arrays large enough for any
//! current kernel. Every `unsafe` of the tuning is in [`ethtool_ioctl`].

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// `include/uapi/linux/sockios.h`
const SIOCETHTOOL: libc::c_ulong = 0x8946;
const IFNAMSIZ: usize = 16;

// Commands, `include/uapi/linux/ethtool.h`.
const ETHTOOL_GDRVINFO: u32 = 0x0000_0003;
const ETHTOOL_GSTRINGS: u32 = 0x0000_001b;
const ETHTOOL_GSTATS: u32 = 0x0000_001d;
const ETHTOOL_GGRO: u32 = 0x0000_002b;
const ETHTOOL_SGRO: u32 = 0x0000_002c;
const ETHTOOL_GSSET_INFO: u32 = 0x0000_0037;
const ETHTOOL_GFEATURES: u32 = 0x0000_003a;
const ETHTOOL_SFEATURES: u32 = 0x0000_003b;
const ETHTOOL_GCHANNELS: u32 = 0x0000_003c;
const ETHTOOL_SCHANNELS: u32 = 0x0000_003d;

/// `enum ethtool_stringset`: ETH_SS_TEST, STATS, PRIV_FLAGS, NTUPLE_FILTERS, FEATURES.
const ETH_SS_STATS: u32 = 1;
const ETH_SS_FEATURES: u32 = 4;
const ETH_GSTRING_LEN: usize = 32;


/// Capacity of our feature arrays: 256 features (6.x kernels have about 70).
const MAX_FEATURE_WORDS: usize = 8;
const MAX_FEATURES: usize = MAX_FEATURE_WORDS * 32;

/// `struct ifreq` with the union seen as its `ifr_data` member (40 bytes on LP64).
#[repr(C)]
struct IfReq {
    name: [u8; IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 24 - std::mem::size_of::<usize>()],
}

/// `struct ethtool_drvinfo`
#[repr(C)]
struct EthtoolDrvinfo {
    cmd: u32,
    driver: [u8; 32],
    version: [u8; 32],
    fw_version: [u8; 32],
    bus_info: [u8; 32],
    erom_version: [u8; 32],
    reserved2: [u8; 12],
    n_priv_flags: u32,
    n_stats: u32,
    testinfo_len: u32,
    eedump_len: u32,
    regdump_len: u32,
}

/// `struct ethtool_channels`
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

/// `struct ethtool_value`
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// `struct ethtool_sset_info` asking for one string set (so one `data` word).
#[repr(C)]
struct EthtoolSsetInfo {
    cmd: u32,
    reserved: u32,
    sset_mask: u64,
    data: [u32; 1],
}


/// Capacity of our statistics arrays (veth has 9 per queue pair, virtio_net
/// about 20).
const MAX_STATS: usize = 2048;
/// Strings of a string set we read at most.
const MAX_STRINGS: usize = MAX_STATS;

/// `struct ethtool_gstrings` with room for [`MAX_STRINGS`] strings.
#[repr(C)]
struct EthtoolGstrings {
    cmd: u32,
    string_set: u32,
    len: u32,
    data: [u8; MAX_STRINGS * ETH_GSTRING_LEN],
}

/// `struct ethtool_stats` with room for [`MAX_STATS`] values.
#[repr(C)]
struct EthtoolStats {
    cmd: u32,
    n_stats: u32,
    data: [u64; MAX_STATS],
}

/// `struct ethtool_get_features_block`
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
struct GetFeaturesBlock {
    available: u32,
    requested: u32,
    active: u32,
    never_changed: u32,
}

/// `struct ethtool_gfeatures` with room for [`MAX_FEATURE_WORDS`] blocks.
#[repr(C)]
struct EthtoolGfeatures {
    cmd: u32,
    size: u32,
    features: [GetFeaturesBlock; MAX_FEATURE_WORDS],
}

/// `struct ethtool_set_features_block`
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct SetFeaturesBlock {
    valid: u32,
    requested: u32,
}

/// `struct ethtool_sfeatures` with room for [`MAX_FEATURE_WORDS`] blocks.
#[repr(C)]
struct EthtoolSfeatures {
    cmd: u32,
    size: u32,
    features: [SetFeaturesBlock; MAX_FEATURE_WORDS],
}

/// # Safety
///
/// Implementors are `#[repr(C)]` plain-old-data copies of an ethtool command
/// struct (first field: the `u32` command), and are large enough for all the
/// kernel reads or writes for that command, given the counts the safe wrappers
/// below put in them (or check before the call).
unsafe trait EthtoolCmd {}
// SAFETY: #[repr(C)] copy of the kernel struct; its counts are set or checked by the wrapper that uses it.
unsafe impl EthtoolCmd for EthtoolDrvinfo {}
// SAFETY: #[repr(C)] copy of the kernel struct; its counts are set or checked by the wrapper that uses it.
unsafe impl EthtoolCmd for EthtoolChannels {}
// SAFETY: #[repr(C)] copy of the kernel struct; its counts are set or checked by the wrapper that uses it.
unsafe impl EthtoolCmd for EthtoolValue {}
// SAFETY: #[repr(C)] copy of the kernel struct; its counts are set or checked by the wrapper that uses it.
unsafe impl EthtoolCmd for EthtoolSsetInfo {}
// SAFETY: #[repr(C)] copy of the kernel struct; its counts are set or checked by the wrapper that uses it.
unsafe impl EthtoolCmd for EthtoolGstrings {}
// SAFETY: #[repr(C)] copy of the kernel struct; its counts are set or checked by the wrapper that uses it.
unsafe impl EthtoolCmd for EthtoolGfeatures {}
// SAFETY: #[repr(C)] copy of the kernel struct; its counts are set or checked by the wrapper that uses it.
unsafe impl EthtoolCmd for EthtoolStats {}
// SAFETY: #[repr(C)] copy of the kernel struct; its counts are set or checked by the wrapper that uses it.
unsafe impl EthtoolCmd for EthtoolSfeatures {}

fn ifname_bytes(ifname: &str) -> io::Result<[u8; IFNAMSIZ]> {
    let b = ifname.as_bytes();
    if b.is_empty() || b.len() >= IFNAMSIZ || b.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("invalid interface name {ifname:?}"),
        ));
    }
    let mut name = [0u8; IFNAMSIZ];
    name[..b.len()].copy_from_slice(b);
    Ok(name)
}

/// One `SIOCETHTOOL` call: the only `unsafe` code of the tune module.
///
/// Returns the ioctl's non-negative result (`ETHTOOL_SFEATURES` reports
/// `ETHTOOL_F_*` flags through it).
fn ethtool_ioctl<T: EthtoolCmd>(ifname: &str, cmd: &mut T) -> io::Result<i32> {
    let mut ifr = IfReq {
        name: ifname_bytes(ifname)?,
        data: (cmd as *mut T).cast(),
        _pad: [0; 24 - std::mem::size_of::<usize>()],
    };
    // SAFETY: socket(2) takes no pointers; on success the descriptor is new
    // and owned by nobody else, so `OwnedFd` may take it (and close it).
    let fd = unsafe {
        let raw = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        OwnedFd::from_raw_fd(raw)
    };
    // SAFETY: `ifr` is a valid `struct ifreq` (NUL-terminated name) that lives
    // across the call. Its data pointer is `cmd`, exclusively borrowed for the
    // call, and by the `EthtoolCmd` contract the kernel reads and writes only
    // within `size_of::<T>()` bytes of it.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), SIOCETHTOOL as _, &mut ifr as *mut IfReq) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

/// `ETHTOOL_GDRVINFO`: the driver name (`veth`, `virtio_net`, ...).
pub fn driver(ifname: &str) -> io::Result<String> {
    let mut info = EthtoolDrvinfo {
        cmd: ETHTOOL_GDRVINFO,
        driver: [0; 32],
        version: [0; 32],
        fw_version: [0; 32],
        bus_info: [0; 32],
        erom_version: [0; 32],
        reserved2: [0; 12],
        n_priv_flags: 0,
        n_stats: 0,
        testinfo_len: 0,
        eedump_len: 0,
        regdump_len: 0,
    };
    ethtool_ioctl(ifname, &mut info)?;
    Ok(c_string(&info.driver))
}

/// A device's channel counts (`ethtool -l`): `struct ethtool_channels`
/// without the command word. A channel is an interrupt with its queues:
/// `combined` ones have an RX and a TX queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Channels {
    /// Most RX-only channels the device supports.
    pub max_rx: u32,
    /// Most TX-only channels.
    pub max_tx: u32,
    /// Most other (e.g. link interrupt) channels.
    pub max_other: u32,
    /// Most combined channels.
    pub max_combined: u32,
    /// RX-only channels in use.
    pub rx: u32,
    /// TX-only channels in use.
    pub tx: u32,
    /// Other channels in use.
    pub other: u32,
    /// Combined channels in use.
    pub combined: u32,
}

impl Channels {
    /// Receive queues in use: combined channels plus rx-only channels.
    pub fn rx_queues(&self) -> u32 {
        self.combined + self.rx
    }
}

/// `ETHTOOL_GCHANNELS`
pub fn channels(ifname: &str) -> io::Result<Channels> {
    let mut ch = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..Default::default()
    };
    ethtool_ioctl(ifname, &mut ch)?;
    Ok(Channels {
        max_rx: ch.max_rx,
        max_tx: ch.max_tx,
        max_other: ch.max_other,
        max_combined: ch.max_combined,
        rx: ch.rx_count,
        tx: ch.tx_count,
        other: ch.other_count,
        combined: ch.combined_count,
    })
}

/// `ETHTOOL_SCHANNELS` with the current counts of `ch` (maxima are ignored).
pub fn set_channels(ifname: &str, ch: &Channels) -> io::Result<()> {
    let mut c = EthtoolChannels {
        cmd: ETHTOOL_SCHANNELS,
        max_rx: ch.max_rx,
        max_tx: ch.max_tx,
        max_other: ch.max_other,
        max_combined: ch.max_combined,
        rx_count: ch.rx,
        tx_count: ch.tx,
        other_count: ch.other,
        combined_count: ch.combined,
    };
    ethtool_ioctl(ifname, &mut c).map(drop)
}

/// One feature as `ETHTOOL_GFEATURES` reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct FeatureState {
    /// In effect now (`ethtool -k` shows this).
    pub active: bool,
    /// What user space asked for (`wanted_features`).
    pub requested: bool,
    /// In `hw_features`: user space may change it (`ethtool -k` prints `[fixed]` otherwise).
    pub changeable: bool,
}

/// The `ETH_SS_FEATURES` string set and the feature words of one device.
#[derive(Clone, Debug)]
pub struct Features {
    names: Vec<String>,
    blocks: Vec<FeatureWord>,
}

#[derive(Clone, Copy, Debug, Default)]
struct FeatureWord {
    available: u32,
    requested: u32,
    active: u32,
}

impl Features {
    pub fn index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    pub fn state(&self, name: &str) -> Option<FeatureState> {
        let i = self.index(name)?;
        let b = self.blocks.get(i / 32)?;
        let bit = 1u32 << (i % 32);
        Some(FeatureState {
            active: b.active & bit != 0,
            requested: b.requested & bit != 0,
            changeable: b.available & bit != 0,
        })
    }

    /// All features by name, in string-set order.
    pub fn all(&self) -> impl Iterator<Item = (&str, FeatureState)> + '_ {
        self.names
            .iter()
            .filter_map(move |n| self.state(n).map(|s| (n.as_str(), s)))
    }

    fn words(&self) -> usize {
        self.blocks.len()
    }
}

/// `ETHTOOL_GSSET_INFO` + `ETHTOOL_GSTRINGS` for `ETH_SS_FEATURES`, then
/// `ETHTOOL_GFEATURES`: features looked up by name, so independent of the
/// kernel's `NETIF_F_*_BIT` numbering.
pub fn features(ifname: &str) -> io::Result<Features> {
    let names = strings(ifname, ETH_SS_FEATURES, MAX_FEATURES)?;
    if names.is_empty() {
        return Err(io::Error::new(io::ErrorKind::Unsupported, "no features in ETH_SS_FEATURES"));
    }

    let mut get = EthtoolGfeatures {
        cmd: ETHTOOL_GFEATURES,
        size: MAX_FEATURE_WORDS as u32,
        features: [GetFeaturesBlock::default(); MAX_FEATURE_WORDS],
    };
    ethtool_ioctl(ifname, &mut get)?;
    // The kernel answers with its own word count in `size`.
    let words = (get.size as usize).min(MAX_FEATURE_WORDS);
    let blocks = get.features[..words]
        .iter()
        .map(|b| FeatureWord {
            available: b.available,
            requested: b.requested,
            active: b.active,
        })
        .collect();
    Ok(Features { names, blocks })
}

/// How many entries a string set has (`ETHTOOL_GSSET_INFO`), refusing more
/// than `max` (the kernel writes that many whatever our buffer holds).
fn sset_len(ifname: &str, set: u32, max: usize) -> io::Result<usize> {
    let mut info = EthtoolSsetInfo { cmd: ETHTOOL_GSSET_INFO, reserved: 0, sset_mask: 1u64 << set, data: [0] };
    ethtool_ioctl(ifname, &mut info)?;
    if info.sset_mask & (1u64 << set) == 0 {
        return Err(io::Error::new(io::ErrorKind::Unsupported, format!("no string set {set}")));
    }
    let count = info.data[0] as usize;
    if count > max {
        return Err(io::Error::new(io::ErrorKind::Unsupported, format!("{count} entries: more than the {max} this code handles")));
    }
    Ok(count)
}

/// The strings of string set `set` (`ETHTOOL_GSSET_INFO`, then
/// `ETHTOOL_GSTRINGS`), at most `max` of them (else an error: the kernel
/// writes them all whatever our buffer holds).
fn strings(ifname: &str, set: u32, max: usize) -> io::Result<Vec<String>> {
    let count = sset_len(ifname, set, max.min(MAX_STRINGS))?;
    let mut strings = Box::new(EthtoolGstrings {
        cmd: ETHTOOL_GSTRINGS,
        string_set: set,
        len: count as u32,
        data: [0; MAX_STRINGS * ETH_GSTRING_LEN],
    });
    ethtool_ioctl(ifname, &mut *strings)?;
    let n = (strings.len as usize).min(count);
    Ok((0..n).map(|i| c_string(&strings.data[i * ETH_GSTRING_LEN..(i + 1) * ETH_GSTRING_LEN])).collect())
}

/// The names of the device's statistics (`ethtool -S`), in order.
pub fn stat_names(ifname: &str) -> io::Result<Vec<String>> {
    strings(ifname, ETH_SS_STATS, MAX_STATS)
}

/// The device's statistics (`ethtool -S`), in the order of [`stat_names`].
pub fn stat_values(ifname: &str) -> io::Result<Vec<u64>> {
    let count = sset_len(ifname, ETH_SS_STATS, MAX_STATS)?;
    let mut st = Box::new(EthtoolStats { cmd: ETHTOOL_GSTATS, n_stats: count as u32, data: [0; MAX_STATS] });
    ethtool_ioctl(ifname, &mut *st)?;
    let n = (st.n_stats as usize).min(count);
    Ok(st.data[..n].to_vec())
}

/// `ETHTOOL_SFEATURES`: request each named feature on or off. Returns the
/// `ETHTOOL_F_*` flags (`ETHTOOL_F_WISH`: recorded, but not (all) in effect).
pub fn set_features(ifname: &str, table: &Features, changes: &[(&str, bool)]) -> io::Result<i32> {
    let mut set = EthtoolSfeatures {
        cmd: ETHTOOL_SFEATURES,
        // The kernel insists on exactly its own word count.
        size: table.words() as u32,
        features: [SetFeaturesBlock::default(); MAX_FEATURE_WORDS],
    };
    for &(name, on) in changes {
        let i = table.index(name).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("feature {name} not in ETH_SS_FEATURES"),
            )
        })?;
        let block = &mut set.features[i / 32];
        let bit = 1u32 << (i % 32);
        block.valid |= bit;
        if on {
            block.requested |= bit;
        } else {
            block.requested &= !bit;
        }
    }
    ethtool_ioctl(ifname, &mut set)
}

/// Legacy `ETHTOOL_GGRO` (fallback when the feature string set is unavailable).
pub fn gro(ifname: &str) -> io::Result<bool> {
    let mut v = EthtoolValue {
        cmd: ETHTOOL_GGRO,
        data: 0,
    };
    ethtool_ioctl(ifname, &mut v)?;
    Ok(v.data != 0)
}

/// Legacy `ETHTOOL_SGRO`.
pub fn set_gro(ifname: &str, on: bool) -> io::Result<()> {
    let mut v = EthtoolValue {
        cmd: ETHTOOL_SGRO,
        data: on as u32,
    };
    ethtool_ioctl(ifname, &mut v).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn layouts_match_the_uapi() {
        assert_eq!(size_of::<IfReq>(), 40);
        assert_eq!(offset_of!(IfReq, data), 16);
        assert_eq!(size_of::<EthtoolDrvinfo>(), 196);
        assert_eq!(offset_of!(EthtoolDrvinfo, driver), 4);
        assert_eq!(offset_of!(EthtoolDrvinfo, n_priv_flags), 176);
        assert_eq!(size_of::<EthtoolChannels>(), 36);
        assert_eq!(offset_of!(EthtoolSsetInfo, sset_mask), 8);
        assert_eq!(offset_of!(EthtoolSsetInfo, data), 16);
        assert_eq!(offset_of!(EthtoolGstrings, data), 12);
        assert_eq!(offset_of!(EthtoolStats, data), 8);
        assert_eq!(offset_of!(EthtoolGfeatures, features), 8);
        assert_eq!(size_of::<GetFeaturesBlock>(), 16);
        assert_eq!(size_of::<SetFeaturesBlock>(), 8);
    }

    #[test]
    fn ifname_checks() {
        assert!(ifname_bytes("eth0").is_ok());
        assert!(ifname_bytes("").is_err());
        assert!(ifname_bytes("a-name-that-is-too-long").is_err());
        assert!(ifname_bytes("bad\0name").is_err());
    }

    #[test]
    fn feature_lookup_by_name() {
        let f = Features {
            names: (0..40)
                .map(|i| format!("f{i}"))
                .chain(["rx-gro".to_string()])
                .collect(),
            blocks: vec![
                FeatureWord::default(),
                FeatureWord {
                    available: 1 << 8,
                    requested: 1 << 8,
                    active: 1 << 8,
                },
            ],
        };
        assert_eq!(f.index("rx-gro"), Some(40));
        assert_eq!(
            f.state("rx-gro"),
            Some(FeatureState {
                active: true,
                requested: true,
                changeable: true
            })
        );
        assert_eq!(f.state("f1"), Some(FeatureState::default()));
        assert_eq!(f.state("nope"), None);
    }
}
