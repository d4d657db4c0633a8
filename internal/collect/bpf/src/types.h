/* Minimal kernel type definitions for CO-RE. Only the fields wallprof reads
 * are declared; preserve_access_index makes libbpf/cilium relocate their
 * offsets against the running kernel's BTF, so no vmlinux.h is needed. */
#ifndef WALLPROF_TYPES_H
#define WALLPROF_TYPES_H

#include <linux/types.h>
#include <linux/bpf.h>

typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s32 s32;
typedef __s64 s64;
typedef _Bool bool;
#define true 1
#define false 0

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

struct thread_info {
	unsigned int cpu;
};

struct rq {
	__u64 clock;
	__u64 clock_task; /* clock less IRQ and steal time: what CPU time is charged in */
};

struct cfs_rq {
	struct rq *rq; /* CONFIG_FAIR_GROUP_SCHED */
};

struct sched_entity {
	__u64 exec_start; /* rq clock_task when sum_exec_runtime was last brought up to date */
	__u64 sum_exec_runtime;
	__u64 prev_sum_exec_runtime; /* sum_exec_runtime at its latest pick (switch-in) */
	struct cfs_rq *cfs_rq; /* CONFIG_FAIR_GROUP_SCHED */
	unsigned char sched_delayed; /* Linux 6.12+: blocked, but left on its run queue until its lag is spent (DELAY_DEQUEUE) */
};

/* schedstat (CONFIG_SCHED_INFO): time spent waiting on a run queue. */
struct sched_info {
	unsigned long long run_delay;   /* total, up to the latest arrival */
	unsigned long long last_queued; /* when the current wait began, 0 if none */
	unsigned long long last_arrival; /* the run queue's clock at its latest switch-in */
};

struct task_struct {
	struct thread_info thread_info;
	struct sched_entity se;
	struct sched_info sched_info;
	int pid;
	int tgid;
	char comm[16];
	unsigned int __state;
	unsigned int flags;
	int on_cpu;                 /* on a CPU now (CONFIG_SMP) */
	int on_rq;                  /* on a run queue (running or runnable) */
	unsigned long nvcsw;        /* voluntary switches: it blocked */
	unsigned long nivcsw;       /* involuntary switches: it was preempted */
	unsigned sched_contributes_to_load:1; /* its latest block was uninterruptible, not TASK_NOLOAD */
	__u64 start_time; /* CLOCK_MONOTONIC at its creation */
};

/* x86_64 kernel pt_regs, field names as in arch/x86/include/asm/ptrace.h */
struct pt_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	unsigned long ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
};

struct bpf_iter_meta {
	void *seq;
	__u64 session_id;
	__u64 seq_num;
};

struct bpf_iter__task {
	struct bpf_iter_meta *meta;
	struct task_struct *task;
};

/* Kernels whose task_struct keeps the CPU outside thread_info. */
struct task_struct___cpu {
	unsigned int cpu;
};

#pragma clang attribute pop

/* The open-coded task iterator's state (Linux 6.7+, bpf_iter_task_new). */
struct bpf_iter_task {
	__u64 __opaque[3];
} __attribute__((aligned(8)));

/* bpf_tracing.h picks kernel register names when this is defined. */
#define __VMLINUX_H__ 1

#endif
