// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// xsk_steer: the XDP steering program of xsk-io.
//
// Decides, frame by frame, whether a received frame belongs to the userspace
// stack (redirect into the AF_XDP socket of the receiving queue) or to the
// kernel (XDP_PASS). Anything it does not positively recognise goes to the
// kernel, and a steer decision for a queue without a registered socket also
// falls back to the kernel: the program never drops, except SYNs shed under
// overload (below, counted; off unless the port turns it on); a deferred
// ACK is delivered through its ring instead.
//
// Userspace (src/steer.rs) owns the maps:
//   xsks_map   rx queue index -> AF_XDP socket
//   tcp_ports  TCP destination port (host order) -> 1 = steer
//   cfg        [0] = { addr, flags, port_lo, port_hi }, see struct steer_cfg:
//              the ports port_lo..=port_hi are steered without a tcp_ports
//              entry (a dedicated address's ephemeral range: one config
//              write instead of 20,000 map updates)
//   counters   per-CPU u64: STEERED, PASSED, NO_SOCKET, DEFERRED, SHED_RX,
//              SHED_FILL (disjoint: every frame is counted exactly once)
//
// Built twice (build.rs): plain, and with -DDEFER_ACKS, which adds deferred
// ACKs. Userspace loads the second and falls back to the first on kernels
// that cannot load it (ring buffers in map-in-map, mmapable arrays).
//   ack_state  per queue { wait, active, steered }, mmapped by userspace: `wait` is 1
//              while the queue's consumer sleeps and takes pure ACKs from its
//              ack ring; `steered` counts frames redirected into the queue's
//              socket (only that queue's NAPI context writes it)
//   ack_rings  rx queue index -> BPF ring buffer
// A pure ACK (ACK flag only, no payload) for a steered port, arriving while
// its queue's consumer sleeps with `wait` set, is copied into the queue's
// ack ring without a wake-up (BPF_RB_NO_WAKEUP) instead of being redirected:
// kernel TCP takes such ACKs in softirq without waking the application, and
// a delayed ACK after every response must not cost the stack a second
// wake-up per request. Each record carries `steered` at that moment, so the
// consumer can take it right after the frames that arrived before it, and its
// arrival time. A full ring or a frame too long for a record is redirected
// as usual.
//
// SYN shedding (same build, same per-queue slot): the one place this program
// drops a frame on purpose. While `shed_on` is set the program counts the
// frames it redirects into the queue's socket (`steered`), and the port
// writes `shed` after every receive batch: the low 32 bits are `steered` as
// it read it, bits 32-61 the number of frames that may still arrive, bits
// 62-63 what set that budget (the reason a SYN beyond it is counted under):
// SHED_RX, SHED_FILL: only a kept reserve of places is left (free RX ring
// slots, frames in the fill ring, whichever is fewer); SHED_STANDING: the
// RX ring has not been empty for a while (the stack is behind, not taking a
// burst) and the frames waiting reached a small limit. A pure SYN (SYN
// without ACK or RST) to a steered port that arrives once the budget is used
// up is dropped and counted: the places, and the stack's time, go to the
// frames of connections already open; a new connection's client retries its
// SYN. A stack that keeps up never exhausts the budget (see src/shed.rs).
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
	CNT_DEFERRED = 3,  /* a pure ACK copied into the queue's ack ring */
	CNT_SHED_RX = 4,   /* a SYN shed: the queue's RX ring budget was used up */
	CNT_SHED_FILL = 5, /* a SYN shed: the queue's fill ring budget was used up */
	CNT_SHED_STANDING = 6, /* a SYN shed: a standing queue reached its limit */
	CNT_MAX,
};

struct steer_cfg {
	__be32 addr;    /* our IPv4 address, network order; 0 = any address */
	__u32 flags;    /* STEER_* */
	__u16 port_lo;  /* TCP ports port_lo..=port_hi (host order) are steered; */
	__u16 port_hi;  /* port_hi == 0: no range */
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

#ifdef DEFER_ACKS
/* Keep in sync with src/acks.rs. */
struct ack_slot {
	__u32 wait;    /* written by userspace */
	__u32 active;  /* written by userspace: a ring is set up, count frames */
	__u64 steered; /* written here (atomically: in skb mode, RPS can run
			* one queue's frames on several CPUs) */
	__u32 shed_on; /* written by userspace: shed SYNs, count frames */
	__u32 pad;
	__u64 shed;    /* written by userspace (one 64-bit store): see the top */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XSKS_MAX_QUEUES);
	__uint(map_flags, BPF_F_MMAPABLE);
	__type(key, __u32);
	__type(value, struct ack_slot);
} ack_state SEC(".maps");

#define SHED_BUDGET_MASK 0x3fffffffu

/*
 * True if a pure SYN arriving on this queue now is to be shed: the budget
 * the port left at its last receive batch is used up. Counts the reason.
 */
static __always_inline int shed_syn(__u32 q)
{
	struct ack_slot *slot = bpf_map_lookup_elem(&ack_state, &q);
	__u64 w;
	__u32 hi;

	if (!slot || !slot->shed_on)
		return 0;
	w = slot->shed;
	hi = (__u32)(w >> 32);
	if ((__u32)slot->steered - (__u32)w < (hi & SHED_BUDGET_MASK))
		return 0;
	count(CNT_SHED_RX + (hi >> 30)); /* reason 0..2; 3 is not written */
	return 1;
}

struct ack_ring {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 64 * 1024);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, XSKS_MAX_QUEUES);
	__type(key, __u32);
	__array(values, struct ack_ring);
} ack_rings SEC(".maps");

/* Longest frame a record holds: Ethernet + IPv4 and TCP with full options. */
#define ACK_WORDS 17 /* 136 bytes */

/* Keep in sync with src/acks.rs. */
struct ack_rec {
	__u64 seq;     /* ack_slot.steered when the ACK arrived */
	__u64 arrived; /* bpf_ktime_get_ns() (CLOCK_MONOTONIC): the ACK's RTT
			* sample must not include the time it waited */
	__u32 len;     /* frame bytes in data */
	__u32 pad;
	__u64 data[ACK_WORDS];
};

/*
 * Copies a pure ACK into the queue's ack ring if its consumer sleeps with
 * `wait` set. True if it did (the frame is then dropped here: it is
 * delivered through the ring).
 */
static __always_inline int defer_ack(struct xdp_md *ctx, struct ack_slot *slot)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 q = ctx->rx_queue_index;
	struct ack_rec *rec;
	void *ring;
	__u32 i;

	if (!slot->wait)
		return 0;
	if (data + sizeof(rec->data) < data_end)
		return 0; /* too long for a record */
	ring = bpf_map_lookup_elem(&ack_rings, &q);
	if (!ring)
		return 0;
	rec = bpf_ringbuf_reserve(ring, sizeof(*rec), 0);
	if (!rec)
		return 0; /* ring full: redirect as usual */
	rec->seq = slot->steered;
	rec->arrived = bpf_ktime_get_ns();
	rec->len = (__u32)(data_end - data);
	rec->pad = 0;
	/* Whole words while they fit, then the tail byte by byte. */
#pragma unroll
	for (i = 0; i < ACK_WORDS; i++) {
		__u64 *src = data + i * 8;

		if ((void *)(src + 1) > data_end)
			break;
		rec->data[i] = *src;
	}
	if (i < ACK_WORDS) {
		__u8 *dst = (__u8 *)&rec->data[i];
		__u8 *src = data + i * 8;
		__u32 k;

		rec->data[i] = 0;
#pragma unroll
		for (k = 0; k < 7; k++) {
			if ((void *)(src + k + 1) > data_end)
				break;
			dst[k] = src[k];
		}
	}
	bpf_ringbuf_submit(rec, BPF_RB_NO_WAKEUP);
	count(CNT_DEFERRED);
	return 1;
}
#endif

static __always_inline int steer(struct xdp_md *ctx)
{
	/* Default action XDP_PASS: a queue without a socket falls back to the kernel. */
	long act = bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);

	count(act == XDP_REDIRECT ? CNT_STEERED : CNT_NO_SOCKET);
#ifdef DEFER_ACKS
	if (act == XDP_REDIRECT) {
		__u32 q = ctx->rx_queue_index;
		struct ack_slot *slot = bpf_map_lookup_elem(&ack_state, &q);

		/* Only for a queue with an ack ring: an atomic add per frame is
		 * not free, and nobody reads the count otherwise. */
		if (slot && (slot->active || slot->shed_on))
			__sync_fetch_and_add(&slot->steered, 1);
	}
#endif
	return (int)act;
}

/* A TCP segment with the ACK flag alone and no payload. */
static __always_inline int pure_ack(struct iphdr *ip, struct tcphdr *tcp, __u32 ihl_bytes)
{
	__u32 tot = bpf_ntohs(ip->tot_len);
	__u32 hdrs = ihl_bytes + (__u32)tcp->doff * 4;

	return tcp->ack && !tcp->syn && !tcp->fin && !tcp->rst && !tcp->urg &&
	       !tcp->psh && tcp->doff >= 5 && tot == hdrs;
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
	__u32 port_lo, port_hi;

	if ((void *)(eth + 1) > data_end)
		return pass();

	c = bpf_map_lookup_elem(&cfg, &zero);
	if (!c)
		return pass();
	addr = c->addr;
	flags = c->flags;
	port_lo = c->port_lo;
	port_hi = c->port_hi;

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
		if (!(port_hi != 0 && port >= port_lo && port <= port_hi)) {
			want = bpf_map_lookup_elem(&tcp_ports, &port);
			if (!want || *want != 1)
				return pass();
		}
#ifdef DEFER_ACKS
		if (tcp->syn && !tcp->ack && !tcp->rst && shed_syn(ctx->rx_queue_index))
			return XDP_DROP;
		if (pure_ack(ip, tcp, ihl_bytes)) {
			__u32 q = ctx->rx_queue_index;
			struct ack_slot *slot = bpf_map_lookup_elem(&ack_state, &q);

			if (slot && defer_ack(ctx, slot))
				return XDP_DROP;
		}
#endif
		return steer(ctx);
	}

	if (ip->protocol == IPPROTO_ICMP && (flags & STEER_ICMP))
		return steer(ctx);

	return pass();
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
