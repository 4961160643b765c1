//! The kernel's size limits the checks compare against: what a copy-mode
//! socket, native XDP on virtio_net and native XDP on veth accept.

use xsk_io::sys::XDP_PACKET_HEADROOM;

pub const ETH_HLEN: u32 = 14;
pub const VLAN_HLEN: u32 = 4;
/// `SKB_DATA_ALIGN(sizeof(struct skb_shared_info))` on x86_64 with the
/// default `MAX_SKB_FRAGS` = 17 (48 + 17 * 16 bytes). Checked on 6.18: a veth
/// peer's `maxmtu` becomes 3506 = 4096 - 256 - 320 - 14 once XDP is attached.
pub const SKB_SHARED_INFO: u32 = 320;
const SMP_CACHE_BYTES: u32 = 64;

const fn skb_data_align(x: u32) -> u32 {
    (x + SMP_CACHE_BYTES - 1) & !(SMP_CACHE_BYTES - 1)
}

/// Largest frame a copy-mode socket accepts: `xsk_rcv_check` drops (and counts
/// in `rx_dropped`) any frame longer than chunk size minus `XDP_PACKET_HEADROOM`
/// minus the UMEM headroom, unless the socket was bound with `XDP_USE_SG`.
pub fn xsk_max_frame(frame_size: u32, umem_headroom: u32) -> u32 {
    frame_size.saturating_sub(XDP_PACKET_HEADROOM + umem_headroom)
}

/// Largest MTU `virtio_net` accepts for a single-buffer (non-frags) XDP
/// program: `max_sz = PAGE_SIZE - SKB_DATA_ALIGN(VIRTIO_XDP_HEADROOM +
/// sizeof(struct skb_shared_info)) - ETH_HLEN` in `virtnet_xdp_set` (3506 on x86_64).
pub fn virtio_xdp_max_mtu(page_size: u32) -> u32 {
    page_size.saturating_sub(skb_data_align(XDP_PACKET_HEADROOM + SKB_SHARED_INFO) + ETH_HLEN)
}

/// The virtio-net header in front of every received frame (`struct
/// virtio_net_hdr_mrg_rxbuf`, 12 bytes with VERSION_1 or MRG_RXBUF).
const VIRTIO_NET_HDR_LEN: u32 = 12;

/// Largest MTU that native XDP on `virtio_net` actually *delivers*: a frame
/// that spans two mergeable buffers is copied into one page together with its
/// virtio-net header (`xdp_linearize_page`), so 12 bytes fewer than the limit
/// `virtnet_xdp_set` enforces. Above it (3495..=3506 on x86_64) attach works
/// and small packets flow, but full-size frames vanish without a counter:
/// found by vm-tests (6.1 and 7.2 guests), so the port refuses it.
pub fn virtio_xdp_usable_mtu(page_size: u32) -> u32 {
    virtio_xdp_max_mtu(page_size).saturating_sub(VIRTIO_NET_HDR_LEN)
}

/// Largest peer MTU `veth` accepts for a single-buffer XDP program:
/// `SKB_WITH_OVERHEAD(PAGE_SIZE - VETH_XDP_HEADROOM) - peer->hard_header_len`
/// in `veth_xdp_set` (VETH_XDP_HEADROOM = 256 + NET_IP_ALIGN, 0 on x86) = 3506.
pub fn veth_xdp_max_peer_mtu(page_size: u32) -> u32 {
    page_size.saturating_sub(XDP_PACKET_HEADROOM + SKB_SHARED_INFO + ETH_HLEN)
}

/// Drivers with a native XDP implementation this module knows how to prepare.
pub fn has_native_xdp(driver: &str) -> bool {
    matches!(driver, "virtio_net" | "veth")
}
