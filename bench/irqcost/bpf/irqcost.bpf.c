// What each sampler's timer interrupt costs on one CPU, measured by the
// kernel: the time between the hrtimer_expire_entry and _exit tracepoints
// around a cpu-clock event's hrtimer callback (perf_swevent_hrtimer, which
// perf's core, built without ftrace, keeps from fentry): the event's read, its overflow handler, a BPF program
// attached to it or the sample written to perf's ring, the timer's
// forwarding), summed by the comm of the event's owner. Not part of
// wallprof: bench/irqcost/run.sh builds it (clang, bpftool, libbpf-dev).
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

char LICENSE[] SEC("license") = "GPL";

volatile const __u32 target_cpu = 0;
/* perf_swevent_hrtimer's address (from /proc/kallsyms). */
volatile const __u64 swevent_fn = 0;

struct cost {
	__u64 n, ns;
};
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, char[16]);
	__type(value, struct cost);
} costs SEC(".maps");

__u64 start = 0;

SEC("tp_btf/hrtimer_expire_entry")
int BPF_PROG(enter, struct hrtimer *t, ktime_t *now)
{
	if (bpf_get_smp_processor_id() != target_cpu || (void *)t->function != (void *)swevent_fn)
		return 0;
	start = bpf_ktime_get_ns();
	return 0;
}

SEC("tp_btf/hrtimer_expire_exit")
int BPF_PROG(leave, struct hrtimer *t)
{
	if (bpf_get_smp_processor_id() != target_cpu || !start || (void *)t->function != (void *)swevent_fn)
		return 0;
	__u64 d = bpf_ktime_get_ns() - start;
	start = 0;
	struct perf_event *ev = container_of(t, struct perf_event, hw.hrtimer);
	struct task_struct *owner = BPF_CORE_READ(ev, owner);
	char comm[16] = {};
	if (owner)
		BPF_CORE_READ_STR_INTO(&comm, owner, comm);
	struct cost *c = bpf_map_lookup_elem(&costs, &comm);
	if (!c) {
		struct cost z = {};
		bpf_map_update_elem(&costs, &comm, &z, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&costs, &comm);
		if (!c)
			return 0;
	}
	__sync_fetch_and_add(&c->n, 1);
	__sync_fetch_and_add(&c->ns, d);
	return 0;
}
