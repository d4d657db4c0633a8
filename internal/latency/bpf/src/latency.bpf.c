// SPDX-License-Identifier: GPL-2.0
/*
 * wallprof latency: how long calls of Go functions take.
 *
 * One uprobe at a function's entry (lat_entry: right after the prologue's
 * stack check, so that a re-entry after morestack does not fire it again)
 * and one at each of its RET
 * instructions (lat_ret), never a uretprobe: a uretprobe rewrites the return
 * address on the goroutine's stack, which the Go runtime copies and unwinds.
 * The attach cookie is the function's index (< MAX_FUNCS).
 *
 * A call is keyed by its goroutine: the g pointer (r14 in Go's ABIInternal
 * on amd64) and the function, with the goroutine id read from g in the
 * value, so that a g reused by a new goroutine never matches an old entry.
 * The frame is identified by its distance from the top of the goroutine's
 * stack (g.stack.hi - sp at the entry, which is also sp at each RET): the
 * runtime copies stacks but keeps that distance. So:
 *   - an entry deeper than the open call's frame is recursion, if the open
 *     frame still holds its return address: only the outermost call is
 *     timed (nested calls are counted). If it does not, the open call was
 *     unwound (a panic recovered above it) and the stack reused: it is
 *     replaced and counted as abandoned;
 *   - an entry at the same distance, or shallower, means the open call
 *     never returned (a panic unwound it): it is replaced and counted as
 *     abandoned;
 *   - a RET at the open frame's distance ends the call; a RET deeper is a
 *     nested call's.
 * Entries live in an LRU hash: goroutines that exit mid-call age out.
 *
 * Where a call's time went (doc/latency-split.md): at the entry and at the
 * return, the probe reads its thread's time on a CPU so far (kept by
 * lat_switch, on sched_switch) and its run queue wait so far
 * (task->sched_info.run_delay); a call that returns on the thread it
 * entered on gets the differences as its running and runnable time, and
 * wall - both as blocked. A Go call that returns on another thread is
 * counted as moved, not split. g.trackingSeq, which the runtime increments
 * each time the goroutine stops running (parks, is preempted; before Go
 * 1.26 also enters a system call), tells the calls that ran throughout
 * (kind 0: exact) from those that stopped on the way and may have shared
 * their thread with other goroutines (kind 1).
 */
#include <linux/bpf.h>
#include <asm/ptrace.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

typedef __u32 u32;
typedef __u64 u64;
typedef __u8 u8;

#define MAX_FUNCS 8
#define SUB_BITS 6
#define SUB (1 << SUB_BITS)
#define MAX_MSB 40
#define NBUCKETS ((MAX_MSB - SUB_BITS + 2) * SUB) /* 2304 */

/* Set by user space before loading. */
volatile const u32 goid_off;     /* offset of g.goid */
volatile const u32 stack_hi_off; /* offset of g.stack.hi */
volatile const u32 target_tgid;  /* the process measured (for lat_switch) */
volatile const u32 seq_off;      /* offset of g.trackingSeq (u8), 0 if unknown */
volatile const u32 gm_off;       /* offset of g.m (lat_cpu) */
volatile const u32 mcurg_off;    /* offset of m.curg (lat_cpu) */
volatile const u32 nfuncs;       /* functions probed (lat_cpu) */

/* The kernel's types, as much as is read of them (CO-RE relocates). */
struct sched_info {
	unsigned long long run_delay;
} __attribute__((preserve_access_index));

struct task_struct {
	int pid;
	int tgid;
	struct sched_info sched_info;
} __attribute__((preserve_access_index));

struct gkey {
	u64 g;
	u32 fn;
	u32 pad;
};

struct gentry {
	u64 goid;
	u64 start;    /* bpf_ktime_get_ns at the entry */
	u64 sp_off;   /* g.stack.hi - sp at the entry */
	u64 stack_hi; /* g.stack.hi at the entry (for debugging) */
	u64 ret_addr; /* the return address at the entry: [sp] */
	u64 run0;     /* the thread's time on a CPU at the entry */
	u64 runq0;    /* the thread's run queue wait at the entry */
	u32 tid;      /* the thread of the entry */
	u8 seq;       /* g.trackingSeq at the entry */
	u8 pad2[3];
};

/* Per function, per CPU; user space sums (and takes the max of) the CPUs. */
struct fstat {
	u64 count;     /* calls timed */
	u64 sum_ns;    /* their total duration */
	u64 max_ns;    /* the longest */
	u64 nested;    /* recursive entries inside a timed call, not timed */
	u64 abandoned; /* open calls of the same goroutine that never returned (panic) */
	u64 reused;    /* open calls of an earlier goroutine whose g was reused */
	u64 unmatched; /* RETs with no open call: begun before attach, or evicted */
	u64 read_errs; /* g could not be read */
	u64 entries;   /* entry probe hits */
	u64 rets;      /* RET probe hits */
	u64 moved;     /* timed calls that returned on another thread (or whose thread's record was evicted): not split */
	u64 lost_stopped; /* stopped calls not sent to user space: the ring was full */
};

/* A timed Go call whose goroutine stopped running on the way (or, without
 * g.trackingSeq, any Go call): user space splits it with its samples of the
 * goroutine table (doc/latency-split.md). */
struct stopped_call {
	u32 fn;
	u32 flags; /* CALL_STOPPED, CALL_SLOW */
	u64 goid;
	u64 start; /* bpf_ktime_get_ns at the entry */
	u64 end;   /* at the return */
};

volatile const u8 send_stopped; /* whether user space samples the goroutine table */
volatile const u64 slow_ns;     /* send the calls at least this long too (--slow); 0: none */
#define CALL_STOPPED 1
#define CALL_SLOW 2

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} stopped SEC(".maps");

/* Force the type's export for bpf2go. */
const struct stopped_call *unused_stopped_call __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct gkey);
	__type(value, struct gentry);
} calls SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_FUNCS);
	__type(key, u32);
	__type(value, struct fstat);
} stats SEC(".maps");

/* Histogram: MAX_FUNCS x NBUCKETS counters (see bucket), memory-mapped
 * by user space. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(map_flags, BPF_F_MMAPABLE);
	__uint(max_entries, MAX_FUNCS * NBUCKETS);
	__type(key, u32);
	__type(value, u64);
} hist SEC(".maps");

/* Per thread of the target that hit a probe: its time on a CPU. */
struct tcpu {
	u64 oncpu; /* accumulated over the switch-outs */
	u64 in_at; /* when it last got a CPU; 0 while off a CPU */
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, u32);
	__type(value, struct tcpu);
} threads SEC(".maps");

/* The split, per function, kind (0: the call ran throughout, or is native;
 * 1: the goroutine stopped running during the call, or it is not known)
 * and log2 bucket of the call's duration (bucket k holds [2^k, 2^(k+1))
 * ns): index (fn * 2 + kind) * NLOG2 + bucket. */
#define NLOG2 64
struct split {
	u64 calls;
	u64 wall_ns;
	u64 running_ns;
	u64 runnable_ns;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_FUNCS * 2 * NLOG2);
	__type(key, u32);
	__type(value, struct split);
} splits SEC(".maps");

/* thread_times reads the current thread's time on a CPU and run queue
 * wait so far, now, and its id. */
static __always_inline void thread_times(u64 now, u32 *tid, u64 *run, u64 *runq)
{
	*tid = (u32)bpf_get_current_pid_tgid();
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	*runq = BPF_CORE_READ(task, sched_info.run_delay);
	struct tcpu *t = bpf_map_lookup_elem(&threads, tid);
	if (!t) {
		/* First seen here, on a CPU: count from now. */
		struct tcpu n = {.in_at = now};
		bpf_map_update_elem(&threads, tid, &n, BPF_ANY);
		*run = 0;
		return;
	}
	if (!t->in_at)
		t->in_at = now; /* a switch-in lat_switch missed (LRU eviction) */
	*run = t->oncpu + (now - t->in_at);
}

static __always_inline u32 log2_bucket(u64 d)
{
	u32 k = 0;
	if (d >> 32) { d >>= 32; k += 32; }
	if (d >> 16) { d >>= 16; k += 16; }
	if (d >> 8) { d >>= 8; k += 8; }
	if (d >> 4) { d >>= 4; k += 4; }
	if (d >> 2) { d >>= 2; k += 2; }
	if (d >> 1) { k += 1; }
	return k;
}

static __always_inline void record_split(struct fstat *st, u32 fn, u32 kind, u64 d, u32 tid0, u64 run0, u64 runq0, u64 now)
{
	u32 tid;
	u64 run, runq;
	thread_times(now, &tid, &run, &runq);
	if (tid != tid0 || run < run0 || runq < runq0) {
		st->moved++;
		return;
	}
	u64 r = run - run0, q = runq - runq0;
	u32 idx = (fn * 2 + kind) * NLOG2 + log2_bucket(d);
	struct split *sp = bpf_map_lookup_elem(&splits, &idx);
	if (!sp)
		return;
	__sync_fetch_and_add(&sp->calls, 1);
	__sync_fetch_and_add(&sp->wall_ns, d);
	__sync_fetch_and_add(&sp->running_ns, r);
	__sync_fetch_and_add(&sp->runnable_ns, q);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(lat_switch, int preempt, struct task_struct *prev, struct task_struct *next)
{
	if (prev->tgid != target_tgid && next->tgid != target_tgid)
		return 0;
	u64 now = bpf_ktime_get_ns();
	u32 tid;
	struct tcpu *t;
	if (prev->tgid == target_tgid) {
		tid = prev->pid;
		t = bpf_map_lookup_elem(&threads, &tid);
		if (t && t->in_at) {
			t->oncpu += now - t->in_at;
			t->in_at = 0;
		}
	}
	if (next->tgid == target_tgid) {
		tid = next->pid;
		t = bpf_map_lookup_elem(&threads, &tid);
		if (t)
			t->in_at = now;
	}
	return 0;
}

/* bucket: durations below 64 ns have their own bucket; above, each power
 * of two is split into 64 equal sub-buckets (relative width <= 1/64). */
static __always_inline u32 bucket(u64 d)
{
	if (d < SUB)
		return d;
	u32 msb = 0;
	u64 v = d;
	if (v >> 32) { v >>= 32; msb += 32; }
	if (v >> 16) { v >>= 16; msb += 16; }
	if (v >> 8) { v >>= 8; msb += 8; }
	if (v >> 4) { v >>= 4; msb += 4; }
	if (v >> 2) { v >>= 2; msb += 2; }
	if (v >> 1) { msb += 1; }
	if (msb > MAX_MSB)
		return NBUCKETS - 1;
	return (msb - SUB_BITS + 1) * SUB + ((d >> (msb - SUB_BITS)) & (SUB - 1));
}

static __always_inline void record_call(struct fstat *st, u32 fn, u64 d)
{
	st->count++;
	st->sum_ns += d;
	if (d > st->max_ns)
		st->max_ns = d;
	u32 idx = fn * NBUCKETS + bucket(d);
	u64 *c = bpf_map_lookup_elem(&hist, &idx);
	if (c)
		__sync_fetch_and_add(c, 1);
}

static __always_inline int read_g(struct pt_regs *ctx, struct gkey *k, u64 *goid, u64 *hi)
{
	k->g = ctx->r14;
	k->pad = 0;
	if (!k->g)
		return -1;
	if (bpf_probe_read_user(goid, sizeof(*goid), (void *)(k->g + goid_off)))
		return -1;
	if (bpf_probe_read_user(hi, sizeof(*hi), (void *)(k->g + stack_hi_off)))
		return -1;
	return 0;
}

SEC("uprobe")
int lat_entry(struct pt_regs *ctx)
{
	u32 fn = bpf_get_attach_cookie(ctx);
	struct fstat *st = bpf_map_lookup_elem(&stats, &fn);
	if (!st)
		return 0;
	st->entries++;
	struct gkey k = {.fn = fn};
	u64 goid, hi;
	if (read_g(ctx, &k, &goid, &hi)) {
		st->read_errs++;
		return 0;
	}
	u64 sp_off = hi - ctx->rsp;
	struct gentry *e = bpf_map_lookup_elem(&calls, &k);
	if (e) {
		if (e->goid == goid) {
			u64 ra = 0;
			if (sp_off > e->sp_off && !bpf_probe_read_user(&ra, sizeof(ra), (void *)(hi - e->sp_off)) &&
			    ra == e->ret_addr) {
				st->nested++;
				return 0;
			}
			st->abandoned++;
		} else {
			st->reused++;
		}
	}
	struct gentry n = {.goid = goid, .sp_off = sp_off, .stack_hi = hi};
	if (bpf_probe_read_user(&n.ret_addr, sizeof(n.ret_addr), (void *)ctx->rsp)) {
		st->read_errs++;
		return 0;
	}
	n.start = bpf_ktime_get_ns();
	thread_times(n.start, &n.tid, &n.run0, &n.runq0);
	if (seq_off)
		bpf_probe_read_user(&n.seq, sizeof(n.seq), (void *)(k.g + seq_off));
	bpf_map_update_elem(&calls, &k, &n, BPF_ANY);
	return 0;
}

SEC("uprobe")
int lat_ret(struct pt_regs *ctx)
{
	u64 now = bpf_ktime_get_ns();
	u32 fn = bpf_get_attach_cookie(ctx);
	struct fstat *st = bpf_map_lookup_elem(&stats, &fn);
	if (!st)
		return 0;
	st->rets++;
	struct gkey k = {.fn = fn};
	u64 goid, hi;
	if (read_g(ctx, &k, &goid, &hi)) {
		st->read_errs++;
		return 0;
	}
	u64 sp_off = hi - ctx->rsp;
	struct gentry *e = bpf_map_lookup_elem(&calls, &k);
	if (!e || e->goid != goid || sp_off < e->sp_off) {
		st->unmatched++;
		return 0;
	}
	if (sp_off > e->sp_off)
		return 0; /* a nested call returns */
	u64 d = now - e->start;
	u32 tid0 = e->tid;
	u64 run0 = e->run0, runq0 = e->runq0;
	u8 seq0 = e->seq, seq = 0;
	bpf_map_delete_elem(&calls, &k);
	record_call(st, fn, d);
	u32 kind = 1;
	if (seq_off && !bpf_probe_read_user(&seq, sizeof(seq), (void *)(k.g + seq_off)) && seq == seq0)
		kind = 0;
	record_split(st, fn, kind, d, tid0, run0, runq0, now);
	u32 flags = (kind && send_stopped ? CALL_STOPPED : 0) | (slow_ns && d >= slow_ns ? CALL_SLOW : 0);
	if (flags) {
		struct stopped_call *c = bpf_ringbuf_reserve(&stopped, sizeof(*c), 0);
		if (!c) {
			st->lost_stopped++;
			return 0;
		}
		c->fn = fn;
		c->flags = flags;
		c->goid = goid;
		c->start = now - d;
		c->end = now;
		/* User space drains the ring after each sample of the table. */
		bpf_ringbuf_submit(c, BPF_RB_NO_WAKEUP);
	}
	return 0;
}

/*
 * Native functions (lib:symbol): a uprobe at the entry and a uretprobe,
 * which is safe outside Go code. Calls are keyed by thread; a depth counter
 * per thread and function times only the outermost call of a recursion.
 * A call left by longjmp never returns: its entry ages out of the LRU hash.
 */
struct nkey {
	u32 tid;
	u32 fn;
};

struct nentry {
	u64 start;
	u64 depth;
	u64 run0;
	u64 runq0;
	u32 tid;
	u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct nkey);
	__type(value, struct nentry);
} ncalls SEC(".maps");

SEC("uprobe")
int nat_entry(struct pt_regs *ctx)
{
	u32 fn = bpf_get_attach_cookie(ctx);
	struct fstat *st = bpf_map_lookup_elem(&stats, &fn);
	if (!st)
		return 0;
	st->entries++;
	struct nkey k = {.tid = (u32)bpf_get_current_pid_tgid(), .fn = fn};
	struct nentry *e = bpf_map_lookup_elem(&ncalls, &k);
	if (e && e->depth > 0) {
		e->depth++;
		st->nested++;
		return 0;
	}
	struct nentry n = {.start = bpf_ktime_get_ns(), .depth = 1};
	thread_times(n.start, &n.tid, &n.run0, &n.runq0);
	bpf_map_update_elem(&ncalls, &k, &n, BPF_ANY);
	return 0;
}

SEC("uretprobe")
int nat_ret(struct pt_regs *ctx)
{
	u64 now = bpf_ktime_get_ns();
	u32 fn = bpf_get_attach_cookie(ctx);
	struct fstat *st = bpf_map_lookup_elem(&stats, &fn);
	if (!st)
		return 0;
	st->rets++;
	struct nkey k = {.tid = (u32)bpf_get_current_pid_tgid(), .fn = fn};
	struct nentry *e = bpf_map_lookup_elem(&ncalls, &k);
	if (!e || e->depth == 0) {
		st->unmatched++;
		return 0;
	}
	if (e->depth > 1) {
		e->depth--;
		return 0;
	}
	u64 d = now - e->start;
	u32 tid0 = e->tid;
	u64 run0 = e->run0, runq0 = e->runq0;
	bpf_map_delete_elem(&ncalls, &k);
	record_call(st, fn, d);
	record_split(st, fn, 0, d, tid0, run0, runq0, now);
	return 0;
}

/*
 * On-CPU stacks of the timed calls, for the profile of the slow calls
 * (--slow --profile): a cpu-clock event on every CPU runs lat_cpu, which,
 * on a thread of the target running a goroutine with an open call, sends
 * the goroutine's id, the time and its user stack. User space keeps them
 * per goroutine and gives a slow call's running time the stacks sampled
 * during it. The goroutine is m.curg of the thread's g (r14 in its saved
 * user registers): on the system stack (g0), r14 is g0, and curg the
 * goroutine that switched to it.
 */
#define CPU_FRAMES 127
struct cpu_sample {
	u64 goid;
	u64 time;    /* bpf_ktime_get_ns */
	u32 nframes; /* in pcs: the leaf's pc, then return addresses */
	u32 pad;
	u64 pcs[CPU_FRAMES];
};

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} cpu SEC(".maps");

const struct cpu_sample *unused_cpu_sample __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u64);
} lost_cpu SEC(".maps");

SEC("perf_event")
int lat_cpu(void *ctx)
{
	if ((u32)(bpf_get_current_pid_tgid() >> 32) != target_tgid)
		return 0;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	u64 g = BPF_CORE_READ(regs, r14), m = 0, curg = 0, goid = 0;
	if (!g || bpf_probe_read_user(&m, sizeof(m), (void *)(g + gm_off)) || !m ||
	    bpf_probe_read_user(&curg, sizeof(curg), (void *)(m + mcurg_off)) || !curg ||
	    bpf_probe_read_user(&goid, sizeof(goid), (void *)(curg + goid_off)))
		return 0;
	int open = 0;
	for (u32 fn = 0; fn < MAX_FUNCS && fn < nfuncs; fn++) {
		struct gkey k = {.g = curg, .fn = fn};
		struct gentry *e = bpf_map_lookup_elem(&calls, &k);
		if (e && e->goid == goid) {
			open = 1;
			break;
		}
	}
	if (!open)
		return 0;
	struct cpu_sample *s = bpf_ringbuf_reserve(&cpu, sizeof(*s), 0);
	if (!s) {
		u32 zero = 0;
		u64 *n = bpf_map_lookup_elem(&lost_cpu, &zero);
		if (n)
			(*n)++;
		return 0;
	}
	s->goid = goid;
	s->time = bpf_ktime_get_ns();
	s->pad = 0;
	long n = bpf_get_stack(ctx, s->pcs, sizeof(s->pcs), BPF_F_USER_STACK);
	s->nframes = n > 0 ? (u32)((u64)n >> 3) : 0;
	bpf_ringbuf_submit(s, BPF_RB_NO_WAKEUP);
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
