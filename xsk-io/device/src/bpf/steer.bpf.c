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
//   tcp_ports  TCP destination port (host order) -> bit 0 = steer, bit 1 = a
//              listening port (SYN cookies may answer its SYNs, below)
//   cfg        [0] = { addr, flags, port_lo, port_hi, v6, addr6 }, see struct
//              steer_cfg: the ports port_lo..=port_hi are steered without a
//              tcp_ports entry (a dedicated address's ephemeral range: one
//              config write instead of 20,000 map updates)
//
// IPv6 (when `v6` is set): TCP whose next header follows the fixed header
// directly, to `addr6` (all zero: any address) and a steered port, as for
// IPv4, shedding included; the rest (ICMPv6 and neighbour discovery,
// extension headers, fragments, other ports) goes to the kernel, unless the
// address is dedicated (STEER_ICMP): then everything to `addr6`, and ICMPv6
// to its solicited-node group (neighbour solicitations), is the stack's. On a
// shared address, an ICMPv6 Packet Too Big (an ICMP Fragmentation Needed for
// IPv4) that quotes TCP from a steered port is the stack's too: path MTU
// discovery for its connections.
// SYN cookies and pure ACKs as for IPv4 (the cookie SYN-ACK in an IPv6
// header, to a SYN for the stack's own IPv6 address).
//   counters   per-CPU u64: STEERED, PASSED, NO_SOCKET, DEFERRED, SHED_RX,
//              SHED_FILL, SHED_STANDING, COOKIE (disjoint: every frame is
//              counted exactly once)
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
// SYN cookies (same build, same per-queue slot): while the queue's consumer
// sets `cookies_on`, a pure SYN to a listening port is answered here with a
// SYN-ACK whose sequence number is the stack's own SYN cookie (the engine's
// `cookies.rs`: SipHash-2-4 of the 4-tuple, the peer's ISN, a 64-second
// counter and the encoded MSS index, SACK and window scale; the key, the
// engine's clock origin and what the SYN-ACK says in `syn_cookies[queue]`),
// sent back with XDP_TX and counted (COOKIE, and `cookies_sent` in the
// slot). Byte for byte the SYN-ACK the engine would send (a root test runs
// both on the same SYN). The SYN never takes a frame of the fill ring nor
// the stack's time; the ACK that completes the handshake reaches the
// stack, which checks the cookie. A SYN this code cannot answer exactly as
// the engine would (IP options, options running past the frame, a frame
// that cannot be resized) goes on to the stack as before.
//
// Deliberately NOT vmlinux.h/CO-RE: only uapi headers, so it builds anywhere.

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/in.h>
#include <linux/in6.h>
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
	CNT_COOKIE = 7,    /* a SYN answered here with a SYN cookie (XDP_TX) */
	CNT_MAX,
};

struct steer_cfg {
	__be32 addr;    /* our IPv4 address, network order; 0 = any address */
	__u32 flags;    /* STEER_* */
	__u16 port_lo;  /* TCP ports port_lo..=port_hi (host order) are steered; */
	__u16 port_hi;  /* port_hi == 0: no range */
	__u32 v6;       /* 1: steer IPv6 too */
	__u8 addr6[16]; /* our IPv6 address; all zero = any address */
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
#define ETH_P_IPV6_BE bpf_htons(ETH_P_IPV6)
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

static __always_inline int addr6_zero(const __u8 *a)
{
	__u64 w0, w1;

	__builtin_memcpy(&w0, a, 8);
	__builtin_memcpy(&w1, a + 8, 8);
	return (w0 | w1) == 0;
}

static __always_inline int addr6_eq(const __u8 *a, const __u8 *b)
{
	__u64 a0, a1, b0, b1;

	__builtin_memcpy(&a0, a, 8);
	__builtin_memcpy(&a1, a + 8, 8);
	__builtin_memcpy(&b0, b, 8);
	__builtin_memcpy(&b1, b + 8, 8);
	return a0 == b0 && a1 == b1;
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
	__u32 cookies_on;   /* written by userspace: answer SYNs with cookies */
	__u32 pad2;
	__u64 cookies_sent; /* written here (atomically): SYN-ACKs sent */
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

/* Keep in sync with src/cookies.rs. */
struct cookie_cfg {
	__u64 k0;       /* SipHash key */
	__u64 k1;
	__u64 epoch_ns; /* CLOCK_MONOTONIC ns at the engine's time 0 */
	__u16 mss;      /* our MSS; 0 = not set up: leave SYNs to the stack */
	__u16 window;   /* the SYN-ACK's window (unscaled) */
	__u8 wshift;    /* our window scale, sent when the peer offers one */
	__u8 accept_partial; /* a TCP checksum left partial by the sender is fine */
	__u8 prefix_len;     /* of our subnet */
	__u8 pad0;
	__be32 addr;    /* ours */
	__u8 mac[ETH_ALEN]; /* ours */
	__u8 pad[6];
	__u8 addr6[16]; /* our IPv6 address; all zero: leave IPv6 SYNs to the stack */
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, XSKS_MAX_QUEUES);
	__type(key, __u32);
	__type(value, struct cookie_cfg);
} syn_cookies SEC(".maps");

#define ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                        \
	do {                                                            \
		v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32); \
		v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;                  \
		v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;                  \
		v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32); \
	} while (0)
#define SIPWORD(m)                       \
	do {                             \
		v3 ^= (m);               \
		SIPROUND;                \
		SIPROUND;                \
		v0 ^= (m);               \
	} while (0)

/*
 * SipHash-2-4 of the 28-byte message the engine's CookieJar::hash writes:
 * src, dst (u32), sport, dport (u16), peer ISN (u32), counter (u64), low
 * (u32), each little-endian, as the siphasher crate's write_u* do.
 */
static __always_inline __u64 cookie_hash(const struct cookie_cfg *cc, __u32 src, __u32 dst, __u16 sport,
					 __u16 dport, __u32 isn, __u64 counter, __u32 low)
{
	__u64 v0 = cc->k0 ^ 0x736f6d6570736575ULL;
	__u64 v1 = cc->k1 ^ 0x646f72616e646f6dULL;
	__u64 v2 = cc->k0 ^ 0x6c7967656e657261ULL;
	__u64 v3 = cc->k1 ^ 0x7465646279746573ULL;

	SIPWORD((__u64)src | (__u64)dst << 32);
	SIPWORD((__u64)sport | (__u64)dport << 16 | (__u64)isn << 32);
	SIPWORD(counter);
	SIPWORD((__u64)low | 28ULL << 56); /* the tail and the length */
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

static __always_inline __u16 csum_fold(__u64 sum)
{
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)sum;
}

/* 16-bit words of a TCP header, summed in a bpf_loop callback. */
struct sum_ctx {
	void *p;
	void *data_end;
	__u32 len;  /* bytes, even */
	__u32 i;
	__u64 sum;
	__u32 bail;
};

static long sum_word(__u32 index, void *arg)
{
	struct sum_ctx *c = arg;
	__u32 i = c->i;
	__u8 *w;

	if (i >= c->len || i >= 60)
		return 1;
	w = c->p + i;
	if ((void *)(w + 2) > c->data_end) {
		c->bail = 1;
		return 1;
	}
	c->sum += (__u32)w[0] << 8 | w[1];
	c->i = i + 2;
	return 0;
}

/*
 * The checks of the engine's demux::inspect that a SYN must pass before the
 * engine answers it, for a pure SYN without IP options or payload: our MAC
 * and address, a source that can send (unicast MAC, no reserved address),
 * no fragment, ports, both checksums (the TCP one may be partial where the
 * engine accepts that). 1 if it passes.
 */
static __always_inline int syn_checks(const struct cookie_cfg *cc, struct ethhdr *eth, struct iphdr *ip,
				      struct tcphdr *tcp, void *data, void *data_end)
{
	__u32 src = bpf_ntohl(ip->saddr), ours = bpf_ntohl(cc->addr);
	__u32 mask = cc->prefix_len == 0 ? 0 : 0xffffffffu << (32 - (cc->prefix_len > 32 ? 32 : cc->prefix_len));
	__u32 dst = bpf_ntohl(ip->daddr), tcplen = (__u32)tcp->doff * 4;
	__u16 *ipw = (void *)ip, field, pseudo;
	struct sum_ctx sc = {};
	__u64 sum = 0;
	int k;

	if ((eth->h_source[0] & 1) || !(eth->h_source[0] | eth->h_source[1] | eth->h_source[2] |
					eth->h_source[3] | eth->h_source[4] | eth->h_source[5]))
		return 0;
	if ((eth->h_dest[0] ^ cc->mac[0]) | (eth->h_dest[1] ^ cc->mac[1]) | (eth->h_dest[2] ^ cc->mac[2]) |
	    (eth->h_dest[3] ^ cc->mac[3]) | (eth->h_dest[4] ^ cc->mac[4]) | (eth->h_dest[5] ^ cc->mac[5]))
		return 0;
	/* No payload: tot_len is the headers, inside the frame (Ethernet may pad). */
	if (bpf_ntohs(ip->tot_len) != 20 + tcplen || (void *)ip + 20 + tcplen > data_end)
		return 0;
#pragma unroll
	for (k = 0; k < 10; k++)
		sum += bpf_ntohs(ipw[k]);
	if (csum_fold(sum) != 0xffff)
		return 0;
	if (ip->daddr != cc->addr)
		return 0;
	if (src == 0 || src == 0xffffffffu || (src >> 28) == 0xe || (src >> 24) == 127 || (src >> 24) >= 240 ||
	    src == ours || (cc->prefix_len < 31 && src == ((ours & mask) | ~mask)))
		return 0;
	if (ip->frag_off & bpf_htons(0x3fff))
		return 0;
	if (tcp->source == 0 || tcp->dest == 0)
		return 0;
	sc.p = tcp;
	sc.data_end = data_end;
	sc.len = tcplen;
	bpf_loop(30, sum_word, &sc, 0);
	if (sc.bail || sc.i != tcplen)
		return 0;
	sum = (src >> 16) + (src & 0xffff) + (dst >> 16) + (dst & 0xffff) + IPPROTO_TCP + tcplen;
	pseudo = csum_fold(sum);
	if (csum_fold(sum + sc.sum) == 0xffff)
		return 1;
	if (!cc->accept_partial)
		return 0;
	/* What a sender with checksum offload leaves: the pseudo-header sum (either zero). */
	field = bpf_ntohs(tcp->check);
	return field == pseudo || (pseudo == 0xffff && field == 0) || (pseudo == 0 && field == 0xffff);
}

/* Option bytes a SYN may carry (TCP's limit): as many steps read them all. */
#define TCP_OPT_MAX 40

enum { OPT_READING, OPT_DONE, OPT_BAIL };

struct opt_ctx {
	void *opt;      /* the SYN's first option byte */
	void *data_end;
	__u32 optlen;   /* option bytes, all inside the frame */
	__u32 i;        /* the next option's offset */
	__u32 mss;      /* 0: none */
	__u32 sack;
	__u32 ws;       /* window scale + 1, at most 15; 0: none */
	__u32 state;
};

/*
 * One option of a SYN, as the engine's cookies::segment reads it, to the
 * byte: an end-of-list, a truncated or malformed option ends the list;
 * repeated options, the last one counts. Returns 1 to stop the loop.
 */
static long read_option(__u32 index, void *arg)
{
	struct opt_ctx *c = arg;
	__u32 i = c->i, len;
	__u8 *p;

	if (i >= c->optlen || i >= TCP_OPT_MAX) {
		c->state = OPT_DONE;
		return 1;
	}
	p = c->opt + i;
	if ((void *)(p + 1) > c->data_end)
		goto bail;
	if (p[0] == 0) {
		c->state = OPT_DONE;
		return 1;
	}
	if (p[0] == 1) {
		c->i = i + 1;
		return 0;
	}
	if (i + 1 >= c->optlen) {
		c->state = OPT_DONE;
		return 1;
	}
	if ((void *)(p + 2) > c->data_end)
		goto bail;
	len = p[1];
	if (len < 2 || i + len > c->optlen) {
		c->state = OPT_DONE;
		return 1;
	}
	if (p[0] == 2 && len == 4) {
		if ((void *)(p + 4) > c->data_end)
			goto bail;
		c->mss = (__u32)p[2] << 8 | p[3];
	} else if (p[0] == 3 && len == 3) {
		if ((void *)(p + 3) > c->data_end)
			goto bail;
		c->ws = (p[2] < 14 ? p[2] : 14) + 1;
	} else if (p[0] == 4 && len == 2) {
		c->sack = 1;
	}
	c->i = i + len;
	return 0;
bail:
	c->state = OPT_BAIL; /* cannot happen: the options are inside the frame */
	return 1;
}

/*
 * The options of a SYN that passed syn_checks (its TCP header whole in the
 * frame), as the engine's cookies::segment reads them: read in a bpf_loop
 * callback, which the verifier checks once (as a plain loop, every option's
 * outcome multiplied its states). 1 if read.
 */
static __always_inline int syn_options(struct tcphdr *tcp, void *data_end, struct opt_ctx *oc)
{
	__u8 *opt = (void *)(tcp + 1);
	__u32 optlen = (__u32)tcp->doff * 4;

	if (optlen < 20)
		return 0;
	optlen -= 20;
	if ((void *)opt + optlen > data_end)
		return 0; /* the engine reads no such SYN: neither do we */
	oc->opt = opt;
	oc->data_end = data_end;
	oc->optlen = optlen;
	bpf_loop(TCP_OPT_MAX + 1, read_option, oc, 0);
	return oc->state == OPT_DONE;
}

/*
 * The cookie's counter (64-second periods since the engine's clock origin)
 * and its low bits (MSS index, SACK, window scale, counter), as the engine's
 * cookies.rs makes them. 0 before the origin.
 */
static __always_inline int cookie_low(const struct cookie_cfg *cc, const struct opt_ctx *oc, __u64 *counter,
				      __u32 *low)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 idx;

	if (now < cc->epoch_ns)
		return 0;
	*counter = (now - cc->epoch_ns) / (64ULL * 1000000000ULL);
	idx = oc->mss >= 1460 ? 3 : oc->mss >= 1440 ? 2 : oc->mss >= 1300 ? 1 : 0;
	*low = idx | oc->sack << 2 | oc->ws << 3 | ((__u32)*counter & 3) << 7;
	return 1;
}

/*
 * The SYN-ACK's TCP header and options over the SYN's (ports swapped), and its
 * checksum from `sum`, the pseudo-header's addresses summed in 16-bit words.
 * `tcp` lies in a frame of the answer's length, its first option's 4 bytes
 * checked; the caller made it. 1 (the answer counted), or -1 if the frame is
 * shorter than the options (cannot happen).
 */
static __always_inline int write_synack(struct ack_slot *slot, const struct cookie_cfg *cc, struct tcphdr *tcp,
					void *data_end, __be16 psrc, __be16 pdst, __u32 cookie, __u32 isn,
					__u32 tcplen, __u32 mss, __u32 sack, __u32 ws, __u64 sum)
{
	__u8 *opt = (void *)(tcp + 1);
	__u16 sport = bpf_ntohs(psrc), dport = bpf_ntohs(pdst);

	if ((void *)(opt + 4) > data_end)
		return -1;
	tcp->source = pdst;
	tcp->dest = psrc;
	tcp->seq = bpf_htonl(cookie);
	tcp->ack_seq = bpf_htonl(isn + 1);
	((__u8 *)tcp)[12] = (__u8)(tcplen / 4) << 4;
	((__u8 *)tcp)[13] = 0x12; /* SYN, ACK */
	tcp->window = bpf_htons(cc->window);
	tcp->check = 0;
	tcp->urg_ptr = 0;
	opt[0] = 2;
	opt[1] = 4;
	opt[2] = mss >> 8;
	opt[3] = mss & 0xff;
	sum += IPPROTO_TCP + tcplen + dport + sport + (cookie >> 16) + (cookie & 0xffff) + ((isn + 1) >> 16) +
	       ((isn + 1) & 0xffff) + ((tcplen / 4) << 12 | 0x12) + cc->window + 0x0204 + mss;
	if (sack) {
		if ((void *)(opt + 8) > data_end)
			return -1;
		opt[4] = 1;
		opt[5] = 1;
		opt[6] = 4;
		opt[7] = 2;
		sum += 0x0101 + 0x0402;
		opt += 4;
	}
	if (ws) {
		if ((void *)(opt + 8) > data_end)
			return -1;
		opt[4] = 1;
		opt[5] = 3;
		opt[6] = 3;
		opt[7] = cc->wshift;
		sum += 0x0103 + (0x0300 | cc->wshift);
	}
	tcp->check = bpf_htons(~csum_fold(sum) & 0xffff);

	__sync_fetch_and_add(&slot->cookies_sent, 1);
	count(CNT_COOKIE);
	return 1;
}

/*
 * Answers the pure SYN in `ctx` (to a listening port) with a cookie SYN-ACK
 * in place: 1 if it did (the caller returns XDP_TX), 0 if it left the frame
 * untouched for the stack, 2 if it left the frame untouched because it could
 * not resize it (the caller steers it on: its packet pointers are stale),
 * -1 if the resized frame turned out too short (cannot happen; the caller
 * drops it: its headers are gone).
 */
static __always_inline int answer_syn(struct xdp_md *ctx, struct ack_slot *slot)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 q = ctx->rx_queue_index;
	struct cookie_cfg *cc = bpf_map_lookup_elem(&syn_cookies, &q);
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	struct tcphdr *tcp = (void *)(ip + 1);
	__u8 mac_src[ETH_ALEN], mac_dst[ETH_ALEN];
	struct opt_ctx oc = {};
	__u32 src, dst, isn, low, cookie, tcplen, ipsum;
	__be32 saddr, daddr;
	__be16 psrc, pdst;
	__u64 counter;
	int delta;

	if (!cc || cc->mss == 0)
		return 0;
	if ((void *)(tcp + 1) > data_end || ip->ihl != 5)
		return 0;
	if (!syn_checks(cc, eth, ip, tcp, data, data_end))
		return 0; /* the stack drops it, counted by reason */
	if (!syn_options(tcp, data_end, &oc) || !cookie_low(cc, &oc, &counter, &low))
		return 0;
	src = bpf_ntohl(ip->saddr);
	dst = bpf_ntohl(ip->daddr);
	isn = bpf_ntohl(tcp->seq);
	cookie = (__u32)(cookie_hash(cc, src, dst, bpf_ntohs(tcp->source), bpf_ntohs(tcp->dest), isn, counter,
				     low) >> 41) << 9 | low;

	/* Everything the answer needs, before the frame is resized. */
	__builtin_memcpy(mac_src, eth->h_source, ETH_ALEN);
	__builtin_memcpy(mac_dst, eth->h_dest, ETH_ALEN);
	saddr = ip->saddr;
	daddr = ip->daddr;
	psrc = tcp->source;
	pdst = tcp->dest;
	tcplen = 24 + (oc.sack ? 4 : 0) + (oc.ws ? 4 : 0);
	delta = (int)(14 + 20 + tcplen) - (int)(data_end - data);
	if (delta != 0 && bpf_xdp_adjust_tail(ctx, delta))
		return 2;

	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	ip = (void *)(eth + 1);
	tcp = (void *)(ip + 1);
	if ((void *)(tcp + 1) > data_end)
		return -1; /* cannot happen: 58 bytes were just made */

	__builtin_memcpy(eth->h_dest, mac_src, ETH_ALEN);
	__builtin_memcpy(eth->h_source, mac_dst, ETH_ALEN);
	eth->h_proto = ETH_P_IP_BE;

	ip->version = 4;
	ip->ihl = 5;
	ip->tos = 0;
	ip->tot_len = bpf_htons(20 + tcplen);
	ip->id = 0;
	ip->frag_off = bpf_htons(0x4000); /* DF */
	ip->ttl = 64;
	ip->protocol = IPPROTO_TCP;
	ip->saddr = daddr;
	ip->daddr = saddr;
	ipsum = 0x4500 + 20 + tcplen + 0x4000 + (64 << 8 | IPPROTO_TCP) + (src >> 16) + (src & 0xffff) +
		(dst >> 16) + (dst & 0xffff);
	ip->check = bpf_htons(~csum_fold(ipsum) & 0xffff);

	return write_synack(slot, cc, tcp, data_end, psrc, pdst, cookie, isn, tcplen, cc->mss, oc.sack, oc.ws,
			    (dst >> 16) + (dst & 0xffff) + (src >> 16) + (src & 0xffff));
}

/*
 * SipHash-2-4 of the 52-byte message the engine's CookieJar::hash writes for
 * IPv6: src, dst (16 bytes each, as on the wire), then as for IPv4. The
 * addresses' bytes are read as little-endian words, as SipHash reads a byte
 * stream (the BPF target is little-endian, as the engine's hosts are).
 */
static __always_inline __u64 cookie_hash6(const struct cookie_cfg *cc, const __u8 *src, const __u8 *dst,
					  __u16 sport, __u16 dport, __u32 isn, __u64 counter, __u32 low)
{
	__u64 v0 = cc->k0 ^ 0x736f6d6570736575ULL;
	__u64 v1 = cc->k1 ^ 0x646f72616e646f6dULL;
	__u64 v2 = cc->k0 ^ 0x6c7967656e657261ULL;
	__u64 v3 = cc->k1 ^ 0x7465646279746573ULL;
	__u64 w[4];

	__builtin_memcpy(&w[0], src, 8);
	__builtin_memcpy(&w[1], src + 8, 8);
	__builtin_memcpy(&w[2], dst, 8);
	__builtin_memcpy(&w[3], dst + 8, 8);
	SIPWORD(w[0]);
	SIPWORD(w[1]);
	SIPWORD(w[2]);
	SIPWORD(w[3]);
	SIPWORD((__u64)sport | (__u64)dport << 16 | (__u64)isn << 32);
	SIPWORD(counter);
	SIPWORD((__u64)low | 52ULL << 56); /* the tail and the length */
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

/* The sum of an IPv6 address's 16-bit words. */
static __always_inline __u64 addr6_sum(const __u8 *a)
{
	__u64 sum = 0;
	int k;

#pragma unroll
	for (k = 0; k < 16; k += 2)
		sum += (__u32)a[k] << 8 | a[k + 1];
	return sum;
}

/*
 * syn_checks for IPv6, as the engine's demux/v6.rs inspects a SYN: our MAC
 * and address, a source that can send (a unicast MAC; not unspecified,
 * multicast, loopback, IPv4-mapped or ours), ports, the TCP checksum (full,
 * or partial where the engine accepts that), no payload. 1 if it passes.
 */
static __always_inline int syn_checks6(const struct cookie_cfg *cc, struct ethhdr *eth, struct ipv6hdr *ip6,
				       struct tcphdr *tcp, void *data_end)
{
	const __u8 *src = ip6->saddr.in6_u.u6_addr8;
	__u32 tcplen = (__u32)tcp->doff * 4;
	struct sum_ctx sc = {};
	__u64 w0, w1, sum;
	__u16 field, pseudo;

	if ((eth->h_source[0] & 1) || !(eth->h_source[0] | eth->h_source[1] | eth->h_source[2] |
					eth->h_source[3] | eth->h_source[4] | eth->h_source[5]))
		return 0;
	if ((eth->h_dest[0] ^ cc->mac[0]) | (eth->h_dest[1] ^ cc->mac[1]) | (eth->h_dest[2] ^ cc->mac[2]) |
	    (eth->h_dest[3] ^ cc->mac[3]) | (eth->h_dest[4] ^ cc->mac[4]) | (eth->h_dest[5] ^ cc->mac[5]))
		return 0;
	if (bpf_ntohs(ip6->payload_len) != tcplen || (void *)tcp + tcplen > data_end)
		return 0;
	if (addr6_zero(cc->addr6) || !addr6_eq(ip6->daddr.in6_u.u6_addr8, cc->addr6))
		return 0;
	__builtin_memcpy(&w0, src, 8);
	__builtin_memcpy(&w1, src + 8, 8);
	if ((w0 | w1) == 0 || src[0] == 0xff || addr6_eq(src, cc->addr6))
		return 0;
	/* ::1 and ::ffff:0:0/96 (the words as little-endian loads of the bytes). */
	if (w0 == 0 && (w1 == 0x0100000000000000ULL || (__u32)w1 == 0xffff0000u))
		return 0;
	if (tcp->source == 0 || tcp->dest == 0)
		return 0;
	sc.p = tcp;
	sc.data_end = data_end;
	sc.len = tcplen;
	bpf_loop(30, sum_word, &sc, 0);
	if (sc.bail || sc.i != tcplen)
		return 0;
	sum = addr6_sum(src) + addr6_sum(ip6->daddr.in6_u.u6_addr8) + tcplen + IPPROTO_TCP;
	pseudo = csum_fold(sum);
	if (csum_fold(sum + sc.sum) == 0xffff)
		return 1;
	if (!cc->accept_partial)
		return 0;
	field = bpf_ntohs(tcp->check);
	return field == pseudo || (pseudo == 0xffff && field == 0) || (pseudo == 0 && field == 0xffff);
}

/* answer_syn for IPv6: the same SYN-ACK in an IPv6 header (hop limit 64, as
 * smoltcp's), its MSS 20 bytes less. Same return values. */
static __always_inline int answer_syn6(struct xdp_md *ctx, struct ack_slot *slot)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 q = ctx->rx_queue_index;
	struct cookie_cfg *cc = bpf_map_lookup_elem(&syn_cookies, &q);
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	struct tcphdr *tcp = (void *)(ip6 + 1);
	__u8 mac_src[ETH_ALEN], mac_dst[ETH_ALEN], saddr[16], daddr[16];
	struct opt_ctx oc = {};
	__u32 isn, low, cookie, tcplen;
	__be16 psrc, pdst;
	__u64 counter;
	int delta;

	if (!cc || cc->mss <= 20)
		return 0;
	if ((void *)(tcp + 1) > data_end)
		return 0;
	if (!syn_checks6(cc, eth, ip6, tcp, data_end))
		return 0;
	if (!syn_options(tcp, data_end, &oc) || !cookie_low(cc, &oc, &counter, &low))
		return 0;
	__builtin_memcpy(saddr, ip6->saddr.in6_u.u6_addr8, 16);
	__builtin_memcpy(daddr, ip6->daddr.in6_u.u6_addr8, 16);
	isn = bpf_ntohl(tcp->seq);
	cookie = (__u32)(cookie_hash6(cc, saddr, daddr, bpf_ntohs(tcp->source), bpf_ntohs(tcp->dest), isn,
				      counter, low) >> 41) << 9 | low;

	__builtin_memcpy(mac_src, eth->h_source, ETH_ALEN);
	__builtin_memcpy(mac_dst, eth->h_dest, ETH_ALEN);
	psrc = tcp->source;
	pdst = tcp->dest;
	tcplen = 24 + (oc.sack ? 4 : 0) + (oc.ws ? 4 : 0);
	delta = (int)(14 + 40 + tcplen) - (int)(data_end - data);
	if (delta != 0 && bpf_xdp_adjust_tail(ctx, delta))
		return 2;

	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	ip6 = (void *)(eth + 1);
	tcp = (void *)(ip6 + 1);
	if ((void *)(tcp + 1) > data_end)
		return -1; /* cannot happen: 78 bytes were just made */

	__builtin_memcpy(eth->h_dest, mac_src, ETH_ALEN);
	__builtin_memcpy(eth->h_source, mac_dst, ETH_ALEN);
	eth->h_proto = ETH_P_IPV6_BE;
	*(__be32 *)ip6 = bpf_htonl(0x60000000);
	ip6->payload_len = bpf_htons(tcplen);
	ip6->nexthdr = IPPROTO_TCP;
	ip6->hop_limit = 64;
	__builtin_memcpy(ip6->saddr.in6_u.u6_addr8, daddr, 16);
	__builtin_memcpy(ip6->daddr.in6_u.u6_addr8, saddr, 16);

	return write_synack(slot, cc, tcp, data_end, psrc, pdst, cookie, isn, tcplen, cc->mss - 20, oc.sack,
			    oc.ws, addr6_sum(saddr) + addr6_sum(daddr));
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

/* Whether TCP destination `port` is steered: in the config's range or marked in tcp_ports. */
static __always_inline int port_steered(__u32 port, __u32 port_lo, __u32 port_hi)
{
	__u8 *want;

	if (port_hi != 0 && port >= port_lo && port <= port_hi)
		return 1;
	want = bpf_map_lookup_elem(&tcp_ports, &port);
	return want && (*want & 1);
}

/*
 * `tcp` is the TCP header quoted in a "too big" ICMP error (ICMPv6 Packet Too Big,
 * ICMP Fragmentation Needed): whether its source port is steered, i.e. the error
 * concerns a connection of the stack, which lowers its MSS (path MTU discovery).
 */
static __always_inline int quotes_steered(void *tcp, void *data_end, __u32 port_lo, __u32 port_hi)
{
	__be16 *sport = tcp;

	if ((void *)(sport + 1) > data_end)
		return 0;
	return port_steered(bpf_ntohs(*sport), port_lo, port_hi);
}

/* ff02::1:ffXX:XXXX for the last three bytes of `ours`. */
static __always_inline int solicited_node_of(const __u8 *dst, const __u8 *ours)
{
	__u32 w[4], o;

	__builtin_memcpy(w, dst, 16);
	__builtin_memcpy(&o, ours + 12, 4);
	return w[0] == bpf_htonl(0xff020000) && w[1] == 0 && w[2] == bpf_htonl(1) &&
	       (w[3] | bpf_htonl(0xff000000)) == (o | bpf_htonl(0xff000000)) && dst[12] == 0xff;
}

static __always_inline int steer_v6(struct xdp_md *ctx, struct steer_cfg *c, void *data_end, struct ethhdr *eth)
{
	struct ipv6hdr *ip6 = (void *)(eth + 1);
	__u8 ours[16];
	__u32 flags = c->flags;

	if (!c->v6)
		return pass();
	if ((void *)(ip6 + 1) > data_end)
		return pass();
	if (ip6->version != 6)
		return pass();
	__builtin_memcpy(ours, c->addr6, 16);
	if (!addr6_zero(ours) && !addr6_eq(ip6->daddr.in6_u.u6_addr8, ours)) {
		/* A neighbour solicitation for a dedicated address. */
		if ((flags & STEER_ICMP) && ip6->nexthdr == IPPROTO_ICMPV6 &&
		    solicited_node_of(ip6->daddr.in6_u.u6_addr8, ours))
			return steer(ctx);
		return pass();
	}
	if (ip6->nexthdr == IPPROTO_TCP) {
		struct tcphdr *tcp = (void *)(ip6 + 1);

		if ((void *)(tcp + 1) > data_end)
			return pass();
		if (!port_steered(bpf_ntohs(tcp->dest), c->port_lo, c->port_hi))
			return pass();
#ifdef DEFER_ACKS
		if (tcp->syn && !tcp->ack && !tcp->rst) {
			__u32 q = ctx->rx_queue_index, port = bpf_ntohs(tcp->dest);
			struct ack_slot *slot = bpf_map_lookup_elem(&ack_state, &q);
			__u8 *want = bpf_map_lookup_elem(&tcp_ports, &port);

			if (want && (*want & 2) && slot && slot->cookies_on) {
				int r = answer_syn6(ctx, slot);

				if (r == 1)
					return XDP_TX;
				if (r == 2)
					return steer(ctx);
				if (r < 0)
					return XDP_DROP;
			}
			if (shed_syn(q))
				return XDP_DROP;
		}
		if (tcp->ack && !tcp->syn && !tcp->fin && !tcp->rst && !tcp->urg && !tcp->psh && tcp->doff >= 5 &&
		    bpf_ntohs(ip6->payload_len) == (__u32)tcp->doff * 4) {
			__u32 q = ctx->rx_queue_index;
			struct ack_slot *slot = bpf_map_lookup_elem(&ack_state, &q);

			if (slot && defer_ack(ctx, slot))
				return XDP_DROP;
		}
#endif
		return steer(ctx);
	}
	/* A dedicated address is the stack's alone: it answers neighbour
	 * discovery and ping, and counts what it drops (extension headers,
	 * fragments). A shared one's are the kernel's. An all-zero (any)
	 * address is never dedicated. */
	if ((flags & STEER_ICMP) && !addr6_zero(ours))
		return steer(ctx);
	/* A shared address: a Packet Too Big (type 2) about one of the stack's
	 * segments is the stack's (the quoted IPv6 header 8 bytes in, then TCP). */
	if (ip6->nexthdr == IPPROTO_ICMPV6) {
		__u8 *icmp = (void *)(ip6 + 1);
		struct ipv6hdr *q = (void *)(icmp + 8);

		if ((void *)(q + 1) > data_end || icmp[0] != 2 || q->nexthdr != IPPROTO_TCP)
			return pass();
		if (quotes_steered(q + 1, data_end, c->port_lo, c->port_hi))
			return steer(ctx);
	}
	return pass();
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

	if (eth->h_proto == ETH_P_IPV6_BE)
		return steer_v6(ctx, c, data_end, eth);
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
		__u32 port, listener = 0, in_range;
		__u8 *want;

		if ((void *)(tcp + 1) > data_end)
			return pass();
		port = bpf_ntohs(tcp->dest);
		in_range = port_hi != 0 && port >= port_lo && port <= port_hi;
		if (!in_range) {
			want = bpf_map_lookup_elem(&tcp_ports, &port);
			if (!want || !(*want & 1))
				return pass();
			listener = *want & 2;
		}
#ifdef DEFER_ACKS
		if (tcp->syn && !tcp->ack && !tcp->rst) {
			__u32 q = ctx->rx_queue_index;
			struct ack_slot *slot = bpf_map_lookup_elem(&ack_state, &q);

			/* A port in the steered range may listen too (a server on
			 * a port among the ephemeral ones): only a SYN looks. */
			if (in_range) {
				want = bpf_map_lookup_elem(&tcp_ports, &port);
				listener = want && (*want & 2);
			}

			if (listener && slot && slot->cookies_on) {
				int r = answer_syn(ctx, slot);

				if (r == 1)
					return XDP_TX;
				if (r == 2)
					return steer(ctx);
				if (r < 0)
					return XDP_DROP;
			}
			if (shed_syn(q))
				return XDP_DROP;
		}
		if (pure_ack(ip, tcp, ihl_bytes)) {
			__u32 q = ctx->rx_queue_index;
			struct ack_slot *slot = bpf_map_lookup_elem(&ack_state, &q);

			if (slot && defer_ack(ctx, slot))
				return XDP_DROP;
		}
#else
		(void)listener;
		(void)in_range;
#endif
		return steer(ctx);
	}

	if (ip->protocol == IPPROTO_ICMP && (flags & STEER_ICMP))
		return steer(ctx);
	/* A shared address: a Fragmentation Needed (type 3, code 4) about one of the
	 * stack's segments is the stack's (the quoted IPv4 header 8 bytes in). */
	if (ip->protocol == IPPROTO_ICMP) {
		__u8 *icmp = (void *)ip + ihl_bytes;
		struct iphdr *q = (void *)(icmp + 8);

		if ((void *)(q + 1) > data_end || icmp[0] != 3 || icmp[1] != 4 || q->ihl < 5 ||
		    q->protocol != IPPROTO_TCP)
			return pass();
		if (quotes_steered((void *)q + (__u32)q->ihl * 4, data_end, port_lo, port_hi))
			return steer(ctx);
	}

	return pass();
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
