// A probe, not part of wallprof: can a BPF timer walk a process's threads?
// (doc/walk-timer.md). Build: bpftool btf dump file /sys/kernel/btf/vmlinux
// format c > vmlinux.h; clang -O2 -g -target bpf -mcpu=v3 -I. -c
// walktimer.bpf.c -o walktimer.bpf.o
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

char LICENSE[] SEC("license") = "GPL";

struct elem { struct bpf_timer t; };
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, int);
	__type(value, struct elem);
} timers SEC(".maps");

volatile __u32 target_pid = 0;
volatile __u64 visits = 0, fires = 0, ns_sum = 0, states = 0;
volatile __s64 r_init = 99, r_cb = 99, r_start = 99;

extern int bpf_iter_task_new(struct bpf_iter_task *it, struct task_struct *task, unsigned int flags) __ksym __weak;
extern struct task_struct *bpf_iter_task_next(struct bpf_iter_task *it) __ksym __weak;
extern void bpf_iter_task_destroy(struct bpf_iter_task *it) __ksym __weak;
extern struct task_struct *bpf_task_from_pid(s32 pid) __ksym;
extern void bpf_task_release(struct task_struct *p) __ksym;
extern void bpf_rcu_read_lock(void) __ksym;
extern void bpf_rcu_read_unlock(void) __ksym;

static int cb(void *map, int *key, struct elem *e)
{
	__u64 t0 = bpf_ktime_get_ns();
	fires++;
	struct task_struct *leader = bpf_task_from_pid(target_pid);
	if (leader) {
		struct bpf_iter_task it;
		struct task_struct *t;
		bpf_iter_task_new(&it, leader, BPF_TASK_ITER_PROC_THREADS);
		while ((t = bpf_iter_task_next(&it))) {
			visits++;
			states += t->se.sum_exec_runtime + t->sched_info.run_delay + t->nvcsw;
		}
		bpf_iter_task_destroy(&it);
		bpf_task_release(leader);
	}
	ns_sum += bpf_ktime_get_ns() - t0;
	bpf_timer_start(&e->t, 1260000, 0);
	return 0;
}

SEC("syscall")
int start(void *ctx)
{
	int k = 0;
	struct elem *e = bpf_map_lookup_elem(&timers, &k);
	if (!e)
		return 1;
	r_init = bpf_timer_init(&e->t, &timers, 1 /* CLOCK_MONOTONIC */);
	r_cb = bpf_timer_set_callback(&e->t, cb);
	r_start = bpf_timer_start(&e->t, 1260000, 0);
	return 0;
}
