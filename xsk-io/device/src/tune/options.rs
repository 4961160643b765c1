//! What a device is prepared for: the queue layout and the options of
//! [`prepare`](super::prepare).

use std::fmt;
use std::str::FromStr;

use crate::AttachMode;

/// Which queues get a socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueLayout {
    /// Only queue 0 is bound: the device must deliver everything to queue 0.
    Single,
    /// A socket per receive queue.
    All,
}

impl fmt::Display for QueueLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            QueueLayout::Single => "single",
            QueueLayout::All => "all",
        })
    }
}

impl FromStr for QueueLayout {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "single" | "one" => Ok(QueueLayout::Single),
            "all" => Ok(QueueLayout::All),
            other => Err(format!(
                "unknown queue layout {other:?} (expected single or all)"
            )),
        }
    }
}

/// What to prepare a device for. Default: `Auto` mode, a single queue,
/// 4096-byte frames, apply.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct TuneOptions {
    /// `Skb` or `Drv`; `Auto` lets [`prepare`](super::prepare) decide (native where the driver
    /// has it and its checks pass, else generic). [`Tuning::mode`](super::Tuning::mode) tells.
    pub mode: AttachMode,
    /// Which queues get a socket: `Single` makes the device deliver
    /// everything to queue 0 (e.g. virtio_net down to one combined channel).
    pub queues: QueueLayout,
    /// UMEM frame (chunk) size, e.g. 4096. With UMEM headroom
    /// (`xdp_umem_reg.headroom`), pass the chunk size minus that headroom.
    pub frame_size: u32,
    /// `false`: change nothing, report what would change.
    pub apply: bool,
}

/// Builders: each sets one field and gives the config back, so a caller outside this
/// crate (where the struct is `#[non_exhaustive]`) writes `TuneOptions::default().with_apply(false)`.
impl TuneOptions {
    /// With `mode` set to `v`.
    pub fn with_mode(mut self, v: AttachMode) -> Self {
        self.mode = v;
        self
    }

    /// With `queues` set to `v`.
    pub fn with_queues(mut self, v: QueueLayout) -> Self {
        self.queues = v;
        self
    }

    /// With `frame_size` set to `v`.
    pub fn with_frame_size(mut self, v: u32) -> Self {
        self.frame_size = v;
        self
    }

    /// With `apply` set to `v`.
    pub fn with_apply(mut self, v: bool) -> Self {
        self.apply = v;
        self
    }
}

impl Default for TuneOptions {
    fn default() -> Self {
        TuneOptions {
            mode: AttachMode::Auto,
            queues: QueueLayout::Single,
            frame_size: 4096,
            apply: true,
        }
    }
}
