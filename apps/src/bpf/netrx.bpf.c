// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
//
// netrx: where the kernel's network receive work runs, for the benchmarks.
//
// Without CONFIG_IRQ_TIME_ACCOUNTING a softirq's time is charged to whatever
// task it interrupted, and on a veth pair the receiver's whole NET_RX work
// (IP, TCP, the wake-up of the reader; for the AF_XDP stack the XDP program
// and the copy into the UMEM) runs in the *sender's* softirq, in its own
// process context. A server measured by its process's CPU time is then
// charged its client's receive path and not its own. This program times every
// NET_RX softirq and sums the time by the process it ran in, so that the
// benchmark can charge each side its own receive (apps/src/netrx.rs).
//
// It also counts the system calls each of the two processes makes (raw_tp
// sys_enter), so a benchmark can report system calls per request for the
// server and the client alike, whatever their backend.
//
// Userspace owns the maps:
//   targets  [0] = server tgid, [1] = client tgid (0 = none)
//   acc      per-CPU u64 [3]: NET_RX ns run in the server's context, in the
//            client's, anywhere else (ksoftirqd, idle, other processes)
//   start    per-CPU u64: when the NET_RX softirq running now began (0: none)
//   calls    per-CPU u64 [2]: system calls entered by the server, by the client
// Softirqs do not nest on a CPU, so per-CPU slots need no atomics.
//
// Raw tracepoints (attached by name through BPF_RAW_TRACEPOINT_OPEN): a
// classic tracepoint is found through tracefs, which `ip netns exec` hides
// behind the fresh sysfs it mounts. Both take `unsigned int vec_nr` as their
// one argument. Only uapi headers, as steer.bpf.c.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define NET_RX_SOFTIRQ 3

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u32);
} targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 3);
	__type(key, __u32);
	__type(value, __u64);
} acc SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} start SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} calls SEC(".maps");

// Which of the two processes the current task belongs to: 0 the server, 1 the client, 2
// neither.
static __always_inline __u32 whose(void)
{
	__u32 zero = 0, one = 1;
	__u32 *server, *client, tgid;

	tgid = bpf_get_current_pid_tgid() >> 32;
	server = bpf_map_lookup_elem(&targets, &zero);
	client = bpf_map_lookup_elem(&targets, &one);
	if (server && *server && tgid == *server)
		return 0;
	if (client && *client && tgid == *client)
		return 1;
	return 2;
}

SEC("raw_tp/sys_enter")
int count_syscalls(struct bpf_raw_tracepoint_args *ctx)
{
	__u32 slot = whose();
	__u64 *n;

	if (slot > 1)
		return 0;
	n = bpf_map_lookup_elem(&calls, &slot);
	if (n)
		*n += 1;
	return 0;
}

SEC("raw_tp/softirq_entry")
int netrx_entry(struct bpf_raw_tracepoint_args *ctx)
{
	__u32 zero = 0;
	__u64 *t;

	if (ctx->args[0] != NET_RX_SOFTIRQ)
		return 0;
	t = bpf_map_lookup_elem(&start, &zero);
	if (t)
		*t = bpf_ktime_get_ns();
	return 0;
}

SEC("raw_tp/softirq_exit")
int netrx_exit(struct bpf_raw_tracepoint_args *ctx)
{
	__u32 zero = 0, slot;
	__u64 *t, *sum, now;

	if (ctx->args[0] != NET_RX_SOFTIRQ)
		return 0;
	t = bpf_map_lookup_elem(&start, &zero);
	// An exit without its entry: the program was attached mid-softirq.
	if (!t || *t == 0)
		return 0;
	now = bpf_ktime_get_ns();
	slot = whose();
	sum = bpf_map_lookup_elem(&acc, &slot);
	if (sum)
		*sum += now - *t;
	*t = 0;
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
