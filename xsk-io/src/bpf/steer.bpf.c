// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// xsk_steer: the XDP steering program of xsk-io.
//
// Decides, frame by frame, whether a received frame belongs to the userspace
// stack (redirect into the AF_XDP socket of the receiving queue) or to the
// kernel (XDP_PASS). Anything it does not positively recognise goes to the
// kernel, and a steer decision for a queue without a registered socket also
// falls back to the kernel: the program never drops.
//
// Userspace (src/steer.rs) owns the maps:
//   xsks_map   rx queue index -> AF_XDP socket
//   tcp_ports  TCP destination port (host order) -> 1 = steer
//   cfg        [0] = { addr, flags }, see struct steer_cfg
//   counters   per-CPU u64: STEERED, PASSED, NO_SOCKET (disjoint: every
//              frame is counted exactly once)
//
// Deliberately NOT vmlinux.h/CO-RE: only uapi headers, so it builds anywhere.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <linux/tcp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* Keep in sync with src/steer.rs. */
#define XSKS_MAX_QUEUES 64

#define STEER_ARP  (1u << 0) /* steer ARP whose target protocol address == addr */
#define STEER_ICMP (1u << 1) /* steer ICMP (and non-first fragments) to addr: dedicated address */

enum {
	CNT_STEERED = 0,   /* redirected into an AF_XDP socket */
	CNT_PASSED = 1,    /* not ours: handed to the kernel */
	CNT_NO_SOCKET = 2, /* ours, but no socket on this queue: handed to the kernel */
	CNT_MAX,
};

struct steer_cfg {
	__be32 addr;  /* our IPv4 address, network order; 0 = any address */
	__u32 flags;  /* STEER_* */
};

/* ARP for Ethernet/IPv4, as it sits on the wire after struct ethhdr. */
struct arp_eth_ipv4 {
	__be16 htype;
	__be16 ptype;
	__u8 hlen;
	__u8 plen;
	__be16 oper;
	__u8 sha[ETH_ALEN];
	__u8 spa[4];
	__u8 tha[ETH_ALEN];
	__u8 tpa[4];
} __attribute__((packed));

#define ETH_P_ARP_BE  bpf_htons(ETH_P_ARP)
#define ETH_P_IP_BE   bpf_htons(ETH_P_IP)
#define IP_FRAG_OFFSET_MASK 0x1fff

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	__uint(max_entries, XSKS_MAX_QUEUES);
	__type(key, __u32);
	__type(value, __u32);
} xsks_map SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 65536);
	__type(key, __u32);
	__type(value, __u8);
} tcp_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct steer_cfg);
} cfg SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, CNT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &idx);

	if (v)
		*v += 1; /* per-CPU slot, XDP runs with preemption off */
}

static __always_inline int pass(void)
{
	count(CNT_PASSED);
	return XDP_PASS;
}

static __always_inline int steer(struct xdp_md *ctx)
{
	/* Default action XDP_PASS: a queue without a socket falls back to the kernel. */
	long act = bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);

	count(act == XDP_REDIRECT ? CNT_STEERED : CNT_NO_SOCKET);
	return (int)act;
}

SEC("xdp")
int xsk_steer(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct steer_cfg *c;
	__u32 zero = 0;
	__u32 flags;
	__be32 addr;

	if ((void *)(eth + 1) > data_end)
		return pass();

	c = bpf_map_lookup_elem(&cfg, &zero);
	if (!c)
		return pass();
	addr = c->addr;
	flags = c->flags;

	/*
	 * VLAN-tagged frames (802.1Q / 802.1ad) are not ours: the userspace
	 * stack does not speak VLAN, so they go to the kernel untouched.
	 */
	if (eth->h_proto == ETH_P_ARP_BE) {
		struct arp_eth_ipv4 *arp = (void *)(eth + 1);

		if (!(flags & STEER_ARP) || addr == 0)
			return pass();
		if ((void *)(arp + 1) > data_end)
			return pass();
		if (arp->htype != bpf_htons(1) || arp->ptype != ETH_P_IP_BE ||
		    arp->hlen != ETH_ALEN || arp->plen != 4)
			return pass();
		if (__builtin_memcmp(arp->tpa, &addr, 4) != 0)
			return pass();
		return steer(ctx);
	}

	if (eth->h_proto != ETH_P_IP_BE)
		return pass();

	struct iphdr *ip = (void *)(eth + 1);
	__u32 ihl_bytes;

	if ((void *)(ip + 1) > data_end)
		return pass();
	if (ip->version != 4 || ip->ihl < 5)
		return pass();
	if (addr != 0 && ip->daddr != addr)
		return pass();
	ihl_bytes = (__u32)ip->ihl * 4; /* 20..60 */
	if ((void *)ip + ihl_bytes > data_end)
		return pass();

	if (ip->protocol != IPPROTO_TCP && ip->protocol != IPPROTO_ICMP)
		return pass();

	if (ip->frag_off & bpf_htons(IP_FRAG_OFFSET_MASK)) {
		/*
		 * Non-first fragment of TCP/ICMP: there is no L4 header to look
		 * at. On a dedicated address (STEER_ICMP) the stack owns all of
		 * TCP and ICMP; on a shared one we cannot tell, so the kernel
		 * gets it.
		 */
		if (flags & STEER_ICMP)
			return steer(ctx);
		return pass();
	}

	if (ip->protocol == IPPROTO_TCP) {
		struct tcphdr *tcp = (void *)ip + ihl_bytes;
		__u32 port;
		__u8 *want;

		if ((void *)(tcp + 1) > data_end)
			return pass();
		port = bpf_ntohs(tcp->dest);
		want = bpf_map_lookup_elem(&tcp_ports, &port);
		if (want && *want == 1)
			return steer(ctx);
		return pass();
	}

	if (ip->protocol == IPPROTO_ICMP && (flags & STEER_ICMP))
		return steer(ctx);

	return pass();
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
