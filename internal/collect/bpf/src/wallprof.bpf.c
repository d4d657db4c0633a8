// SPDX-License-Identifier: GPL-2.0
/*
 * wallprof's in-kernel collector.
 *
 * Resume mode (the default where the kernel has sched_exit_tp and schedstat;
 * see on_resume): one program per context switch, at sched_exit_tp in the
 * context of the thread that resumes, closes the interval since its previous
 * resumption from the kernel's counters (sum_exec_runtime, run_delay,
 * nvcsw/nivcsw) and takes a due sample there, in its own context;
 * sched_process_exit and the task iterator close the last interval. The
 * rest of this comment describes the switch-time accounting, used where
 * resume mode is not available.
 *
 * Time accounting (exact, per thread, from scheduler timestamps):
 *   tp_btf/sched_switch   closes the interval that just ended for prev (on-CPU)
 *                         and for next (off-CPU: blocked kind, then runnable
 *                         from its wake-up), and opens the next one.
 *   tp_btf/sched_wakeup   marks when a blocked thread became runnable.
 *   tp_btf/sched_wakeup_new, sched_process_fork: new threads / processes.
 *
 * Stack sampling (bounded by the sampling rate, not by the switch rate):
 *   perf_event            on-CPU samples from a per-CPU cpu-clock timer, each
 *                         one sampling period, taken where the CPU was when
 *                         the timer fired (as perf does). On-CPU time is never
 *                         sampled at a switch: the stack a thread switches out
 *                         in is where it waits, not where it computed. User
 *                         space spreads each thread's exact CPU time over its
 *                         timer samples (collect.Build).
 *   off-CPU               each thread accumulates off-CPU time per state; when
 *                         a switch-in brings a state's total past a sampling
 *                         period, one stack is taken, weighted by the whole
 *                         periods accumulated (an unbiased wall-clock sample).
 *                         A thread that comes back on a CPU still has the stack
 *                         it blocked in, but sched_switch runs in the context
 *                         of the thread going out, so the stack is taken:
 *                         - for a blocked thread: its kernel stack at the
 *                           switch-in (bpf_get_task_stack), its user stack when
 *                           it leaves the syscall it blocked in (sys_exit, or a
 *                           kprobe on finish_task_switch where kprobes exist);
 *                         - for a preempted thread: at the preemption, from its
 *                           own context, kept until it runs again (preemptions
 *                           are bounded by the scheduler tick, not by I/O).
 *   iter.s/task           at the end of a recording, stacks of threads that
 *                         are still off CPU (their open interval has no
 *                         switch-in yet).
 *
 * Per switch the cost is a few hash-map operations; stacks are walked only
 * when a sample is due.
 *
 * The file reads by section: what both modes share (the thread table,
 * clocks, samples), the programs both modes attach (new threads, forks, the
 * timer), the switch-time accounting, the accounting at resumption, and the
 * end of a recording. User space attaches one mode's programs, never both
 * (collect.Plan.Attachment), and sets resume_mode to match.
 */
#include "types.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>

#define NSTATES 5
#define ST_ONCPU 0
#define ST_RUNNABLE 1
#define ST_SLEEPING 2
#define ST_DISK 3
#define ST_OTHER 4

#define MAX_STACK 127
#define SNAP_BYTES 512

#define TASK_INTERRUPTIBLE 0x1
#define TASK_UNINTERRUPTIBLE 0x2
#define TASK_DEAD 0x80
#define TASK_NOLOAD 0x400
#define PF_EXITING 0x4 /* task->flags: the task is exiting */
#define EEXIST 17

enum { EV_SAMPLE = 1, EV_EXIT = 2, EV_EXEC = 3, EV_TAIL = 4 };
/* SAMPLE_WALK: an off-CPU sample of walk mode, one nominal period in the
 * state the thread was in when walked. */
/* SAMPLE_THIN: an off-CPU sample of the resumption accounting that the
 * budget (off_cost_ns) could have left out: every state of it one period
 * (off_due). */
enum { SAMPLE_FINAL = 1, SAMPLE_CARRY = 2, SAMPLE_WALK = 4, SAMPLE_THIN = 8 };

enum {
	LOST_RINGBUF = 0,
	LOST_KSTACK,
	LOST_USTACK,
	LOST_SNAPSHOT,
	LOST_THREADS,
	LOST_PENDING, /* a due off-CPU sample was deferred */
	LOST_EXIT,
	LOST_STASH,
	LOST_SWITCH_OUT, /* a switch-out without the switch-in before it */
	LOST_SWITCH_IN,  /* a switch-in without the switch-out before it */
	/* Not a loss: a switch-in the kernel did not report, taken at
	 * sched_exit_tp in the thread's own context, with exact times and its
	 * stack. Counted in the same per-CPU array. */
	RECOVERED_SWITCH_IN,
	LOST_BUSY, /* a sample's buffer was in use by the program it interrupted */
	/* Walk mode: a thread's record that belonged to another thread (one
	 * that had the same id before it, tstate.born), found and replaced. */
	LOST_STALE,
	/* Not a loss: an off-CPU sample that came due beyond the CPU's
	 * budget (off_cost_ns), not taken (user space scales each thread's
	 * off-CPU samples to its exact time then). */
	DROPPED_OFF,
	/* A thread's CPU time after its exit record (exit_tails full). */
	LOST_TAIL,
	NLOST,
};

struct tstate {
	u64 in_ts;    /* last switch-in (valid when on_cpu) */
	u64 out_ts;   /* last switch-out (valid when !on_cpu) */
	u64 wake_ts;  /* wake-up after the last switch-out, 0 if none yet */
	u64 first_ts; /* start of this thread's accounting */
	u64 time[NSTATES];
	u64 acc[NSTATES]; /* off-CPU time not yet represented by a stack sample */
	u32 pid;
	u8 on_cpu;
	u8 out_state;
	u8 exited;
	u8 based; /* resume mode: last_exec, rd_out, nvcsw and nivcsw hold the thread's counters */
	u32 wake_cpu; /* the CPU whose run queue the thread was woken onto */
	u32 pad2;
	u64 last_exec; /* the kernel's CPU time of the thread (se.sum_exec_runtime) at its last switch, 0 if unknown */
	u64 last_runnable; /* runnable time accounted at its last switch-in */
	u64 rd_out;        /* its schedstat run_delay where the open interval began (switch-out; resume mode: resumption), 0 if unknown */
	/* Resume mode: its voluntary and involuntary context switches (nvcsw,
	 * nivcsw) at its latest resumption. */
	u64 nvcsw;
	u64 nivcsw;
	/* Walk mode: where the thread's latest stack was taken (its saved user
	 * ip, sp and bp, a hash of its kernel stack, its state), so that a walk
	 * that finds it at the same place adds to that sample rather than read
	 * its stack again. */
	u64 walk_ip, walk_sp, walk_bp, walk_kh;
	u32 walk_k;
	u32 walk_gen; /* walk mode: the walk that read it last (walk_instant) */
	/* Walk mode: its process's unwind tables (unw_proc.gen) when its latest
	 * stack was taken. */
	u32 walk_tables;
	/* Walk mode: the CPU whose run queue it was on at the latest walk
	 * (walk_steal's). */
	u32 walk_cpu;
	/* Walk mode: its saved user ip, sp and bp at the walk's instant, for a
	 * thread whose stack the second pass is to take: if it has moved on
	 * by then, its time goes to its latest sample at that place. */
	u64 inst_ip, inst_sp, inst_bp;
	/* Walk mode: its CPU time (se.sum_exec_runtime) when it was last
	 * found at the place of its latest stack (walk_near). */
	u64 walk_exec;
	/* Walk mode: the time the hypervisor had taken from that CPU (steal:
	 * its run queue's clock less its task clock) at the latest walk. */
	u64 walk_steal;
	u64 walk_ct; /* and its task clock then */
	/* Whose record this is: the thread's task->start_time, 0 until known
	 * (a thread entered by user space). A thread id the kernel gives to a
	 * new thread may find the record of an earlier thread with that id
	 * still there (written by a walk that raced with that thread's exit):
	 * its times are not the new thread's. */
	u64 born;
};

struct sample_event {
	u32 type;
	u32 pid;
	u32 tid;
	u32 flags;
	u64 ts;
	u64 weight[NSTATES];
	char comm[16];
	u64 ip, sp, bp;
	s32 klen; /* bytes of kstack, or negative errno */
	s32 ulen; /* bytes of ustack, or negative errno */
	u32 snap_len;
	u32 unwind; /* UNW_DONE | why the in-kernel unwinder stopped, 0 if it did not run */
	u64 kstack[MAX_STACK];
	u64 ustack[MAX_STACK];
	u8 snap[SNAP_BYTES];
};

struct exit_event {
	u32 type;
	u32 pid;
	u32 tid;
	u32 pad;
	u64 ts;
	struct tstate st;
	char comm[16];
};

/* The CPU time a thread ran after its exit record: sched_process_exit
 * comes before the exit path tears down the thread's memory, files and
 * links (Linux 6.16 moved it before exit_mm); that time is read from
 * the task's counter when the kernel frees it (on_task_free). */
struct tail_event {
	u32 type;
	u32 pid;
	u32 tid;
	u32 pad;
	u64 ts;
	u64 ns;
	char comm[16];
};

/* What on_task_exit leaves for on_task_free, keyed by the task's address. */
struct exit_tail {
	u32 pid;
	u32 tid;
	u64 exec; /* se.sum_exec_runtime as the exit record counted it */
	char comm[16];
};

struct pending {
	u32 tid;
	s32 klen;
	u64 weight[NSTATES];
	u64 kstack[MAX_STACK];
};

/* CLOCK_MONOTONIC minus the scheduler's clock (rq->clock), and the
 * scheduler's clock when that was measured: see sched_now. */
volatile u64 clock_off = 0;
volatile u64 clock_cal = 0;
#define CALIBRATE_NS 100000000ULL
/* How far the kernel's CPU time of a running thread can lag outside
 * __schedule (a tick at HZ=250). */
#define TICK_SLACK_NS 5000000ULL

/* Set by user space after loading, right before attaching. */
volatile u64 start_ns = 0;
/* Set by user space when the runnable part of an off-CPU interval comes from
 * the kernel's schedstat (sched_exit_tp attached, CONFIG_SCHED_INFO) and
 * sched_wakeup is not probed. */
volatile u8 use_rd = 0;
/* Set by user space when the whole accounting is done at sched_exit_tp, in
 * the context of the thread that resumes (see on_resume), instead of at
 * sched_switch: one program run per switch. In this mode a thread's record
 * keeps, as of its latest switch-in (in_ts): its CPU time (last_exec), its
 * schedstat run_delay (rd_out), its voluntary and involuntary switches
 * (nvcsw, nivcsw); based is 1 once those are set. */
volatile u8 resume_mode = 0;
/* Set by user space when no program runs at a switch: the threads' times
 * come from the kernel's counters, read by walk_states every sampling
 * period, and their off-CPU stacks from the same walk (see walk_states). */
volatile u8 walk_mode = 0;

/* The target processes, for a quick answer to "is this task ours?" on every
 * switch and wake-up of the machine: set by user space before attaching,
 * extended by sched_process_fork. n > MAX_TGIDS: too many, ask the targets
 * map. */
#define MAX_TGIDS 16
struct tgid_set {
	u32 n;
	u32 tgid[MAX_TGIDS];
};
/* How many target processes sched_process_fork has added: the walker reads
 * it (memory-mapped) at each walk and reads the target list again only when
 * it moved. */
volatile u32 target_forks = 0;
/* Set by user space before loading. */
const volatile u64 period_ns = 10101010;
/* Off-CPU time that one off-CPU stack sample stands for (collect.Plan's
 * OffCPUPeriodNs). */
const volatile u64 off_period_ns = 2525252;
/* The budget of off-CPU stack samples taken at a switch or a resumption,
 * per CPU: each costs this much of the CPU's credit, which grows with
 * time (up to OFF_BURST samples' worth); 0: no budget. A pool of hundreds
 * of threads that wake every millisecond makes one due every 2.5 ms each:
 * 80,000 stacks a second, which user space cannot read (most were lost)
 * and whose unwinding cost the target a third of its CPU. */
const volatile u64 off_cost_ns = 0;
#define OFF_BURST 64
const volatile u8 follow_forks = 0;
/* System-wide: every process is a target but wallprof's own (self_tgid),
 * and the swapper (tgid 0). */
const volatile u8 all_targets = 0;
const volatile u32 self_tgid = 0;
/* The reader is woken when this much of the ring is full (a quarter). */
const volatile u64 ring_wake = 2 << 20;
/* bench_cut, for measuring where a switch's BPF time goes (bench/, never in
 * use otherwise: the verifier removes the dead branches): on_resume returns
 * 6: at once (an empty program, in wallprof), 1: before the target check, 2: after it, 3: after the thread lookup, 4:
 * after reading the counters and the clock; 5: does it all and one more
 * thread lookup. The recording is then wrong. */
const volatile u8 bench_cut = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, u32);
	__type(value, u8);
} targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 32768);
	__type(key, u32);
	__type(value, struct tstate);
} threads SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct pending);
} pendings SEC(".maps");

/* The thread each CPU's latest reported switch went to, for sched_exit_tp to
 * notice a switch-in the kernel did not report. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, u32);
} cpu_in SEC(".maps");

/* Threads that exited and that the kernel has not freed yet (an RCU grace
 * period, milliseconds; under a flood of exits on two CPUs, 16384 were not
 * enough), by task address. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, u64);
	__type(value, struct exit_tail);
} exit_tails SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct tgid_set);
} tgids SEC(".maps");

/* Stacks of preempted threads, taken at the preemption, keyed by TID. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, u32);
	__type(value, struct sample_event);
} stash SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct sample_event);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NLOST);
	__type(key, u32);
	__type(value, u64);
} lost SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 8 << 20);
} events SEC(".maps");

/* A sample is built whole in a buffer of its context's slot and sent
 * packed (send_sample): its header, then klen bytes of kernel stack, ulen
 * of user stack and snap_len of stack snapshot, about a third of the whole
 * for a typical stack, so that the ring holds three times as many. One
 * slot per context that may interrupt another on a CPU: tracepoints, the
 * sampling timer, task iterators, the walk's BPF timer. packed holds
 * each slot's packed copy, with room for each part's length masked to
 * 1023 bytes (what the verifier bounds without fail). */
#define SLOT_TP 0
#define SLOT_TIMER 1
#define SLOT_ITER 2
#define SLOT_WTIMER 3
#define NSLOTS 4
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NSLOTS);
	__type(key, u32);
	__type(value, struct sample_event);
} build SEC(".maps");

#define PART_MASK 1023
struct packed_sample {
	/* The slot's buffers hold a sample being built (sample_buf to
	 * send_sample): a program that finds them so on its CPU interrupted
	 * or preempted the one building it, and drops its own sample
	 * (LOST_BUSY) rather than overwrite the other's. */
	u64 busy;
	u8 b[sizeof(struct sample_event) - sizeof(((struct sample_event *)0)->kstack) * 2 -
	     SNAP_BYTES + 3 * (PART_MASK + 1)];
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NSLOTS);
	__type(key, u32);
	__type(value, struct packed_sample);
} packed SEC(".maps");

/* The in-kernel unwinder's tables (doc/unwind.md), filled by user space:
 * rows of every loaded file in one array, each file's slice of it, and each
 * process's executable mappings sorted by address, in a slot of unw_maps.
 * Every table is an array searched through map lookups with keys, not
 * pointer arithmetic, so that the verifier need not track the searches'
 * bounds precisely and prunes their states. */
#define UNW_MAX_MAPS 256
#define UNW_MAX_PROCS 512
enum { UNW_NONE = 0, UNW_RSP, UNW_RBP, UNW_PLT, UNW_END, UNW_UNSUP, UNW_DEREF_RBP };
/* Or'ed into a kind: the caller's RBP is at RBP + 8*bp_off, not CFA + 8*bp_off. */
#define UNW_BP_AT_RBP 0x80
/* Or'ed into UNW_RSP or UNW_RBP: cfa_off is in 8-byte units (a frame over 64 KiB). */
#define UNW_CFA_SCALED 0x40
/* Why the unwinder stopped (sample_event.unwind, with UNW_DONE set). */
enum { UNWR_END = 0, UNWR_DEPTH, UNWR_READ, UNWR_RULE, UNWR_STACK, UNWR_INTERNAL };
#define UNW_DONE 0x100
/* The thread's pc lay in none of the mappings the tables know: they are
 * out of date (an exec, a dlopen) or the code is anonymous (JIT). */
#define UNW_NOMAP 0x200
/* In unwind_regs's result only: take the stack snapshot (unw_proc.go). */
#define UNW_SNAP 0x400

struct unw_row {
	u32 pc;      /* offset from the file's base */
	u16 cfa_off;
	u8 kind;
	signed char bp_off; /* caller's RBP at CFA + 8*bp_off; 0: RBP unchanged */
};

struct unw_file {
	u64 base;
	u32 start; /* index of its first row in unw_rows */
	u32 count;
	/* The bucket index, in the slots after the rows (two u32 per slot):
	 * entry j is the first row (from start) whose pc is at or after
	 * j << shift. It narrows the search to a bucket's few rows. */
	u32 buckets; /* entries; 0: no index */
	u32 shift;
};

struct unw_map {
	u64 start, end;
	u64 bias; /* ELF virtual address = address - bias */
	u32 file; /* 0: no table, follow the frame pointer */
	u32 pad;
};

struct unw_proc {
	u32 n;    /* mappings */
	u32 slot; /* its mappings are unw_maps[slot*UNW_MAX_MAPS ...] */
	/* runtime.cgocallback's code, in a Go program or library that C calls
	 * (0, 0: none): where a goroutine stack's walk continues on the C
	 * thread's stack. */
	u64 cgocb_lo, cgocb_hi;
	u64 goexit_lo, goexit_hi; /* runtime.goexit's code */
	/* 1: the process has Go code, whose frameless leaves user space
	 * repairs from the stack snapshot; 0: the walk is all there is, and
	 * the snapshot is not taken. */
	u32 go;
	/* Counts the loads of the process's entry (user space): a stack the
	 * walk unwound with older tables is read again. */
	u32 gen;
};

/* The Go runtime's layout (amd64, stable since Go 1.4): g.m, m.g0, and
 * g.sched.sp; cgocallback's frame on the system stack: 32 bytes, with the
 * caller's frame pointer at 24 and the return address into crosscall2 at
 * 32. */
#define GO_G_M 48
#define GO_M_G0 0
#define GO_G_SCHED_SP 56
#define GO_CGOCB_BP 24
#define GO_CGOCB_RA 32

/* Set by user space before loading: whether it fills the tables. */
const volatile u8 unwind_tables = 0;

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << 21); /* resized by user space before loading */
	__type(key, u32);
	__type(value, struct unw_row);
} unw_rows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, u32);
	__type(value, struct unw_file);
} unw_files SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, UNW_MAX_PROCS);
	__type(key, u32);
	__type(value, struct unw_proc);
} unw_procs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, UNW_MAX_PROCS * UNW_MAX_MAPS); /* 1 with FramePointersOnly */
	__type(key, u32);
	__type(value, struct unw_map);
} unw_maps SEC(".maps");

/* The frames being unwound: slot 0 for the tracepoints, 1 for the timer,
 * which can interrupt them. The task iterator, which may sleep and move
 * between CPUs, has unw_iter_frames.
 *
 * With them, the walk's window on the user stack (unw_win_read): one user
 * read costs ~100 ns in this kind of VM, whatever its size up to a few
 * hundred bytes, and a walk read two words a frame, 70% of a sample's
 * walk. UNW_WIN bytes from the first word the walk needs are read at once
 * and the frames above read from the copy, a new window read where a word
 * lies outside it. */
#define UNW_WIN 512
struct unw_frames {
	u64 pc[MAX_STACK];
	u64 win_base;
	u64 win_len; /* 0: no window (a new walk) */
	u8 win[UNW_WIN];
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, u32);
	__type(value, struct unw_frames);
} unw_frames SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct unw_frames);
} unw_iter_frames SEC(".maps");

/* Force an exception-free type export for bpf2go. */
const struct unw_row *unused_unw_row __attribute__((unused));
const struct unw_file *unused_unw_file __attribute__((unused));
const struct unw_proc *unused_unw_proc __attribute__((unused));
const struct unw_map *unused_unw_map __attribute__((unused));
const struct sample_event *unused_sample __attribute__((unused));
const struct exit_event *unused_exit __attribute__((unused));
const struct tail_event *unused_tail __attribute__((unused));

/* ======================================================================
 * Shared by both modes: clocks, the thread table, the ring buffer.
 * ====================================================================== */

/* A compiler barrier: stores before it are not moved after it. */
#define barrier() asm volatile("" ::: "memory")

static __always_inline void count_lost(u32 cause)
{
	u64 *v = bpf_map_lookup_elem(&lost, &cause);
	if (v)
		*v += 1;
}

/* task_rq is the run queue p is on (NULL where it cannot be read). */
static __always_inline struct rq *task_rq(struct task_struct *p)
{
	if (!bpf_core_field_exists(p->se.cfs_rq) || !bpf_core_field_exists(((struct cfs_rq *)0)->rq))
		return NULL;
	struct cfs_rq *cfs = p->se.cfs_rq;
	if (!cfs)
		return NULL;
	return cfs->rq;
}

/* rq_clock is the clock of the run queue p is on, as the scheduler last
 * updated it (0 where it cannot be read). */
static __always_inline u64 rq_clock(struct task_struct *p)
{
	struct rq *rq = task_rq(p);
	return rq ? rq->clock : 0;
}

/* rq_clocks reads the clocks of the run queue p is on. */
static __always_inline void rq_clocks(struct task_struct *p, u64 *clock, u64 *clock_task)
{
	struct rq *rq = task_rq(p);
	*clock = rq ? rq->clock : 0;
	*clock_task = rq ? rq->clock_task : 0;
}

/* sched_now is the time of a scheduler event on p's run queue, on
 * CLOCK_MONOTONIC. The scheduler updates its run queue's clock right before
 * a switch and a wake-up, so the time is read from there rather than from
 * the clock source (bpf_ktime_get_ns costs ~35 ns in these VMs, a third of a
 * switch's BPF time): the scheduler's clock, shifted to CLOCK_MONOTONIC by an
 * offset measured at a switch every CALIBRATE_NS. It is the clock the
 * scheduler charges CPU time with (se.sum_exec_runtime). */
static __always_inline u64 sched_now(struct task_struct *p, bool calibrate, u64 *raw)
{
	u64 rc = rq_clock(p);
	*raw = rc;
	if (!rc)
		return bpf_ktime_get_ns();
	u64 off = clock_off;
	if (!off) {
		if (!calibrate)
			return bpf_ktime_get_ns();
	} else if (!calibrate || rc - clock_cal < CALIBRATE_NS) {
		return rc + off;
	}
	off = bpf_ktime_get_ns() - rc;
	clock_off = off;
	clock_cal = rc;
	return rc + off;
}

/* queued_since_out is how long p has waited on a run queue since its last
 * switch-out, from the kernel's schedstat: what run_delay gained since then
 * (a wait that ended without running it: a migration) and, when rc (the run
 * queue's clock at its switch-in) is given, the wait in progress, which the
 * kernel adds to run_delay right after the sched_switch tracepoint. */
static __always_inline u64 queued_since_out(struct task_struct *p, struct tstate *st, u64 rc)
{
	if (!bpf_core_field_exists(p->sched_info.run_delay))
		return 0;
	u64 run = 0;
	u64 rd = p->sched_info.run_delay;
	if (st->rd_out && rd > st->rd_out)
		run = rd - st->rd_out;
	u64 lq = p->sched_info.last_queued;
	if (rc && lq && rc > lq)
		run += rc - lq;
	return run;
}

enum { NEW_RUNNING, NEW_OFF, NEW_WOKEN, NEW_THREAD };

/* is_target reports whether tgid is a target process. */
static __always_inline bool is_target(u32 tgid)
{
	if (all_targets)
		return tgid != 0 && tgid != self_tgid;
	u32 zero = 0;
	struct tgid_set *set = bpf_map_lookup_elem(&tgids, &zero);
	if (!set || set->n > MAX_TGIDS)
		return bpf_map_lookup_elem(&targets, &tgid) != NULL;
	u32 n = set->n;
	for (u32 i = 0; i < MAX_TGIDS && i < n; i++)
		if (set->tgid[i] == tgid)
			return true;
	return false;
}

/* lookup_thread returns the state of tid, creating it when tid belongs to a
 * target process. A thread first seen mid-flight is accounted from start_ns,
 * the beginning of the recording. Tasks of other processes cost no map
 * lookup. */
static __always_inline struct tstate *lookup_thread(u32 tid, u32 tgid, u64 now, int mode)
{
	if (tid == 0 || !is_target(tgid))
		return NULL;
	struct tstate *st = bpf_map_lookup_elem(&threads, &tid);
	if (st)
		return st;
	struct tstate init = {};
	init.pid = tgid;
	init.first_ts = start_ns;
	switch (mode) {
	case NEW_RUNNING:
		init.on_cpu = 1;
		init.in_ts = start_ns;
		break;
	case NEW_WOKEN:
		init.out_ts = start_ns;
		init.out_state = ST_SLEEPING;
		break;
	case NEW_THREAD:
		init.first_ts = now;
		init.out_ts = now;
		init.out_state = ST_RUNNABLE;
		break;
	default:
		init.out_ts = start_ns;
		init.out_state = ST_RUNNABLE;
	}
	long err = bpf_map_update_elem(&threads, &tid, &init, BPF_NOEXIST);
	if (err && err != -EEXIST) {
		count_lost(LOST_THREADS);
		return NULL;
	}
	return bpf_map_lookup_elem(&threads, &tid);
}

/* renew_thread replaces tid's record, which belonged to an earlier thread
 * with that id, by a new thread's, as lookup_thread enters one created at
 * now (not based: the caller bases it). */
static __always_inline struct tstate *renew_thread(u32 tid, u32 tgid, u64 now)
{
	count_lost(LOST_STALE);
	struct tstate init = {};
	init.pid = tgid;
	init.first_ts = now;
	init.out_ts = now;
	init.out_state = ST_RUNNABLE;
	if (bpf_map_update_elem(&threads, &tid, &init, BPF_ANY)) {
		count_lost(LOST_THREADS);
		return NULL;
	}
	return bpf_map_lookup_elem(&threads, &tid);
}

/* task_cpu is the CPU whose run queue the task is on. */
static __always_inline u32 task_cpu(struct task_struct *p)
{
	if (bpf_core_field_exists(p->thread_info.cpu))
		return p->thread_info.cpu; /* a trusted pointer: a plain load */
	return BPF_CORE_READ((struct task_struct___cpu *)p, cpu);
}

static __always_inline u8 classify(bool preempt, unsigned int prev_state)
{
	if (preempt || prev_state == 0)
		return ST_RUNNABLE;
	if ((prev_state & TASK_UNINTERRUPTIBLE) && !(prev_state & TASK_NOLOAD))
		return ST_DISK;
	if (prev_state & (TASK_INTERRUPTIBLE | TASK_UNINTERRUPTIBLE))
		return ST_SLEEPING;
	return ST_OTHER;
}

/* read_user_regs fills ip/sp/bp from the thread's saved user registers. */
static __always_inline void read_user_regs(struct task_struct *task, struct sample_event *e)
{
	/* A BTF pointer: plain loads (the verifier makes them fault-safe),
	 * not a helper call each. */
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	e->ip = regs->ip;
	e->sp = regs->sp;
	e->bp = regs->bp;
}

/* snapshot_current copies the user stack memory at sp, for the user-space
 * unwinder that recovers frames the frame-pointer walk skips. */
static __always_inline void snapshot_current(struct sample_event *e)
{
	e->snap_len = 0;
	if (!e->sp)
		return;
	if (bpf_probe_read_user(e->snap, SNAP_BYTES, (void *)e->sp) == 0) {
		e->snap_len = SNAP_BYTES;
		return;
	}
	/* The stack may end before SNAP_BYTES: read up to the page end. */
	u32 n = 4096 - (e->sp & 4095);
	if (n > SNAP_BYTES)
		n = SNAP_BYTES;
	if (bpf_probe_read_user(e->snap, n, (void *)e->sp) == 0)
		e->snap_len = n;
	else
		count_lost(LOST_SNAPSHOT);
}

/* ======================================================================
 * The in-kernel unwinder: .eh_frame rows where the file has them, the frame
 * pointer elsewhere (doc/unwind.md).
 * ====================================================================== */

/* What a walk keeps between its frames' lookups: the process's mappings,
 * and the mapping of the last frame looked up with its file's table (most
 * frames lie in the same file as the one before). */
struct unw_cache {
	u32 map_first, map_n; /* the process's mappings in unw_maps */
	u64 m_start, m_end;   /* m_end 0: none */
	u64 m_off;            /* pc - m_off: the offset the file's rows are keyed by */
	u32 f_start, f_count; /* f_count 0: no table, the frame pointer */
	u32 f_buckets, f_shift;
};

struct unw_ctx {
	u64 ip, sp, bp;
	u32 tgid;
	u32 n;
	u32 slot;
	u32 why;
	/* The thread whose stack is walked from a task iterator (another
	 * process's memory: bpf_copy_from_user_task); NULL: the current one. */
	struct task_struct *task;
	u64 g;    /* R14 at the sample: the goroutine, in Go code */
	u64 prev; /* the previous frame's pc */
	u32 jumped;
	u32 gen; /* the process's tables (unw_proc.gen): the row cache's key */
	u32 go;   /* the process is a Go program (unw_proc.go) */
	s32 idx0; /* frame 0's unw_lookup result */
	u64 cgocb_lo, cgocb_hi, goexit_lo, goexit_hi; /* from the process's entry */
	struct unw_cache k;
};

/* The row cache: the outcome of unw_lookup at a pc of a process's tables,
 * per CPU and slot (the timer's interrupts the tracepoints'). A thread on
 * a CPU comes back to the same few return addresses sample after sample,
 * and the searches (of the mappings, then of the rows: each step of a
 * bpf_loop an indirect call) were most of a sample's time: 3 of its 4 us
 * at 999 Hz. Keyed by the process's gen, which user space makes new at
 * every load of its tables (a table that arrives later, an exec, a process
 * id reused): an entry stays right for as long as it can match.
 * Four ways a set: direct-mapped (128 entries), a CPU-bound loop's ~30
 * leaf pcs and its return addresses collided, and 5% of the lookups missed
 * for as long as it ran (a miss is a whole search). */
#define UNW_RC_WAYS 4
#define UNW_RC_SETS 64
#define UNW_RC_SET_BITS 6
struct unw_rc_entry {
	u64 pc;
	u32 tgid;
	u32 gen; /* 0: empty */
	s32 idx; /* unw_lookup's result: -1 no table, -2 no mapping */
	struct unw_row row; /* the row, when idx >= 0 */
	u32 pad;
};
struct unw_rcache {
	struct unw_rc_entry e[UNW_RC_SETS * UNW_RC_WAYS];
	u8 next[UNW_RC_SETS]; /* the way a set's next miss replaces */
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, u32);
	__type(value, struct unw_rcache);
} unw_rcache SEC(".maps");

/* A binary search's state: the first element after pc lies in
 * [base, base+len). Each step is a bpf_loop iteration, so that the verifier
 * checks one step rather than every iteration of a loop. */
struct unw_search {
	u64 pc;
	u32 base, len;
	u32 bad; /* a lookup failed */
};

/* unw_mid sets key to the middle of s's range; false when s is done. */
static __always_inline bool unw_mid(struct unw_search *s, u32 *key)
{
	if (s->len == 0)
		return false;
	*key = s->base + s->len / 2;
	return true;
}

/* unw_narrow keeps the half of s's range after key (before: the element at
 * key lies at or before pc) or before it; it stops the loop (1) when the
 * element could not be looked up. */
static __always_inline long unw_narrow(struct unw_search *s, u32 key, void *elem, bool before)
{
	if (!elem) {
		s->bad = 1;
		return 1;
	}
	u32 half = key - s->base;
	if (before) {
		s->base = key + 1;
		s->len -= half + 1;
	} else {
		s->len = half;
	}
	return 0;
}

/* The binary search steps taken inline before bpf_loop takes over. */
#define UNW_INLINE_STEPS 4

/* unw_maps_step: the first mapping whose end is after pc. */
static long unw_maps_step(u64 i, void *arg)
{
	struct unw_search *s = arg;
	u32 key;
	if (!unw_mid(s, &key))
		return 1;
	struct unw_map *m = bpf_map_lookup_elem(&unw_maps, &key);
	return unw_narrow(s, key, m, m && m->end <= s->pc);
}

/* unw_rows_step: the first row whose pc is after s->pc (an offset). */
static long unw_rows_step(u64 i, void *arg)
{
	struct unw_search *s = arg;
	u32 key;
	if (!unw_mid(s, &key))
		return 1;
	struct unw_row *r = bpf_map_lookup_elem(&unw_rows, &key);
	return unw_narrow(s, key, r, r && r->pc <= (u32)s->pc);
}

/* unw_ctx_init reads process p's entry into c; false without one. */
static __always_inline bool unw_ctx_init(struct unw_ctx *c, u32 tgid)
{
	struct unw_proc *p = bpf_map_lookup_elem(&unw_procs, &tgid);
	if (!p)
		return false;
	c->k.map_first = p->slot * UNW_MAX_MAPS;
	c->k.map_n = p->n;
	c->gen = p->gen;
	c->go = p->go;
	c->cgocb_lo = p->cgocb_lo;
	c->cgocb_hi = p->cgocb_hi;
	c->goexit_lo = p->goexit_lo;
	c->goexit_hi = p->goexit_hi;
	return true;
}

/* unw_map_at makes the mapping that holds pc, and its file's table, k's
 * current one; false (and none) when no mapping holds pc. */
static __always_inline bool unw_map_at(struct unw_cache *k, u64 pc)
{
	k->m_start = k->m_end = 0;
	k->f_count = 0;
	/* The searches keep a base and a length that start from map values,
	 * never from constants: the verifier then knows them only by their
	 * ranges, so it neither marks them precise nor tells the iterations
	 * apart, and it prunes the paths of the search (a search from 0 would
	 * be verified once per path: 2^depth). */
	/* The first mapping that ends after pc (user space keeps n <= 256). */
	u32 first = k->map_first, end = first + k->map_n;
	struct unw_search s = {.pc = pc, .base = first, .len = k->map_n};
	bpf_loop(9, unw_maps_step, &s, 0);
	if (s.bad || s.len || s.base >= end)
		return false;
	u32 key = s.base;
	struct unw_map *m = bpf_map_lookup_elem(&unw_maps, &key);
	if (!m || m->start > pc)
		return false;
	k->m_start = m->start;
	k->m_end = m->end;
	u32 fid = m->file;
	struct unw_file *f = fid ? bpf_map_lookup_elem(&unw_files, &fid) : NULL;
	if (f) {
		k->m_off = m->bias + f->base;
		k->f_start = f->start;
		k->f_count = f->count;
		k->f_buckets = f->buckets;
		k->f_shift = f->shift;
	}
	return true;
}

/* unw_bucket returns entry j of the bucket index whose first slot is at;
 * ok is cleared when it cannot be read. */
static __always_inline u32 unw_bucket(u32 at, u64 j, bool *ok)
{
	u32 key = at + (u32)(j >> 1);
	u32 *v = bpf_map_lookup_elem(&unw_rows, &key);
	if (!v) {
		*ok = false;
		return 0;
	}
	return (j & 1) ? v[1] : v[0];
}

/* unw_row_at returns the index in unw_rows of the row in effect at offset
 * rel of the table of count rows at start, with its bucket index (buckets
 * entries of 2^shift bytes of code; none: 0); -1 where no row covers rel. */
static __always_inline int unw_row_at(u32 start, u32 count, u32 buckets, u32 shift, u64 rel)
{
	u32 lo = 0, hi = count;
	if (buckets) {
		/* The first row after rel lies in [index[j], index[j+1]]. */
		u64 j = rel >> (shift & 31);
		u32 at = start + count;
		bool ok = true;
		if (j + 1 < buckets) {
			lo = unw_bucket(at, j, &ok);
			hi = unw_bucket(at, j + 1, &ok) + 1;
		} else {
			lo = unw_bucket(at, buckets - 1, &ok);
		}
		if (!ok || lo > count)
			return -1;
		if (hi > count)
			hi = count;
	}
	/* The first row after rel; the one before it is in effect. */
	struct unw_search s = {.pc = rel, .base = start + lo, .len = hi > lo ? hi - lo : 0};
	/* A bucket holds a few rows: the first steps inline (a bpf_loop
	 * step is an indirect call), the rest of a crowded one by bpf_loop. */
	for (int i = 0; i < UNW_INLINE_STEPS; i++)
		if (unw_rows_step(i, &s))
			break;
	if (s.len && !s.bad)
		bpf_loop(25, unw_rows_step, &s, 0);
	if (s.bad || s.len || s.base <= start)
		return -1;
	return (int)(s.base - 1);
}

/* unw_lookup returns the index in unw_rows of the row in effect at pc, with
 * the mappings and the last table that k holds (moved to pc's mapping if it
 * lies in another); -1 where no table covers pc, -2 where no mapping holds
 * it. A global function: the verifier checks it once, with whatever k
 * holds, rather than for every state of the walk that reaches it (inline,
 * the walk's cache multiplied those states by four). */
__attribute__((noinline)) int unw_lookup(struct unw_cache *k, u64 pc)
{
	if (!k)
		return -2;
	if ((pc < k->m_start || pc >= k->m_end) && !unw_map_at(k, pc))
		return -2;
	u32 count = k->f_count;
	if (!count)
		return -1;
	u64 rel = pc - k->m_off;
	if (rel >> 32)
		return -1;
	return unw_row_at(k->f_start, count, k->f_buckets, k->f_shift, rel);
}

/* unw_lookup_row is unw_lookup through the row cache of c's slot, with
 * the row copied to *row (found or not, the walk goes on with its own copy
 * on the stack: the same state for the verifier either way, and the row's
 * page of unw_rows, 16 MiB read at random, untouched on a hit). A global
 * function, as unw_lookup: the verifier checks it once. */
__attribute__((noinline)) int unw_lookup_row(struct unw_ctx *c, u64 pc, struct unw_row *row)
{
	if (!c || !row)
		return -2;
	struct unw_rc_entry *ce = NULL;
	u32 slot = c->slot;
	struct unw_rcache *rc = bpf_map_lookup_elem(&unw_rcache, &slot);
	if (rc && c->gen) {
		/* Fibonacci hashing: a function's pcs, a few bytes apart,
		 * spread over the sets. */
		u32 set = (u32)(((pc ^ ((u64)c->tgid << 40)) * 0x9E3779B97F4A7C15ULL) >> (64 - UNW_RC_SET_BITS));
		set &= UNW_RC_SETS - 1;
#pragma unroll
		for (u32 w = 0; w < UNW_RC_WAYS; w++) {
			ce = &rc->e[set * UNW_RC_WAYS + w];
			if (ce->pc == pc && ce->tgid == c->tgid && ce->gen == c->gen) {
				*row = ce->row;
				return ce->idx;
			}
		}
		u32 way = rc->next[set] & (UNW_RC_WAYS - 1);
		rc->next[set] = way + 1;
		ce = &rc->e[set * UNW_RC_WAYS + way];
	}
	int i = unw_lookup(&c->k, pc);
	struct unw_row *r = NULL;
	if (i >= 0) {
		u32 key = i;
		r = bpf_map_lookup_elem(&unw_rows, &key);
		if (!r)
			i = -1;
	}
	if (r)
		*row = *r;
	if (ce) {
		ce->gen = 0; /* written whole before it can match */
		ce->pc = pc;
		ce->tgid = c->tgid;
		ce->idx = i;
		if (r)
			ce->row = *r;
		ce->gen = c->gen;
	}
	return i;
}

/* unw_find returns the row in effect at pc, or NULL where no table covers
 * it (c's mapping moves to pc's, unless the row cache knew it), in *row
 * when it comes from the cache; *idx is unw_lookup's result. cache:
 * through the row cache of c's slot (not from a task iterator, which may
 * move between CPUs). */
static __always_inline struct unw_row *unw_find(struct unw_ctx *c, u64 pc, int *idx, bool cache, struct unw_row *row)
{
	if (cache) {
		int i = unw_lookup_row(c, pc, row);
		*idx = i;
		return i >= 0 ? row : NULL;
	}
	int i = unw_lookup(&c->k, pc);
	*idx = i;
	if (i < 0)
		return NULL;
	u32 key = i;
	return bpf_map_lookup_elem(&unw_rows, &key);
}

/* unw_read reads 8 bytes of user memory at addr: the current thread's, or
 * task's (sleepable programs only; task is a constant NULL elsewhere, and
 * the call is compiled out). */
static __always_inline long unw_read(u64 *dst, u64 addr, struct task_struct *task)
{
	if (task)
		return bpf_copy_from_user_task(dst, 8, (void *)addr, task, 0);
	return bpf_probe_read_user(dst, 8, (void *)addr);
}

/* unw_win_hit takes the word at addr from fr's window if it holds it;
 * otherwise it empties the window (the caller reads a new one). */
static __always_inline bool unw_win_hit(struct unw_frames *fr, u64 addr, u64 *dst)
{
	u64 off = addr - fr->win_base;
	if (addr >= fr->win_base && off <= UNW_WIN - 8 && off + 8 <= fr->win_len) {
		*dst = *(u64 *)(fr->win + off);
		return true;
	}
	fr->win_len = 0;
	return false;
}

/* unw_win_short is the window's length where the whole one could not be
 * read: up to the end of addr's page, 0 if that is under a word or not
 * shorter. */
static __always_inline u64 unw_win_short(u64 addr)
{
	u64 len = 4096 - (addr & 4095);
	return len >= UNW_WIN || len < 8 ? 0 : len;
}

/* unw_win_moved records the window just read at addr (len bytes) and takes
 * its first word. */
static __always_inline void unw_win_moved(struct unw_frames *fr, u64 addr, u64 len, u64 *dst)
{
	fr->win_base = addr;
	fr->win_len = len;
	*dst = *(u64 *)fr->win;
}

/* unw_win_read reads the 8 bytes of the current thread's user memory at
 * addr through fr's window (see struct unw_frames), which it moves to addr
 * when they lie outside it; 0 or a negative errno. Where the window's
 * bytes cannot all be read (the stack's top page ends before them) it
 * takes those up to the page's end, and where not even that, the word
 * alone. A global function: the verifier checks it once. */
__attribute__((noinline)) int unw_win_read(struct unw_frames *fr, u64 addr, u64 *dst)
{
	if (!fr || !dst)
		return -14; /* EFAULT */
	if (unw_win_hit(fr, addr, dst))
		return 0;
	u64 len = UNW_WIN;
	if (bpf_probe_read_user(fr->win, UNW_WIN, (void *)addr)) {
		len = unw_win_short(addr);
		/* Within one page the word itself cannot be read. */
		if (!len || bpf_probe_read_user(fr->win, len, (void *)addr))
			return bpf_probe_read_user(dst, 8, (void *)addr);
	}
	unw_win_moved(fr, addr, len, dst);
	return 0;
}

/* unw_win_read_task is unw_win_read for another thread's memory, from a
 * sleepable program: each bpf_copy_from_user_task is a remote access to
 * the process's memory (its pages looked up and pinned, ~1 us here), a
 * fifth of wallprof's CPU recording a busy server when the walk read word
 * by word. A static function: its task argument is verified as the
 * caller's, on every kernel that has the helper. */
static __attribute__((noinline)) int unw_win_read_task(struct unw_frames *fr, u64 addr, u64 *dst, struct task_struct *task)
{
	if (!fr || !dst || !task)
		return -14; /* EFAULT */
	if (unw_win_hit(fr, addr, dst))
		return 0;
	u64 len = UNW_WIN;
	if (bpf_copy_from_user_task(fr->win, UNW_WIN, (void *)addr, task, 0)) {
		len = unw_win_short(addr);
		if (!len || bpf_copy_from_user_task(fr->win, len, (void *)addr, task, 0))
			return bpf_copy_from_user_task(dst, 8, (void *)addr, task, 0);
	}
	unw_win_moved(fr, addr, len, dst);
	return 0;
}

/* unw_read_stack is unw_read for the words of the stack that the walk
 * steps through: through fr's window. */
static __always_inline long unw_read_stack(u64 *dst, u64 addr, struct task_struct *task, struct unw_frames *fr)
{
	if (task)
		return unw_win_read_task(fr, addr, dst, task);
	return unw_win_read(fr, addr, dst);
}

/* unw_cgo_jump continues a walk that reached the bottom of the goroutine
 * stack of a call from C into Go (Go before 1.26 or so): the frame before
 * was runtime.cgocallback's copy on the goroutine stack, whose return
 * address is the goroutine's runtime.goexit, while the C code that called
 * crosscall2 lies on the thread's system stack, where cgocallback left its
 * SP in m.g0.sched.sp. It moves c there (once), to crosscall2, and returns
 * true; false where it does not apply. */
static __always_inline bool unw_cgo_jump(struct unw_ctx *c, struct task_struct *task)
{
	if (c->jumped || !c->g)
		return false;
	if (!c->cgocb_lo || c->prev < c->cgocb_lo || c->prev >= c->cgocb_hi)
		return false;
	if (c->ip - 1 < c->goexit_lo || c->ip - 1 >= c->goexit_hi)
		return false;
	u64 m, g0, sp, ra, bp;
	if (unw_read(&m, c->g + GO_G_M, task) || !m || unw_read(&g0, m + GO_M_G0, task) || !g0 || g0 == c->g ||
	    unw_read(&sp, g0 + GO_G_SCHED_SP, task) || !sp || unw_read(&ra, sp + GO_CGOCB_RA, task) || !ra ||
	    unw_read(&bp, sp + GO_CGOCB_BP, task))
		return false;
	c->jumped = 1;
	c->prev = c->ip;
	c->ip = ra;
	c->sp = sp + GO_CGOCB_RA + 8;
	c->bp = bp;
	return true;
}

/* unw_step_in records the frame at c->ip in fr and moves c to its caller;
 * it returns 1 to stop (c->why says why). */
static __always_inline long unw_step_in(u64 i, struct unw_ctx *c, struct unw_frames *fr, struct task_struct *task,
					bool cache)
{
	if (!fr) {
		c->why = UNWR_INTERNAL;
		return 1;
	}
	/* Frame i is recorded in the loop's iteration i. The index is the
	 * loop's, which the verifier knows only by its range, rather than a
	 * count in c, which it would know exactly and so verify this
	 * function once per frame. */
	if (i >= MAX_STACK) {
		c->why = UNWR_DEPTH;
		return 1;
	}
	if (!i)
		fr->win_len = 0; /* a new walk: the window is another's */
	if (i)
		unw_cgo_jump(c, task); /* in place of a goexit that is not the bottom */
	fr->pc[i] = c->ip;
	c->n = i + 1;
	u32 n = i;
	/* A return address may be just past its function's last instruction. */
	u64 pc = n ? c->ip - 1 : c->ip;
	int idx;
	struct unw_row rowbuf = {};
	struct unw_row *r = unw_find(c, pc, &idx, cache, &rowbuf);
	if (!n)
		c->idx0 = idx;
	u8 kind = r ? r->kind : UNW_NONE;
	u8 bp_at_rbp = kind & UNW_BP_AT_RBP;
	u64 cfa_off = r ? r->cfa_off : 0;
	if (kind & UNW_CFA_SCALED)
		cfa_off *= 8;
	kind &= ~(UNW_BP_AT_RBP | UNW_CFA_SCALED);
	u64 cfa, ra, bp = c->bp;
	switch (kind) {
	case UNW_NONE:
		/* The frame pointer: Go and JIT code, code without tables. */
		if (!c->bp) {
			c->why = UNWR_END;
			return 1;
		}
		/* Not "above the stack pointer": Go's frame pointers lead from
		 * the system stack (g0) to the goroutine's and back, and from C
		 * to Go across cgo calls, wherever those stacks lie. */
		if (c->bp & 7) {
			c->why = UNWR_STACK;
			return 1;
		}
		if (unw_read_stack(&bp, c->bp, task, fr)) {
			c->why = UNWR_READ;
			return 1;
		}
		cfa = c->bp + 16;
		break;
	case UNW_RSP:
		cfa = c->sp + cfa_off;
		break;
	case UNW_RBP:
		cfa = c->bp + cfa_off;
		break;
	case UNW_PLT:
		cfa = c->sp + 8 + (((c->ip & 15) >= r->cfa_off) ? 8 : 0);
		break;
	case UNW_DEREF_RBP:
		if (unw_read_stack(&cfa, c->bp + (s64)(short)r->cfa_off, task, fr)) {
			c->why = UNWR_READ;
			return 1;
		}
		break;
	case UNW_END:
		c->why = UNWR_END;
		return 1;
	default:
		c->why = UNWR_RULE;
		return 1;
	}
	if (cfa <= c->sp && n && kind != UNW_NONE) {
		/* The stack grows down: a caller's frame lies above. */
		c->why = UNWR_STACK;
		return 1;
	}
	if (unw_read_stack(&ra, cfa - 8, task, fr)) {
		c->why = UNWR_READ;
		return 1;
	}
	if (r && kind != UNW_NONE && (r->bp_off || bp_at_rbp)) {
		u64 at = (bp_at_rbp ? c->bp : cfa) + (s64)r->bp_off * 8;
		if (unw_read_stack(&bp, at, task, fr)) {
			c->why = UNWR_READ;
			return 1;
		}
	}
	if (!ra) {
		c->why = UNWR_END;
		return 1;
	}
	c->prev = c->ip;
	c->ip = ra;
	c->sp = cfa;
	c->bp = bp;
	return 0;
}

static long unw_step(u64 i, void *arg)
{
	struct unw_ctx *c = arg;
	u32 slot = c->slot;
	return unw_step_in(i, c, bpf_map_lookup_elem(&unw_frames, &slot), NULL, true);
}

static long unw_step_task(u64 i, void *arg)
{
	struct unw_ctx *c = arg;
	u32 zero = 0;
	return unw_step_in(i, c, bpf_map_lookup_elem(&unw_iter_frames, &zero), c->task, false);
}

/* unwind_regs walks the user stack of process tgid from ip, sp and bp into
 * unw_frames[slot]. It returns the frame count in the low 16 bits and
 * UNW_DONE, UNW_NOMAP and why it stopped (UNWR_*) above them, or 0 when the
 * process has no tables. A global function: the verifier checks it once,
 * on its own, rather than at every place a stack is taken (which made
 * loading the programs take ~0.7 s of CPU). */
__attribute__((noinline)) int unwind_regs(u64 ip, u64 sp, u64 bp, u64 g, u64 tgid_slot)
{
	u32 tgid = tgid_slot >> 32, slot = (u32)tgid_slot;
	struct unw_ctx c = {.ip = ip, .sp = sp, .bp = bp, .tgid = tgid, .slot = slot, .why = UNWR_DEPTH, .g = g};
	if (!unw_ctx_init(&c, tgid))
		return 0;
	u32 snap = c.go ? UNW_SNAP : 0;
	bpf_loop(MAX_STACK, unw_step, &c, 0);
	u32 nomap = c.idx0 == -2 ? UNW_NOMAP : 0;
	u32 n = c.n;
	if (n > MAX_STACK)
		n = MAX_STACK;
	return (int)(n | ((UNW_DONE | nomap | snap | c.why) << 16));
}

/* unwind_user fills e->ustack from the registers in e with the tables of
 * e's process; it returns false (and leaves e alone) when the process has
 * none. */
static __always_inline bool unwind_user(struct sample_event *e, u32 slot)
{
	if (!unwind_tables || !e->ip)
		return false;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	u32 r = (u32)unwind_regs(e->ip, e->sp, e->bp, regs->r14, (u64)e->pid << 32 | slot);
	if (!r)
		return false;
	struct unw_frames *fr = bpf_map_lookup_elem(&unw_frames, &slot);
	if (!fr)
		return false;
	/* The frames walked, not the whole buffer: less of the workload's
	 * cache per sample. */
	u32 n = r & 0xffff;
	if (n > MAX_STACK)
		n = MAX_STACK;
	if (n)
		bpf_probe_read_kernel(e->ustack, n * 8, fr->pc);
	e->ulen = n * 8;
	e->unwind = (r >> 16) & ~UNW_SNAP;
	/* A whole walk needs no repair: the snapshot is only for Go's
	 * frameless leaves, and for walks that stopped early. */
	if (!(r & (UNW_SNAP << 16)) && ((r >> 16) & 0xff) == UNWR_END)
		e->snap_len = 0;
	else
		snapshot_current(e);
	return true;
}

/* fill_user takes the current thread's user stack, registers and snapshot.
 * slot is the unwinder's scratch slot: 1 in the timer, 0 elsewhere. */
static __always_inline void fill_user_slot(void *ctx, struct sample_event *e, u32 slot)
{
	read_user_regs(bpf_get_current_task_btf(), e);
	e->unwind = 0;
	if (!unwind_user(e, slot)) {
		e->ulen = bpf_get_stack(ctx, e->ustack, sizeof(e->ustack), BPF_F_USER_STACK);
		if (e->ulen < 0)
			count_lost(LOST_USTACK);
		snapshot_current(e);
	}
}

static __always_inline void fill_user(void *ctx, struct sample_event *e)
{
	fill_user_slot(ctx, e, 0);
}

static __always_inline void fill_header(struct sample_event *e, u32 flags)
{
	u64 id = bpf_get_current_pid_tgid();
	e->type = EV_SAMPLE;
	e->pid = id >> 32;
	e->tid = (u32)id;
	e->flags = flags;
	e->unwind = 0;
	e->ts = bpf_ktime_get_ns();
	/* Two loads from the task (a BTF pointer), not a helper call: the
	 * kernel keeps comm NUL-terminated. */
	struct task_struct *task = bpf_get_current_task_btf();
	u64 *src = (u64 *)task->comm, *dst = (u64 *)e->comm;
	dst[0] = src[0];
	dst[1] = src[1];
}

/* sample_buf is the buffer a sample is built in, in context slot, or NULL
 * (counted lost) while it holds another; send_sample gives it back. */
static __always_inline struct sample_event *sample_buf(u32 slot)
{
	struct packed_sample *p = bpf_map_lookup_elem(&packed, &slot);
	if (!p)
		return NULL;
	if (p->busy) {
		count_lost(LOST_BUSY);
		return NULL;
	}
	/* A ring too full to take a whole sample: lost before its stacks are
	 * read, rather than after (a pool of threads waking every
	 * millisecond, accounted at each resumption, had most of its samples
	 * lost, each unwound first: a third of its CPU time). */
	if (bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) + sizeof(struct sample_event) + 8 > 4 * ring_wake) {
		count_lost(LOST_RINGBUF);
		return NULL;
	}
	struct sample_event *e = bpf_map_lookup_elem(&build, &slot);
	if (e)
		p->busy = 1;
	return e;
}

#define SAMPLE_HEADER __builtin_offsetof(struct sample_event, kstack)

/* send_sample sends e, built in slot's buffer, packed: the header and the
 * bytes of its stacks and snapshot that were filled. wake: wake the reader
 * when the ring is filling up (it also polls), or let the ring decide. */
static __always_inline void send_sample(struct sample_event *e, u32 slot, bool wake)
{
	struct packed_sample *p = bpf_map_lookup_elem(&packed, &slot);
	if (!p)
		return;
	u8 *out = p->b;
	/* Without branches (each would double the states the verifier
	 * walks at every call): a negative length (an errno) is 0 bytes; the
	 * compiler may know the lengths' bounds where the verifier does not,
	 * so they are hidden from it, then masked. */
	s64 k = e->klen, u = e->ulen;
	u64 kl = (u64)(k & ~(k >> 63)), ul = (u64)(u & ~(u >> 63)), sl = e->snap_len;
	asm volatile("" : "+r"(kl), "+r"(ul), "+r"(sl));
	kl &= PART_MASK;
	ul &= PART_MASK;
	sl &= PART_MASK;
	bpf_probe_read_kernel(out, SAMPLE_HEADER, e);
	u64 off = SAMPLE_HEADER;
	bpf_probe_read_kernel(out + off, kl, e->kstack);
	off += kl;
	bpf_probe_read_kernel(out + off, ul, e->ustack);
	off += ul;
	bpf_probe_read_kernel(out + off, sl, e->snap);
	off += sl;
	u64 flags = 0;
	if (wake)
		flags = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) > ring_wake ? BPF_RB_FORCE_WAKEUP
										  : BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_output(&events, out, off, flags))
		count_lost(LOST_RINGBUF);
	p->busy = 0;
}

/* emit_current_sample sends a sample of the current thread's stacks.
 * kernel: whether it may be in the kernel (the timer knows when it
 * interrupted user code: its kernel stack is empty, and bpf_get_stack would
 * only zero the buffer, a kilobyte of the workload's cache per sample). */
static __always_inline void emit_current_sample_slot(void *ctx, u64 *w, u32 slot, bool kernel, u32 flags)
{
	struct sample_event *e = sample_buf(slot);
	if (!e)
		return;
	fill_header(e, flags);
#pragma unroll
	for (int i = 0; i < NSTATES; i++)
		e->weight[i] = w[i];
	e->klen = 0;
	if (kernel) {
		e->klen = bpf_get_stack(ctx, e->kstack, sizeof(e->kstack), 0);
		if (e->klen < 0)
			count_lost(LOST_KSTACK);
	}
	fill_user_slot(ctx, e, slot);
	send_sample(e, slot, true);
}

static __always_inline void emit_current_sample(void *ctx, u64 *w)
{
	emit_current_sample_slot(ctx, w, SLOT_TP, true, 0);
}

static __always_inline void emit_exit(struct tstate *st, u32 tid, u64 now)
{
	bpf_map_delete_elem(&stash, &tid);
	/* Marked first: a timer sample that interrupts this program (a
	 * perf_event program may run inside a tracing one) is left out once
	 * the exit record may be in the ring before it, where user space
	 * would find it after the thread's record was folded away. */
	st->exited = 1;
	struct exit_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost(LOST_EXIT);
		return;
	}
	e->type = EV_EXIT;
	e->pid = st->pid;
	e->tid = tid;
	e->pad = 0;
	e->ts = now;
	__builtin_memcpy(&e->st, st, sizeof(*st));
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, 0);
	bpf_map_delete_elem(&threads, &tid);
}

static __always_inline void add_time(struct tstate *st, int i, u64 d)
{
	st->time[i] += d;
	st->acc[i] += d;
}

/* take_due moves the whole off-CPU sampling periods accumulated in state i
 * into the weights of a sample. */
static __always_inline void take_due(struct tstate *st, u64 *w, int i, bool *due)
{
	if (st->acc[i] >= off_period_ns) {
		u64 n = (st->acc[i] / off_period_ns) * off_period_ns;
		st->acc[i] -= n;
		w[i] = n;
		*due = true;
	}
}

struct off_credit {
	u64 last; /* when the credit was last brought up to date */
	u64 credit;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct off_credit);
} off_credits SEC(".maps");

/* off_due says whether an off-CPU sample of st comes due now (a whole
 * sampling period accumulated in a state off CPU) and may be taken: 0 when
 * none is due or the CPU's budget (off_cost_ns) is spent, else the
 * sample's flags plus one. A sample of more than one period in a state (a
 * wait of several) is always taken, its weight exact; one of a single
 * period in each state (what a thread that blocks for less than a period,
 * over and over, comes due with) is left out beyond the budget, its periods
 * dropped (their time stays in the thread's totals), and one taken is
 * marked SAMPLE_THIN: user space scales the thin samples of a thread and
 * state to the time the exact ones leave (collect.Aggregator). Which of
 * them is left out depends on the time, not on where the thread waits.
 * Deferring them to the thread's next sample instead gave that wait the
 * time of the earlier ones (the bursts' compute phase got 15 points of
 * blocked time); dropping whole samples, a long wait's among them, and
 * scaling the rest gave its 4 s to the thread's other sleeps. */
static __always_inline u32 off_due(struct tstate *st)
{
	u64 p = off_period_ns;
	u64 r = st->acc[ST_RUNNABLE], sl = st->acc[ST_SLEEPING], d = st->acc[ST_DISK], o = st->acc[ST_OTHER];
	if (r < p && sl < p && d < p && o < p)
		return 0;
	u64 cost = off_cost_ns;
	if (!cost)
		return 1;
	if (r >= 2 * p || sl >= 2 * p || d >= 2 * p || o >= 2 * p)
		return 1;
	u32 zero = 0;
	struct off_credit *b = bpf_map_lookup_elem(&off_credits, &zero);
	if (!b)
		return 1;
	u64 now = bpf_ktime_get_ns();
	u64 c = b->credit + (now > b->last ? now - b->last : 0);
	b->last = now;
	if (c > cost * OFF_BURST)
		c = cost * OFF_BURST;
	if (c < cost) {
		b->credit = c;
		st->acc[ST_RUNNABLE] = r % p;
		st->acc[ST_SLEEPING] = sl % p;
		st->acc[ST_DISK] = d % p;
		st->acc[ST_OTHER] = o % p;
		count_lost(DROPPED_OFF);
		return 0;
	}
	b->credit = c - cost;
	return 1 + SAMPLE_THIN;
}

/* emit_carry sends weights without a stack: user space adds them to the
 * thread's latest sample in the same state. */
static __always_inline void emit_carry(u64 *w)
{
	struct sample_event *e = sample_buf(SLOT_TP);
	if (!e)
		return;
	fill_header(e, SAMPLE_CARRY);
#pragma unroll
	for (int i = 0; i < NSTATES; i++)
		e->weight[i] = w[i];
	e->ip = e->sp = e->bp = 0;
	e->klen = 0;
	e->ulen = 0;
	e->snap_len = 0;
	send_sample(e, SLOT_TP, true);
}

/* ======================================================================
 * Both modes: new threads and processes, and the on-CPU samples.
 *
 * The timer samples where the CPU is in either mode; new threads and forked
 * processes join the thread table and the targets.
 * ====================================================================== */

SEC("tp_btf/sched_wakeup_new")
int BPF_PROG(on_wakeup_new, struct task_struct *p)
{
	u64 now = bpf_ktime_get_ns();
	struct tstate *st = lookup_thread(p->pid, p->tgid, now, NEW_THREAD);
	if (st && walk_mode && st->born != p->start_time) {
		/* An earlier thread's record under this id (a walk's, left
		 * behind): this thread starts from nothing, as if entered
		 * here. */
		if (st->born || st->based)
			st = renew_thread(p->pid, p->tgid, now);
		if (st)
			st->born = p->start_time;
	}
	if (st && (resume_mode || walk_mode) && !st->based) {
		/* Its counters start at zero: from its creation on, what they
		 * gain is its time, counted at its resumptions. */
		st->on_cpu = 1;
		st->in_ts = now;
		st->based = 1;
	}
	return 0;
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(on_fork, struct task_struct *parent, struct task_struct *child)
{
	if (!follow_forks)
		return 0;
	u32 ptgid = parent->tgid;
	if (!is_target(ptgid))
		return 0;
	u32 ctgid = child->tgid;
	if ((u32)child->pid != ctgid)
		return 0; /* a new thread, not a new process */
	u8 one = 1;
	bpf_map_update_elem(&targets, &ctgid, &one, BPF_ANY);
	u32 zero = 0;
	struct tgid_set *set = bpf_map_lookup_elem(&tgids, &zero);
	if (set) {
		/* The slot is taken first (two forks at once get two slots); the
		 * child cannot run before this returns. */
		u32 i = __sync_fetch_and_add(&set->n, 1);
		if (i < MAX_TGIDS)
			set->tgid[i & (MAX_TGIDS - 1)] = ctgid;
	}
	__sync_fetch_and_add(&target_forks, 1);
	return 0;
}

/* A target process exec'ed a program: user space reads its mappings now,
 * while it lives (the ring buffer is read only every so often, and a short
 * command may be gone by then). Attached when following forks. */
struct exec_event {
	u32 type;
	u32 pid;
};

SEC("tp_btf/sched_process_exec")
int BPF_PROG(on_exec, struct task_struct *p)
{
	u32 tgid = p->tgid;
	if (!is_target(tgid))
		return 0;
	struct exec_event ev = {.type = EV_EXEC, .pid = tgid};
	bpf_ringbuf_output(&events, &ev, sizeof(ev), BPF_RB_FORCE_WAKEUP);
	return 0;
}

SEC("perf_event")
int on_cpu_sample(void *ctx)
{
	u64 id = bpf_get_current_pid_tgid();
	u32 tgid = id >> 32;
	if ((u32)id == 0 || !is_target(tgid))
		return 0;
	/* One sampling period, where the CPU is now: a thread is sampled in
	 * proportion to its CPU time, in every function in proportion to the
	 * time spent there, however short its bursts (perf's estimate). User
	 * space scales a thread's samples to its exact CPU time. */
	/* A thread without a record (past its exit event, sched_process_exit,
	 * or inside it; or not entered yet, in the instant after its creation) is in no
	 * thread's totals: its sample is left out rather than counted under no
	 * total (its last microseconds before exiting are in neither). */
	u32 tid = (u32)id;
	struct tstate *st = bpf_map_lookup_elem(&threads, &tid);
	if (!st || st->exited)
		return 0;
	u64 w[NSTATES] = {};
	w[ST_ONCPU] = period_ns;
	/* The context starts with the interrupted registers (x86's
	 * bpf_user_pt_regs_t is pt_regs); CS's low bits are the privilege
	 * level, 3 in user mode. */
	struct pt_regs *regs = ctx;
	emit_current_sample_slot(ctx, w, SLOT_TIMER, (regs->cs & 3) != 3, 0);
	return 0;
}

/* ======================================================================
 * Switch-time accounting (resume_mode == 0).
 *
 * Kernels without sched_exit_tp or schedstat: sched_switch closes the interval
 * of both threads, sched_wakeup (or schedstat) splits an off-CPU interval into
 * blocked and runnable, and a due off-CPU sample is taken from the thread's own
 * context when it returns from the scheduler (sched_exit_tp, a kprobe on
 * finish_task_switch, or sys_exit). A preempted thread's stack is kept at the
 * preemption (stash). Fields used only here: wake_ts, wake_cpu,
 * last_runnable.
 * ====================================================================== */

static __always_inline void give_back(struct tstate *st, u64 *w)
{
	st->acc[ST_RUNNABLE] += w[ST_RUNNABLE];
	st->acc[ST_SLEEPING] += w[ST_SLEEPING];
	st->acc[ST_DISK] += w[ST_DISK];
	st->acc[ST_OTHER] += w[ST_OTHER];
}

/* in_syscall reports whether the current thread entered the kernel through
 * a syscall (orig_ax holds its number) rather than an interrupt or exception. */
static __always_inline bool in_syscall(void)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	long nr = (long)regs->orig_ax; /* a BTF pointer: a plain load */
	return nr >= 0;
}

/* stash_current keeps the stack of a thread being preempted (we run in its
 * context), for a sample that its switch-in may make due. */
static __always_inline void stash_current(void *ctx, u32 tid, u64 now)
{
	u32 zero = 0;
	struct sample_event *e = bpf_map_lookup_elem(&scratch, &zero);
	if (!e)
		return;
	fill_header(e, 0);
	e->ts = now;
	e->klen = bpf_get_stack(ctx, e->kstack, sizeof(e->kstack), 0);
	if (e->klen < 0)
		count_lost(LOST_KSTACK);
	fill_user(ctx, e);
	if (bpf_map_update_elem(&stash, &tid, e, BPF_ANY))
		count_lost(LOST_STASH);
}

/* emit_pending takes the user stack of a thread that has come back on a CPU
 * and made a sample due; the kernel stack was taken at the switch-in. */
static __always_inline int emit_pending(void *ctx)
{
	u32 zero = 0;
	struct pending *p = bpf_map_lookup_elem(&pendings, &zero);
	if (!p || !p->tid)
		return 0;
	u32 tid = (u32)bpf_get_current_pid_tgid();
	if (p->tid != tid)
		return 0;
	p->tid = 0;
	struct sample_event *e = sample_buf(SLOT_TP);
	if (!e)
		return 0;
	fill_header(e, 0);
#pragma unroll
	for (int i = 0; i < NSTATES; i++)
		e->weight[i] = p->weight[i];
	e->klen = p->klen;
	if (e->klen < 0)
		count_lost(LOST_KSTACK);
	bpf_probe_read_kernel(e->kstack, sizeof(e->kstack), p->kstack);
	fill_user(ctx, e);
	send_sample(e, SLOT_TP, true);
	return 0;
}

/* emit_stash sends the stack kept at tid's preemption, with weights w. */
static __always_inline bool emit_stash(u32 tid, u64 out_ts, u64 *w)
{
	struct sample_event *st = bpf_map_lookup_elem(&stash, &tid);
	if (!st || st->ts != out_ts)
		return false;
	struct sample_event *e = sample_buf(SLOT_TP);
	if (!e)
		return true;
	bpf_probe_read_kernel(e, sizeof(*e), st);
#pragma unroll
	for (int i = 0; i < NSTATES; i++)
		e->weight[i] = w[i];
	send_sample(e, SLOT_TP, true); /* when the ring is full, the weight is lost, and counted */
	return true;
}

/* sample_missed samples the off-CPU time of an interval whose switch-in was
 * not reported, now that its switch-out closed it, rather than leaving it to
 * the stack of the thread's next switch-in. A thread preempted in user code
 * waited in the stack kept at its preemption; otherwise the stack it waited in
 * is gone (it has run since), and the time goes to the thread's latest sample
 * in the same state, the stack it was last seen waiting in. */
static __always_inline void sample_missed(struct tstate *st, u32 tid, u64 out_ts)
{
	u64 w[NSTATES] = {};
	bool due = false;
	take_due(st, w, ST_RUNNABLE, &due);
	take_due(st, w, ST_SLEEPING, &due);
	take_due(st, w, ST_DISK, &due);
	take_due(st, w, ST_OTHER, &due);
	if (!due)
		return;
	if (!w[ST_SLEEPING] && !w[ST_DISK] && !w[ST_OTHER] && emit_stash(tid, out_ts, w))
		return;
	emit_carry(w);
}

static __always_inline void switch_out(void *ctx, struct task_struct *prev, struct tstate *st, u32 tid,
				       u64 now, bool preempt, unsigned int prev_state)
{
	u64 since = st->in_ts;
	bool missed = !st->on_cpu;
	if (missed) {
		/* The kernel did not report this thread's switch-in (seen on
		 * 6.18, a few times a second): the whole interval since its
		 * switch-out is closed now. */
		since = st->out_ts;
		count_lost(LOST_SWITCH_OUT);
	}
	u64 span = now > since ? now - since : 0;
	/* Its CPU time over the span is the kernel's own count, exact even when
	 * a switch event was not reported; what remains of the span it spent
	 * off CPU. */
	u64 exec = prev->se.sum_exec_runtime; /* a trusted pointer: a plain load */
	u64 cpu = span;
	if (st->last_exec && exec >= st->last_exec) {
		u64 dexec = exec - st->last_exec;
		if (dexec < span) {
			cpu = dexec;
		} else if (!missed && dexec > span) {
			/* The kernel charged it CPU time from before its switch-in
			 * (its pick, an idle CPU's exit): that time was counted
			 * runnable at the switch-in, give it back to on-CPU. */
			u64 extra = dexec - span;
			if (extra > st->last_runnable)
				extra = st->last_runnable;
			st->time[ST_RUNNABLE] -= extra;
			/* What a runnable sample already took stays sampled as
			 * runnable (a few tens of µs at most). */
			u64 take = extra < st->acc[ST_RUNNABLE] ? extra : st->acc[ST_RUNNABLE];
			st->acc[ST_RUNNABLE] -= take;
			cpu = span + extra;
			span += extra;
		}
	}
	st->last_exec = exec;
	st->last_runnable = 0;
	u64 off = span - cpu;
	if (off) {
		u8 k = st->out_state < NSTATES ? st->out_state : ST_OTHER;
		if (!missed || k == ST_RUNNABLE || k == ST_ONCPU) {
			/* Believed on CPU, but it was not: it waited for a CPU. */
			add_time(st, ST_RUNNABLE, off);
		} else {
			/* It stayed in the state it left in until its wake-up (if
			 * we saw one), then waited for a CPU. */
			u64 blocked = off;
			if (use_rd) {
				/* The kernel's schedstat: its wait has been added to
				 * run_delay (it ran). */
				u64 run = queued_since_out(prev, st, 0);
				blocked = off > run ? off - run : 0;
			} else if (st->wake_ts > st->out_ts && st->wake_ts - st->out_ts < off) {
				blocked = st->wake_ts - st->out_ts;
			}
			add_time(st, k, blocked);
			add_time(st, ST_RUNNABLE, off - blocked);
		}
		if (missed)
			sample_missed(st, tid, since);
	}
	/* The burst's CPU time is exact here; its stacks are the timer's
	 * samples alone. The stack it switches out in is where it now waits:
	 * sampling the burst's time there would credit a blocking call (or the
	 * interrupt exit of a preemption) with CPU time spent elsewhere. */
	st->time[ST_ONCPU] += cpu;
	st->on_cpu = 0;
	st->out_ts = now;
	st->wake_ts = 0;
	if (use_rd && bpf_core_field_exists(prev->sched_info.run_delay))
		st->rd_out = prev->sched_info.run_delay;
	st->out_state = classify(preempt, prev_state);
	if (prev_state & TASK_DEAD)
		emit_exit(st, tid, now);
	else if (st->out_state == ST_RUNNABLE && !in_syscall())
		/* Preempted while running user code (a tick, an interrupt): its
		 * stack is kept now, as nothing runs in its context between its
		 * switch-in and its return to user code. A thread preempted
		 * inside a syscall (a wake-up preempting the waker, the commonest
		 * case) is sampled when it leaves the syscall, like a blocked
		 * one, so these copies stay bounded by the tick rate. */
		stash_current(ctx, tid, now);
}

/* defer_sample leaves a due sample for next's return from the scheduler: its
 * kernel stack now, its user stack from its own context. */
static __always_inline void defer_sample(struct task_struct *next, struct tstate *st, u32 tid, u64 *w)
{
	u32 zero = 0;
	struct pending *p = bpf_map_lookup_elem(&pendings, &zero);
	if (!p)
		return;
	if (p->tid && p->tid != tid) {
		/* The previous thread on this CPU did not come back through a
		 * probed path, so its sample was not taken: give the time back to
		 * its accumulator; a later switch-in samples it. */
		u32 old = p->tid;
		struct tstate *ost = bpf_map_lookup_elem(&threads, &old);
		if (ost)
			give_back(ost, p->weight);
		count_lost(LOST_PENDING);
	}
	p->tid = tid;
#pragma unroll
	for (int i = 0; i < NSTATES; i++)
		p->weight[i] = w[i];
	p->klen = bpf_get_task_stack(next, p->kstack, sizeof(p->kstack), 0);
}

static __always_inline void switch_in(struct task_struct *next, struct tstate *st, u32 tid, u64 now,
				      bool from_idle, u64 rc)
{
	u64 d[NSTATES] = {};
	u64 out_ts = st->out_ts;
	bool preempted = !st->on_cpu && st->out_state == ST_RUNNABLE;
	if (st->on_cpu) {
		/* A thread seeded as running that was in fact waiting; or we
		 * missed its switch-out. */
		if (st->first_ts != start_ns || st->in_ts != start_ns)
			count_lost(LOST_SWITCH_IN);
		if (now > st->in_ts)
			d[ST_RUNNABLE] = now - st->in_ts;
	} else if (now > st->out_ts) {
		u8 k = st->out_state;
		if (k >= NSTATES)
			k = ST_OTHER;
		if (k == ST_RUNNABLE || k == ST_ONCPU) {
			d[k] = now - st->out_ts;
		} else if (use_rd) {
			/* Blocked, then waiting on a run queue for as long as the
			 * kernel's schedstat says. */
			u64 off = now - st->out_ts;
			u64 run = queued_since_out(next, st, rc);
			if (run > off)
				run = off;
			d[k] = off - run;
			d[ST_RUNNABLE] = run;
		} else if (st->wake_ts == 0) {
			d[k] = now - st->out_ts;
		} else {
			u64 w = st->wake_ts;
			if (w < st->out_ts)
				w = st->out_ts;
			if (w > now)
				w = now;
			d[k] = w - st->out_ts;
			if (from_idle && st->wake_cpu == bpf_get_smp_processor_id()) {
				/* Woken onto this CPU while it was idle: it waited
				 * for the CPU to leave idle, not for a CPU. The kernel's CPU time
				 * (schedstat, getrusage, CLOCK_THREAD_CPUTIME_ID)
				 * counts this as running; so do we. */
				st->on_cpu = 1;
				st->in_ts = w;
				goto sample;
			}
			d[ST_RUNNABLE] = now - w;
		}
	}
	st->on_cpu = 1;
	st->in_ts = now;
sample:
	st->last_exec = next->se.sum_exec_runtime;
	st->wake_ts = 0;

	u64 w[NSTATES] = {};
	bool due = false;
	st->last_runnable = d[ST_RUNNABLE];
	add_time(st, ST_RUNNABLE, d[ST_RUNNABLE]);
	add_time(st, ST_SLEEPING, d[ST_SLEEPING]);
	add_time(st, ST_DISK, d[ST_DISK]);
	add_time(st, ST_OTHER, d[ST_OTHER]);
	if (preempted) {
		/* Only runnable time was added, and the stack kept at the
		 * preemption is the one it was spent in. */
		take_due(st, w, ST_RUNNABLE, &due);
		if (due && !emit_stash(tid, out_ts, w))
			defer_sample(next, st, tid, w);
		return;
	}
	take_due(st, w, ST_RUNNABLE, &due);
	take_due(st, w, ST_SLEEPING, &due);
	take_due(st, w, ST_DISK, &due);
	take_due(st, w, ST_OTHER, &due);
	if (due)
		defer_sample(next, st, tid, w);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(on_switch, bool preempt, struct task_struct *prev, struct task_struct *next,
	     unsigned int prev_state)
{
	u64 rc;
	u64 now = sched_now(next, true, &rc);
	u32 tid = prev->pid;
	struct tstate *st = lookup_thread(tid, prev->tgid, now, NEW_RUNNING);
	if (st) {
		/* A sample left for prev's return from its syscall, if it is
		 * switched out again first (preempted on the way out): we are in
		 * its context, take it now. (A task work waits for the return to
		 * user space however often the thread is switched out.) */
		emit_pending(ctx);
		switch_out(ctx, prev, st, tid, now, preempt, prev_state);
	}
	tid = next->pid;
	u32 zero = 0;
	u32 *in = bpf_map_lookup_elem(&cpu_in, &zero);
	if (in)
		*in = tid;
	st = lookup_thread(tid, next->tgid, now, NEW_OFF);
	if (st)
		switch_in(next, st, tid, now, prev->pid == 0, rc);
	return 0;
}

SEC("tp_btf/sched_wakeup")
int BPF_PROG(on_wakeup, struct task_struct *p)
{
	struct tstate *st = lookup_thread(p->pid, p->tgid, 0, NEW_WOKEN);
	/* The clock is read only for a wake-up that ends a blocked interval. */
	if (st && !st->on_cpu && st->wake_ts == 0) {
		u64 rc;
		st->wake_ts = sched_now(p, false, &rc);
		st->wake_cpu = task_cpu(p);
	}
	return 0;
}

/* A blocked thread leaves the syscall it blocked in after it runs again. */
SEC("tp_btf/sys_exit")
int BPF_PROG(on_sys_exit)
{
	emit_pending(ctx);
	/* The kernel sometimes does not report a switch-in (seen on 6.18, a few
	 * times a second). A thread that leaves a syscall while the table says
	 * it is off CPU is such a thread: account its interval now, while its
	 * stack is still the one it blocked in. */
	u32 tid = (u32)bpf_get_current_pid_tgid();
	struct tstate *st = bpf_map_lookup_elem(&threads, &tid);
	if (!st || st->on_cpu)
		return 0;
	u64 now = bpf_ktime_get_ns();
	u8 k = st->out_state < NSTATES ? st->out_state : ST_OTHER;
	u64 w = st->out_ts;
	if (k != ST_RUNNABLE && k != ST_ONCPU) {
		w = st->wake_ts ? st->wake_ts : now;
		if (w < st->out_ts)
			w = st->out_ts;
		if (w > now)
			w = now;
		add_time(st, k, w - st->out_ts);
	}
	/* From the wake-up (or the preemption) on, it ran or waited for a CPU:
	 * we cannot tell which, and count it on CPU. */
	st->on_cpu = 1;
	st->in_ts = w;
	st->wake_ts = 0;
	count_lost(LOST_SWITCH_OUT);
	u64 wt[NSTATES] = {};
	bool due = false;
	take_due(st, wt, ST_SLEEPING, &due);
	take_due(st, wt, ST_DISK, &due);
	take_due(st, wt, ST_OTHER, &due);
	take_due(st, wt, ST_RUNNABLE, &due);
	if (due)
		emit_current_sample(ctx, wt);
	return 0;
}

/* late_switch_in accounts the switch-in of the current thread, which the
 * kernel did not report, from sched_exit_tp: it is being switched in now.
 * Its off-CPU interval is closed as at a switch-in (blocked until its wake-up,
 * if seen, runnable after it; runnable throughout if it was preempted), and a
 * sample that comes due is taken at once, in its own context. */
static __always_inline void late_switch_in(void *ctx, struct tstate *st)
{
	struct task_struct *task = bpf_get_current_task_btf();
	u64 rc;
	u64 now = sched_now(task, false, &rc);
	count_lost(RECOVERED_SWITCH_IN);
	u64 d[NSTATES] = {};
	if (now > st->out_ts) {
		u8 k = st->out_state < NSTATES ? st->out_state : ST_OTHER;
		u64 w = now;
		if (k != ST_RUNNABLE && k != ST_ONCPU && use_rd) {
			/* The kernel has just added this wait to run_delay. */
			u64 run = queued_since_out(task, st, 0);
			w = now - st->out_ts > run ? now - run : st->out_ts;
		} else if (k != ST_RUNNABLE && k != ST_ONCPU && st->wake_ts) {
			w = st->wake_ts;
			if (w < st->out_ts)
				w = st->out_ts;
			if (w > now)
				w = now;
		}
		if (k == ST_ONCPU)
			k = ST_RUNNABLE;
		d[k] += w - st->out_ts;
		d[ST_RUNNABLE] += now - w;
	}
	st->on_cpu = 1;
	st->in_ts = now;
	st->wake_ts = 0;
	st->last_exec = task->se.sum_exec_runtime;
	st->last_runnable = d[ST_RUNNABLE];
	add_time(st, ST_RUNNABLE, d[ST_RUNNABLE]);
	add_time(st, ST_SLEEPING, d[ST_SLEEPING]);
	add_time(st, ST_DISK, d[ST_DISK]);
	add_time(st, ST_OTHER, d[ST_OTHER]);
	u64 wt[NSTATES] = {};
	bool due = false;
	take_due(st, wt, ST_RUNNABLE, &due);
	take_due(st, wt, ST_SLEEPING, &due);
	take_due(st, wt, ST_DISK, &due);
	take_due(st, wt, ST_OTHER, &due);
	if (due)
		emit_current_sample(ctx, wt);
}

/* The end of __schedule (and schedule_tail, for a new thread), in the context
 * of the thread switched in (Linux 6.16+): its user stack for a sample its
 * switch-in made due is taken here, and sys_exit is not probed. */
SEC("tp_btf/sched_exit_tp")
int BPF_PROG(on_sched_exit, bool is_switch)
{
	if (!is_switch)
		return 0;
	u32 tid = (u32)bpf_get_current_pid_tgid();
	u32 zero = 0;
	u32 *in = bpf_map_lookup_elem(&cpu_in, &zero);
	if (!in || *in != tid) {
		/* The switch to this thread was not reported (seen on 6.18, a
		 * few times a second): it is switched in now, and this is its
		 * switch-in, with exact times and its own stack. */
		struct tstate *st = bpf_map_lookup_elem(&threads, &tid);
		if (in)
			*in = tid;
		if (st && !st->on_cpu) {
			late_switch_in(ctx, st);
			return 0;
		}
	}
	return emit_pending(ctx);
}

/* Where kprobes exist, the same right at the switch-in. */
SEC("kprobe/finish_task_switch")
int on_switch_in(struct pt_regs *ctx)
{
	return emit_pending(ctx);
}

/* ======================================================================
 * Accounting at resumption (resume_mode == 1).
 *
 * Linux 6.16+ with schedstat: one program per switch, at sched_exit_tp in the
 * context of the thread that resumes, closes the interval since its previous
 * resumption from the kernel's counters. Fields used only here: based, nvcsw,
 * nivcsw.
 * ====================================================================== */

/* resume_base records where a thread's counters stand at its switch-in. */
static __always_inline void resume_base(struct tstate *st, struct task_struct *task, u64 now)
{
	st->on_cpu = 1;
	st->in_ts = now;
	st->last_exec = task->se.sum_exec_runtime;
	st->rd_out = task->sched_info.run_delay;
	st->nvcsw = task->nvcsw;
	st->nivcsw = task->nivcsw;
	st->based = 1;
}

/* More time off a CPU than this since a thread's latest resumption, when no
 * switch was counted, is taken for a switch that was not. */
#define HIDDEN_OFF_NS 200000ULL

/* resume_split splits span, the time since st's latest resumption, into
 * the CPU time that task's counter gained (*cpu), the wait on a run queue
 * that schedstat gained plus wait, a wait in progress (*run), and the rest
 * (*off - *run, blocked). *exec and *rd are the counters now. */
static __always_inline void resume_split(struct task_struct *task, struct tstate *st, u64 span, u64 wait,
					 u64 *cpu, u64 *off, u64 *run, u64 *exec, u64 *rd)
{
	*exec = task->se.sum_exec_runtime;
	u64 c = *exec > st->last_exec ? *exec - st->last_exec : 0;
	if (c > span)
		c = span;
	*cpu = c;
	*off = span - c;
	*rd = task->sched_info.run_delay;
	u64 r = (*rd > st->rd_out ? *rd - st->rd_out : 0) + wait;
	*run = r > *off ? *off : r;
}

/* A thread resumes after a switch (the end of __schedule, in its own
 * context): the interval since its previous switch-in is closed from the
 * kernel's own counters. Its CPU time is what sum_exec_runtime gained, its
 * wait on a run queue what schedstat's run_delay gained (the wait that just
 * ended included), and the rest it was blocked, in the kind its switch-out
 * left: preempted (nivcsw) or blocked (nvcsw), uninterruptibly or not
 * (sched_contributes_to_load, set by that switch-out). No switch-out is
 * probed, and a due sample is taken here, where both its stacks are still
 * the ones of its switch-out. */
SEC("tp_btf/sched_exit_tp")
int BPF_PROG(on_resume, bool is_switch)
{
	if (bench_cut == 6)
		return 0;
	struct task_struct *task = bpf_get_current_task_btf();
	u32 tid = task->pid;
	/* The task that last resumed on this CPU: another one means this one
	 * was switched out and back in, even where the kernel's switch path
	 * counted no switch (these VMs have one that skips the sched_switch
	 * tracepoint, the switch counters and schedstat). */
	u32 zero = 0;
	u32 *cur = bpf_map_lookup_elem(&cpu_in, &zero);
	bool other = cur && *cur != tid;
	if (cur)
		*cur = tid;
	if (bench_cut == 1)
		return 0;
	u32 tgid = task->tgid;
	if (!is_target(tgid))
		return 0;
	if (tid == 0 || bench_cut == 2)
		return 0;
	struct tstate *st = bpf_map_lookup_elem(&threads, &tid);
	if (bench_cut == 5 && st)
		st = bpf_map_lookup_elem(&threads, &tid);
	if (bench_cut == 3)
		return 0;
	if (!st) {
		/* Not seeded nor seen being created: counted from now. (An
		 * exiting thread's record is gone with its exit event.) */
		if (task->flags & PF_EXITING)
			return 0;
		u64 now = bpf_ktime_get_ns();
		st = lookup_thread(tid, tgid, now, NEW_RUNNING);
		if (!st)
			return 0;
		st->first_ts = now;
		resume_base(st, task, now);
		return 0;
	}
	u64 nv = task->nvcsw;
	u64 niv = task->nivcsw;
	bool counted = nv != st->nvcsw || niv != st->nivcsw;
	/* The switch's time: the run queue's clock, updated at the start of
	 * __schedule. (Not schedstat's last_arrival: these VMs have a switch
	 * path that does not report the switch, and does not update
	 * schedstat either.) */
	u64 rc;
	u64 now = sched_now(task, true, &rc);
	if (bench_cut == 4) {
		st->in_ts = now + nv + niv + (counted ? 1 : 0);
		return 0;
	}
	if (st->based && !counted && !other) {
		/* It called the scheduler and kept its CPU, unless its CPU time
		 * (brought up to date by this __schedule) fell behind the clock
		 * by more than interrupts would explain: then it was away, by a
		 * switch that neither the counters nor this CPU's record saw
		 * (the other thread that ran there did not resume through
		 * __schedule). */
		u64 exec = task->se.sum_exec_runtime;
		u64 ran = exec > st->last_exec ? exec - st->last_exec : 0;
		if (now <= st->in_ts || now - st->in_ts < ran + HIDDEN_OFF_NS)
			return 0;
	}
	if (!st->based || now <= st->in_ts) {
		resume_base(st, task, now);
		return 0;
	}
	u64 cpu, off, run, exec, rd;
	resume_split(task, st, now - st->in_ts, 0, &cpu, &off, &run, &exec, &rd);
	u8 k = ST_RUNNABLE;
	if (nv != st->nvcsw) {
		k = BPF_CORE_READ_BITFIELD(task, sched_contributes_to_load) ? ST_DISK : ST_SLEEPING;
	} else if (!counted) {
		/* A switch the kernel did not count: blocked or preempted
		 * cannot be told; what schedstat did not see waiting is
		 * counted blocked (sleeping). */
		k = ST_SLEEPING;
		count_lost(RECOVERED_SWITCH_IN);
	}
	/* The burst's CPU time is exact; its stacks are the timer's samples
	 * alone (the stack here is where it waited, not where it ran). */
	st->time[ST_ONCPU] += cpu;
	add_time(st, ST_RUNNABLE, run);
	add_time(st, k, off - run);
	u64 w[NSTATES] = {};
	bool due = false;
	u32 take = off_due(st);
	if (take) {
		take_due(st, w, ST_RUNNABLE, &due);
		take_due(st, w, ST_SLEEPING, &due);
		take_due(st, w, ST_DISK, &due);
		take_due(st, w, ST_OTHER, &due);
	}
	st->on_cpu = 1;
	st->in_ts = now;
	st->last_exec = exec;
	st->rd_out = rd;
	st->nvcsw = nv;
	st->nivcsw = niv;
	if (due)
		emit_current_sample_slot(ctx, w, SLOT_TP, true, take - 1);
	return 0;
}

/* ======================================================================
 * Accounting by walking the threads (walk_mode == 1).
 *
 * No program runs at a switch. Every sampling period user space runs
 * walk_states and walk_stacks, task iterators, from its own CPU: for each
 * target thread they
 * closes the interval since the previous walk from the kernel's counters
 * (CPU time, schedstat's wait for a CPU; the rest blocked, of the kind the
 * thread is in when walked, or was in at the previous walk), and takes the
 * stacks of a thread that is off CPU now: one sample in the state it is in
 * (runnable or blocked), weighing the time since its previous walk,
 * wherever it is in a block.
 * Sampling at instants that the program does not choose is unbiased
 * however short its phases; user space scales each thread's samples of a
 * state to its time in that state, as it does the timer's on-CPU samples.
 * Fields used: first_ts, in_ts and out_ts (the latest walk), last_exec and
 * rd_out (the counters at the thread's base), nvcsw and nivcsw (its time
 * on CPU and runnable before its base), wake_cpu (its voluntary switches at
 * the latest walk), out_state (its state at the latest walk), on_cpu,
 * based; last_runnable and pad2 between a walk's two passes (walk_states).
 * ====================================================================== */

/* walk_counters reads task's CPU time and its wait for a CPU, each with the
 * part the kernel has not added yet: a running thread's run since its CPU
 * time was last brought up to date, a queued one's wait so far (its run
 * queue's clocks, as last updated: behind by at most a tick). Both only
 * grow, so the intervals between walks add up to the counters' gain. */
static __always_inline void walk_counters(struct task_struct *task, u64 *exec, u64 *rd)
{
	u64 e = task->se.sum_exec_runtime;
	u64 c = 0, ct = 0;
	if (task->on_cpu) {
		rq_clocks(task, &c, &ct);
		u64 start = task->se.exec_start;
		if (ct > start && start)
			e += ct - start;
	}
	*exec = e;
	u64 r = 0;
	if (bpf_core_field_exists(task->sched_info.run_delay)) {
		r = task->sched_info.run_delay;
		u64 lq = task->sched_info.last_queued;
		if (lq) {
			if (!c)
				rq_clocks(task, &c, &ct);
			if (c > lq)
				r += c - lq;
		}
	}
	*rd = r;
}

/* last_blocked is the kind of task's latest block: uninterruptible (and
 * not TASK_NOLOAD) or not, as its switch-out left it. */
static __always_inline u8 last_blocked(struct task_struct *task)
{
	return BPF_CORE_READ_BITFIELD(task, sched_contributes_to_load) ? ST_DISK : ST_SLEEPING;
}

/* ran_at is when task last ran (its CPU time was last charged), on its run
 * queue's clock: se.exec_start is on the queue's clock_task, which lags the
 * clock by the IRQ and steal time it has seen (their difference as last
 * updated, which moves only by the IRQ time since). */
static __always_inline u64 ran_at(struct task_struct *task)
{
	u64 c, ct;
	rq_clocks(task, &c, &ct);
	return task->se.exec_start + (c > ct ? c - ct : 0);
}

/* walk_kind is the state task was in at the walk's instant, since (when
 * the walker woke, walk_instant; 0 from task itself, at its exit): on a CPU,
 * waiting for one, or blocked (of the kind its __state says). The walk
 * reads the threads one after the other, tens of microseconds, while they
 * go on: one woken since waits for a CPU now but was blocked then; one
 * that ran since (blocked or preempted now) was most likely running then.
 * (One that is running now is taken as running then.) */
static __always_inline u8 walk_kind(struct task_struct *task, u64 since)
{
	if (task->on_cpu)
		return ST_ONCPU;
	/* A thread that blocked may be left on its run queue a while (EEVDF's
	 * delayed dequeue, Linux 6.12+): it does not wait for a CPU. */
	bool delayed = bpf_core_field_exists(task->se.sched_delayed) && task->se.sched_delayed;
	bool ran = since && ran_at(task) > since;
	if (task->on_rq && !delayed) {
		if (!bpf_core_field_exists(task->sched_info.last_queued))
			return ST_RUNNABLE;
		u64 q = task->sched_info.last_queued;
		if (since && q > since)
			return ran ? ST_ONCPU : last_blocked(task);
		/* Woken back onto the run queue it was left on, it waits for
		 * a CPU, but schedstat does not count the wait (no
		 * last_queued): the counters, and so its times, have it
		 * blocked until it runs; its sample says so too, or the stacks
		 * it blocks in would have less than their time and the rest
		 * more. */
		if (!q)
			return last_blocked(task);
		return ST_RUNNABLE;
	}
	if (ran)
		return ST_ONCPU;
	return classify(false, task->__state);
}

/* add_in adds d to t[k], a per-state array of a tstate (k past the states:
 * ST_OTHER), by constant offsets (the verifier cannot always follow a
 * bounded index through the compiler's reordering). */
static __always_inline void add_in(u64 *t, u32 k, u64 d)
{
	switch (k) {
	case ST_ONCPU:
		t[ST_ONCPU] += d;
		break;
	case ST_RUNNABLE:
		t[ST_RUNNABLE] += d;
		break;
	case ST_SLEEPING:
		t[ST_SLEEPING] += d;
		break;
	case ST_DISK:
		t[ST_DISK] += d;
		break;
	default:
		t[ST_OTHER] += d;
	}
}

/* add_state adds d to st's time in state k. */
static __always_inline void add_state(struct tstate *st, u8 k, u64 d)
{
	add_in(st->time, k, d);
}

/* take_blocked takes up to *d from st's blocked time of kind k, and
 * lowers *d by what it took. */
static __always_inline void take_blocked(struct tstate *st, u8 k, u64 *d)
{
	u64 *t;
	switch (k) {
	case ST_DISK:
		t = &st->time[ST_DISK];
		break;
	case ST_OTHER:
		t = &st->time[ST_OTHER];
		break;
	default:
		t = &st->time[ST_SLEEPING];
	}
	u64 n = *t < *d ? *t : *d;
	*t -= n;
	*d -= n;
}

/* walk_account brings st's times up to now from task's counters, and
 * returns the state task is in. The times are kept whole since the
 * thread's accounting began (first_ts): CPU time and wait for a CPU are
 * the counters' gain since its base (last_exec, rd_out) plus what was
 * counted in those states before it (nvcsw, nivcsw: unused otherwise in
 * this mode), and the rest of the wall time it was blocked. Only the
 * blocked time's kind is taken per walk: what it gained since the previous
 * walk is of the kind the thread blocks in now, or blocked in then. So a
 * counter that lagged at one walk (a running thread's CPU time is brought
 * up to date at the tick) is made good at the next, and the totals at the
 * thread's exit or the recording's end are the counters'. A thread seen
 * for the first time is based here, its time since first_ts counted in the
 * state it is in. since is the walk's instant (walk_kind), 0 when task
 * exits (in its own context). */
static __always_inline u8 walk_account(struct task_struct *task, struct tstate *st, u64 now, u64 since)
{
	u64 exec, rd;
	walk_counters(task, &exec, &rd);
	u8 k = walk_kind(task, since);
	bool exiting = !since;
	if (!st->based) {
		u64 gap = st->first_ts && now > st->first_ts ? now - st->first_ts : 0;
		if (!st->first_ts)
			st->first_ts = now;
		st->nvcsw = 0;
		st->nivcsw = 0;
		if (k == ST_ONCPU)
			st->nvcsw = gap;
		else if (k == ST_RUNNABLE)
			st->nivcsw = gap;
		else
			add_state(st, k, gap);
		st->last_exec = exec;
		st->rd_out = rd;
		st->based = 1;
	}
	u64 wall = now > st->first_ts ? now - st->first_ts : 0;
	u64 cpu = st->nvcsw + (exec > st->last_exec ? exec - st->last_exec : 0);
	if (cpu > wall)
		cpu = wall;
	u64 run = st->nivcsw + (rd > st->rd_out ? rd - st->rd_out : 0);
	if (run > wall - cpu)
		run = wall - cpu;
	u64 blocked = wall - cpu - run;
	u64 had = st->time[ST_SLEEPING] + st->time[ST_DISK] + st->time[ST_OTHER];
	u32 nv = (u32)task->nvcsw;
	bool ran_then = st->out_state == ST_ONCPU || st->out_state == ST_RUNNABLE;
	if (exiting && ran_then && nv == st->wake_cpu && blocked > had) {
		/* Exiting, in its own context, it was running (or waiting to)
		 * at the previous walk (or its creation) and has not blocked
		 * since: what looks blocked since is the run that the kernel
		 * has not charged yet (a short-lived thread's whole life).
		 * The kernel charges a running thread at every tick: at most a
		 * tick (10 ms at HZ=100), whatever first_ts says (a record
		 * that was not this thread's gave one the whole recording). */
		u64 add = blocked - had;
		if (add > 2 * TICK_SLACK_NS)
			add = 2 * TICK_SLACK_NS;
		cpu += add;
		blocked -= add;
	}
	st->wake_cpu = nv;
	/* Stolen: on a virtual machine the hypervisor takes CPU time from the
	 * thread that holds the CPU (steal), which the kernel's CPU time
	 * leaves out (clock_task) and neither the wait for a CPU nor a block
	 * explains. Left in the blocked time, it went to where the thread
	 * blocked next: a 3 ms computation's steal to the sleep after it (the
	 * bursts test, up to 1.5 points in a run). A thread on the same run
	 * queue at both walks had the share of that queue's steal since that
	 * it had of its task clock: the CPU time it was charged over the time
	 * the queue charged (its steal came while it held the CPU, and is its
	 * CPU time as the guest's scheduler sees it: doc/recorder.md). Steal
	 * does not come while the CPU idles, so this is at most the
	 * thread's. */
	u32 on = task_cpu(task);
	u64 c, ct;
	rq_clocks(task, &c, &ct);
	u64 steal = c > ct ? c - ct : 0;
	u64 dcpu = cpu > st->time[ST_ONCPU] ? cpu - st->time[ST_ONCPU] : 0;
	u64 ds = steal - st->walk_steal, dct = ct - st->walk_ct;
	/* Only between two walks close together (the queue's clocks then
	 * are this thread's previous walk's), of a thread that ran on no other
	 * CPU meanwhile as far as its CPU time tells. */
	if (!exiting && on == st->walk_cpu && st->walk_steal && steal > st->walk_steal &&
	    ct > st->walk_ct && dct <= period_ns && ds <= dct && dcpu && dcpu <= dct && blocked > had) {
		u64 s = ds * dcpu / dct;
		if (s > blocked - had)
			s = blocked - had;
		st->nvcsw += s;
		cpu += s;
		blocked -= s;
	}
	st->walk_ct = ct;
	st->walk_cpu = on;
	st->walk_steal = steal;
	st->time[ST_ONCPU] = cpu;
	st->time[ST_RUNNABLE] = run;
	/* Blocked since the previous walk: of the kind it blocks in now, or
	 * blocked in then. */
	u8 b = k;
	if (b == ST_ONCPU || b == ST_RUNNABLE)
		b = st->out_state;
	if (b == ST_ONCPU || b == ST_RUNNABLE || b >= NSTATES)
		b = ST_SLEEPING;
	if (blocked >= had) {
		add_state(st, b, blocked - had);
	} else {
		u64 d = had - blocked;
		take_blocked(st, b, &d);
		take_blocked(st, ST_SLEEPING, &d);
		take_blocked(st, ST_DISK, &d);
		take_blocked(st, ST_OTHER, &d);
	}
	st->in_ts = now;
	st->out_ts = now;
	st->wake_ts = 0;
	st->out_state = k;
	st->on_cpu = k == ST_ONCPU;
	return k;
}

/* A thread exits (in its own context): it has run since its latest switch-in
 * (a block or a preemption since would have been a resume). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(on_task_exit, struct task_struct *p)
{
	struct task_struct *task = bpf_get_current_task_btf();
	u32 tid = task->pid;
	struct tstate *st = bpf_map_lookup_elem(&threads, &tid);
	if (!st)
		return 0;
	u64 now = bpf_ktime_get_ns();
	/* The thread's CPU time as counted so far, on the kernel's counter
	 * (se.sum_exec_runtime): what it gains from here is the exit path's. */
	u64 counted = task->se.sum_exec_runtime;
	if (walk_mode) {
		u64 born = task->start_time;
		if (st->born && st->born != born && born > start_ns) {
			/* An earlier thread's record under this id: this one's
			 * whole life from its counters, as if entered at its
			 * creation. */
			st = renew_thread(tid, task->tgid, born);
			if (!st)
				return 0;
			st->born = born;
			st->in_ts = born;
			st->based = 1;
		}
		walk_account(task, st, now, 0);
		/* Its CPU time is nvcsw (time counted without the counter:
		 * before its base, steal) plus what the counter gained since
		 * its base (last_exec), plus the run the counter had not
		 * charged yet at its exit (walk_account). */
		if (st->time[ST_ONCPU] >= st->nvcsw)
			counted = st->last_exec + st->time[ST_ONCPU] - st->nvcsw;
	} else if (st->based && now > st->in_ts) {
		u64 span = now - st->in_ts;
		u64 cpu, off, run, exec, rd;
		resume_split(task, st, span, 0, &cpu, &off, &run, &exec, &rd);
		if (off <= HIDDEN_OFF_NS + TICK_SLACK_NS) {
			/* Running since its resumption, when the counter was
			 * last_exec (charged at the switch). */
			st->time[ST_ONCPU] += span;
			counted = st->last_exec + span;
		} else {
			/* It was away since: a resumption that was not seen. */
			st->time[ST_ONCPU] += cpu;
			add_time(st, ST_RUNNABLE, run);
			add_time(st, ST_SLEEPING, off - run);
			count_lost(RECOVERED_SWITCH_IN);
		}
	}
	st->on_cpu = 0;
	st->out_ts = now;
	st->out_state = ST_OTHER;
	struct exit_tail t = {.pid = st->pid, .tid = tid, .exec = counted};
	emit_exit(st, tid, now);
	bpf_get_current_comm(t.comm, sizeof(t.comm));
	u64 key = (u64)task;
	if (bpf_map_update_elem(&exit_tails, &key, &t, BPF_ANY))
		count_lost(LOST_TAIL);
	return 0;
}

/* The kernel frees a task (after an RCU grace period, from any context):
 * the CPU time of a target thread's exit path after its exit record
 * (on_task_exit), now final, goes to user space, which adds it to the
 * thread's record under the exit path. */
SEC("tp_btf/sched_process_free")
int BPF_PROG(on_task_free, struct task_struct *p)
{
	u64 key = (u64)p;
	struct exit_tail *t = bpf_map_lookup_elem(&exit_tails, &key);
	if (!t)
		return 0;
	u64 exec = p->se.sum_exec_runtime;
	if (exec > t->exec) {
		struct tail_event *e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
		if (e) {
			e->type = EV_TAIL;
			e->pid = t->pid;
			e->tid = t->tid;
			e->pad = 0;
			e->ts = bpf_ktime_get_ns();
			e->ns = exec - t->exec;
			__builtin_memcpy(e->comm, t->comm, sizeof(e->comm));
			bpf_ringbuf_submit(e, 0);
		} else {
			count_lost(LOST_TAIL);
		}
	}
	bpf_map_delete_elem(&exit_tails, &key);
	return 0;
}

/* resume_close closes, at the end of a recording, the interval that a
 * thread has open since its latest switch-in, from the task's live
 * counters: the state it is in now is the kind of its block. It reports
 * whether the thread is off CPU. */
static __always_inline bool resume_close(struct task_struct *task, struct tstate *st)
{
	u64 now = bpf_ktime_get_ns();
	bool running = task->on_cpu;
	u8 k = ST_RUNNABLE;
	unsigned int state = task->__state;
	if (state != 0)
		k = classify(false, state);
	if (st->based && now > st->in_ts) {
		u64 span = now - st->in_ts;
		if (running) {
			st->time[ST_ONCPU] += span;
		} else {
			u64 wait = 0;
			u64 lq = task->sched_info.last_queued;
			u64 rc = rq_clock(task);
			if (lq && rc > lq)
				wait = rc - lq; /* waiting on a run queue now */
			u64 cpu, off, run, exec, rd;
			resume_split(task, st, span, wait, &cpu, &off, &run, &exec, &rd);
			st->time[ST_ONCPU] += cpu;
			add_time(st, ST_RUNNABLE, run);
			add_time(st, k, off - run);
		}
	}
	/* From here to the end user space counts in the state it is in now. */
	st->in_ts = now;
	st->out_ts = now;
	st->wake_ts = 0;
	st->out_state = running ? ST_ONCPU : k;
	st->on_cpu = running;
	return !running;
}

/* ======================================================================
 * The end of a recording (both modes).
 * ====================================================================== */

/* unwind_task is unwind_user for a thread of a target read from the task
 * iterator at the end of the recording (one blocked since before it began). */
static __always_inline bool unwind_task(struct task_struct *task, struct sample_event *e)
{
	if (!unwind_tables || !e->ip)
		return false;
	u32 tgid = e->pid;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	struct unw_ctx c = {.ip = e->ip, .sp = e->sp, .bp = e->bp, .tgid = tgid, .why = UNWR_DEPTH, .task = task,
			    .g = BPF_CORE_READ(regs, r14)};
	if (!unw_ctx_init(&c, tgid))
		return false;
	u32 nomap = unw_lookup(&c.k, e->ip) == -2 ? UNW_NOMAP : 0;
	bpf_loop(MAX_STACK, unw_step_task, &c, 0);
	u32 zero = 0;
	struct unw_frames *fr = bpf_map_lookup_elem(&unw_iter_frames, &zero);
	if (!fr)
		return false;
	u32 n = c.n;
	if (n > MAX_STACK)
		n = MAX_STACK;
	bpf_probe_read_kernel(e->ustack, sizeof(e->ustack), fr->pc);
	e->ulen = n * 8;
	e->unwind = UNW_DONE | nomap | c.why;
	return true;
}

/* walk_task_user walks task's user stack by frame pointers from its saved
 * registers (ip, bp) through its memory (a sleepable program), leaf first,
 * into out (MAX_STACK entries); it returns the entries filled. */
static __always_inline int walk_task_user(struct task_struct *task, u64 ip, u64 bp, u64 *out)
{
	int n = 1;
	out[0] = ip;
	for (int i = 1; i < MAX_STACK; i++) {
		u64 frame[2];
		if (!bp || (bp & 7))
			break;
		if (bpf_copy_from_user_task(frame, sizeof(frame), (void *)bp, task, 0))
			break;
		if (!frame[1])
			break;
		out[i] = frame[1];
		n = i + 1;
		if (frame[0] <= bp)
			break;
		bp = frame[0];
	}
	return n;
}

/* snapshot_task copies task's user stack memory at sp into out (SNAP_BYTES),
 * for the user-space unwinder that recovers frames the frame-pointer walk
 * skips; it returns the bytes copied (up to the page end if the stack ends
 * there). */
static __always_inline u32 snapshot_task(struct task_struct *task, u64 sp, u8 *out)
{
	if (!sp)
		return 0;
	if (bpf_copy_from_user_task(out, SNAP_BYTES, (void *)sp, task, 0) == 0)
		return SNAP_BYTES;
	u32 m = 4096 - (sp & 4095);
	if (m > SNAP_BYTES)
		m = SNAP_BYTES;
	if (bpf_copy_from_user_task(out, m, (void *)sp, task, 0) == 0)
		return m;
	count_lost(LOST_SNAPSHOT);
	return 0;
}

/* task_event starts a sample of thread tid of process pid, read from
 * another thread's context, in context slot's buffer, with its header and
 * weight w in state k (none when k is NSTATES) filled in. */
static __always_inline struct sample_event *task_event(u32 slot, u32 pid, u32 tid, u32 flags, u32 k, u64 w)
{
	struct sample_event *e = sample_buf(slot);
	if (!e)
		return NULL;
	e->type = EV_SAMPLE;
	e->pid = pid;
	e->tid = tid;
	e->flags = flags;
	e->unwind = 0;
	e->ts = bpf_ktime_get_ns();
#pragma unroll
	for (int i = 0; i < NSTATES; i++)
		e->weight[i] = i == k ? w : 0;
	return e;
}

/* emit_task_sample sends the stacks of task, a thread of a target that is
 * off CPU, read from another thread's context (a task iterator), with
 * weight w in state k (none when k is NSTATES). */
static __always_inline void emit_task_sample(struct task_struct *task, u32 tid, u32 flags, u32 k, u64 w)
{
	struct sample_event *e = task_event(SLOT_ITER, task->tgid, tid, flags, k, w);
	if (!e)
		return;
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), task->comm);
	read_user_regs(task, e);
	e->klen = bpf_get_task_stack(task, e->kstack, sizeof(e->kstack), 0);
	if (e->klen < 0)
		count_lost(LOST_KSTACK);

	if (!unwind_task(task, e))
		e->ulen = walk_task_user(task, e->ip, e->bp, e->ustack) * 8;
	e->snap_len = snapshot_task(task, e->sp, e->snap);
	send_sample(e, SLOT_ITER, false);
}

/* End of recording: the stacks of target threads that are off CPU. The
 * weights are filled in by user space from the thread table. */
SEC("iter.s/task")
int dump_offcpu(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	if (!task)
		return 0;
	u32 tid = task->pid;
	struct tstate *st = bpf_map_lookup_elem(&threads, &tid);
	if (!st || st->exited)
		return 0;
	if (resume_mode) {
		if (!resume_close(task, st))
			return 0;
	} else if (st->on_cpu) {
		return 0;
	}
	emit_task_sample(task, tid, SAMPLE_FINAL, NSTATES, 0);
	return 0;
}

/* WALKED_OUT marks a pending carry (last_runnable) for a thread that the
 * walker preempted: the rest is when walk_states saw it. */
#define WALKED_OUT (1ULL << 63)

/* walked_out reports whether task, runnable, waits for the CPU that the
 * walk itself runs on, put back on its queue when the walker arrived there
 * (the scheduler stamps both with one clock reading): the walker preempted
 * it. (A thread woken during the walk is queued later: it waits, and is
 * sampled waiting.) It was running at the walk's instant; its wait for
 * the walk is real (counted runnable) but lasts the walk, not the time
 * since the previous one: weighed as such (WALKED_OUT), or the stacks it
 * is preempted in would take the runnable time of those it really waits
 * in. */
static __always_inline bool walked_out(struct task_struct *task, u64 since)
{
	if (task_cpu(task) != bpf_get_smp_processor_id())
		return false;
	if (!bpf_core_field_exists(task->sched_info.last_queued))
		return false;
	u64 q = task->sched_info.last_queued;
	return q && q == since;
}

/* walk_hold adds w, in off-CPU state k, to what st holds for its latest
 * sample in that state (st->acc, which walk mode uses for nothing else):
 * a thread that waits where it waited at the previous walk costs no event.
 * walk_release sends it when the thread moves, before any sample of its
 * new wait; what is still held at its exit or the end of the recording
 * goes with its times (Result.Remainders). */
static __always_inline void walk_hold(struct tstate *st, u32 k, u64 w)
{
	add_in(st->acc, k, w);
}

static __always_inline void emit_walk_carry(u32 slot, u32 pid, u32 tid, u32 k, u64 w, u64 ip, u64 sp, u64 bp);

/* walk_release sends the weights held for the thread: they belong to the
 * sample at the place of its latest stack (walk_ip...). */
static __always_inline void walk_release(u32 slot, struct tstate *st, u32 pid, u32 tid)
{
	for (u32 k = ST_RUNNABLE; k < NSTATES; k++) {
		u64 w = st->acc[k];
		if (w) {
			st->acc[k] = 0;
			if (k == st->walk_k)
				emit_walk_carry(slot, pid, tid, k, w, st->walk_ip, st->walk_sp, st->walk_bp);
			else
				emit_walk_carry(slot, pid, tid, k, w, 0, 0, 0);
		}
	}
}

/* emit_walk_carry sends w, in state k, for thread tid of process pid
 * without a stack: user space adds it to the thread's latest sample in that
 * state at the place of the saved user registers ip, sp and bp (the same
 * wait, or the same call of it), or failing that, to its latest sample in
 * that state. */
static __always_inline void emit_walk_carry(u32 slot, u32 pid, u32 tid, u32 k, u64 w, u64 ip, u64 sp, u64 bp)
{
	struct sample_event *e = task_event(slot, pid, tid, SAMPLE_CARRY | SAMPLE_WALK, k, w);
	if (!e)
		return;
	e->comm[0] = 0;
	e->ip = ip;
	e->sp = sp;
	e->bp = bp;
	e->klen = 0;
	e->ulen = 0;
	e->snap_len = 0;
	send_sample(e, slot, false);
}

/* The walk's instant, for walk_kind: when the walker was woken for it.
 * It arrives on a CPU a little later (tens of microseconds when every CPU
 * is busy: it is an ordinary thread), and may be preempted during the
 * walk; the threads it reads go on meanwhile. Taken at the walk's first
 * thread (the walker's voluntary switch count moved: it slept) from its
 * latest arrival less the wait on a run queue since the previous walk's
 * last thread (schedstat's run_delay), and kept for the rest of the walk.
 * One walk at a time (user space's lock); the first and last walks run
 * from another thread (walk_tid). walk_gen counts the walks, walk_prev_at
 * is the previous walk's instant. */
static u32 walk_tid, walk_gen;
static u64 walk_nvcsw, walk_rd, walk_at, walk_prev_at;
/* How many threads the walk's first pass left a sample pending for: user
 * space reads it (memory-mapped) and skips the second pass when none. */
volatile u32 walk_pending = 0;
/* How many target threads the walk's first pass read: user space spaces
 * the walks of many threads further apart. */
volatile u32 walk_threads = 0;

static __always_inline u64 walk_instant(struct task_struct *me)
{
	u64 rd = me->sched_info.run_delay;
	u64 nv = me->nvcsw;
	u32 tid = me->pid;
	if (tid != walk_tid || nv != walk_nvcsw) {
		u64 arrival = me->sched_info.last_arrival;
		u64 waited = tid == walk_tid && rd > walk_rd ? rd - walk_rd : 0;
		/* After the timer's walks (walk_tid 0), whose instants are on
		 * another clock, no previous instant: the weights run from the
		 * threads' latest reads. */
		walk_prev_at = walk_tid || !walk_gen ? walk_at : 0;
		walk_at = arrival > waited ? arrival - waited : arrival;
		walk_gen++;
		walk_pending = 0;
		walk_threads = 0;
		walk_tid = tid;
		walk_nvcsw = nv;
	}
	walk_rd = rd;
	return walk_at;
}

/* Walk mode, eight times per sampling period, from user space on its own CPU (see
 * walk_account), in two passes so that every thread's state is read at
 * nearly one instant: the stacks take ~10 us a thread to read, and while
 * the walker holds a CPU the threads it has not read yet change state
 * around it (those woken meanwhile cannot run on it).
 *
 * walk_states: every target thread's times brought up to now and the state
 * it is in taken; one that is off CPU gets a sample pending, of the time
 * since its previous walk (the walks come late when the CPUs are busy, and
 * a nominal period each would make busy moments weigh less), in that state
 * (out_state), with its switch count then (pad2). */
/* The timer's buffer for a kernel stack (walk_thread): its own, as the
 * callback, in a softirq, may interrupt a program that uses scratch. */
struct walk_kbuf {
	u64 ips[MAX_STACK];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct walk_kbuf);
} walk_kbufs SEC(".maps");

/* WALK_NEAR_NS: the CPU time a thread may have run since it was last found
 * at the place of its latest stack for a walk that finds it at the same
 * registers and kernel stack to take it as the same place (walk_near). */
#define WALK_NEAR_NS 1000000ULL

/* walk_near reports whether task has run little since it was last found at
 * the place of st's latest stack: the registers and kernel stack of a
 * blocking call are those of another call of the same function from the
 * same depth (cgt's crowd_wait and crowd_nap call nanosleep alike), told
 * apart only by the user stack, which walk_thread does not read; a thread
 * that ran a millisecond of CPU since may well have come back by another
 * path, and its stack is read again. (A server thread back at its poll
 * after a short request is not.) It notes the thread's CPU time when it is. */
static __always_inline bool walk_near(struct task_struct *task, struct tstate *st)
{
	u64 exec = task->se.sum_exec_runtime;
	if (exec - st->walk_exec > WALK_NEAR_NS)
		return false;
	st->walk_exec = exec;
	return true;
}

/* walk_at_latest reports whether task waits at the place its latest stack
 * was taken at: the same state k, saved user registers ip, sp and bp, kernel
 * stack (read only when the rest is the same) and unwind tables of its
 * process. (Only the latest place: two calls of one blocking function from
 * the same depth have the same registers and kernel stack, and differ only
 * in the user stack, which the timer cannot read; a thread that waits at
 * A, B, A has its stack read at each.) */
static __always_inline bool walk_at_latest(struct task_struct *task, struct tstate *st, u32 k, u64 ip, u64 sp, u64 bp)
{
	if (k != st->walk_k || ip != st->walk_ip || sp != st->walk_sp || bp != st->walk_bp || !st->walk_kh ||
	    !walk_near(task, st))
		return false;
	u32 zero = 0;
	struct walk_kbuf *kb = bpf_map_lookup_elem(&walk_kbufs, &zero);
	if (!kb)
		return false;
	long klen = bpf_get_task_stack(task, kb->ips, sizeof(kb->ips), 0);
	u64 kh = klen;
	for (int i = 0; i < MAX_STACK; i++) {
		if (i * 8 >= klen)
			break;
		kh = (kh ^ kb->ips[i]) * 0x100000001b3ULL;
	}
	u32 tgid = task->tgid;
	struct unw_proc *up = bpf_map_lookup_elem(&unw_procs, &tgid);
	u32 tables = up ? up->gen : 0;
	return kh == st->walk_kh && tables == st->walk_tables;
}

/* A thread read by the timer is read at the walk's instant: nothing it did
 * was after it (walk_kind). */
#define WALK_NOW (~0ULL)
/* The weight of each sample of the timer's walk: the mean interval it was
 * drawn with (walk_tick). */
static u64 walk_w;

/* walk_thread is the first pass over one thread: from walk_states (timed
 * false: the thread walker, since its instant, arrival its arrival on its
 * CPU) or from the timer (walk_timed). A constant, so that each program
 * carries, and the verifier checks, only its own branches. */
static __always_inline void walk_thread(struct task_struct *task, u64 since, u64 arrival, const bool timed)
{
	u32 tid = task->pid;
	u32 tgid = task->tgid;
	/* An exiting thread is its exit's (sched_process_exit, in its own
	 * context, accounts its last interval and sends its record): a walk
	 * that wrote its record meanwhile, from another CPU, or entered it
	 * again once its exit had removed it, left times that were not its
	 * own. */
	if (task->flags & PF_EXITING)
		return;
	u64 born = task->start_time;
	struct tstate *st = bpf_map_lookup_elem(&threads, &tid);
	if (st && st->born != born && (st->born || st->based) && born > start_ns) {
		/* The record of an earlier thread with this id. */
		st = renew_thread(tid, tgid, born);
		if (!st)
			return;
		st->born = born;
		barrier();
		st->in_ts = born;
		st->based = 1;
	}
	if (!st) {
		st = lookup_thread(tid, tgid, 0, NEW_RUNNING);
		if (!st)
			return;
		if (!st->born)
			st->born = born;
		barrier(); /* whose it is, before it is based (on_wakeup_new) */
		if (!st->based && born > start_ns) {
			/* Created since the recording began, and walked before
			 * its creation reached sched_wakeup_new: its counters
			 * start at zero at its creation, as there. */
			st->first_ts = born;
			st->in_ts = born;
			st->out_state = ST_RUNNABLE;
			st->based = 1;
		}
	}
	if (st->exited)
		return;
	if (!st->born)
		st->born = born; /* entered by user space */
	/* From the timer, which walks while user space takes the stacks of an
	 * earlier walk: a thread whose stack is still to be taken is left as
	 * it is (its times are brought up at its next walk, its sample's
	 * fields stay as walk_stacks will read them). */
	walk_threads++;
	u64 pend = st->last_runnable;
	if (timed && pend) {
		/* Its state now is sampled all the same (the walks' instants
		 * would otherwise avoid the moments after a walk that found
		 * stacks to take). Still in the wait of its pending sample (no
		 * switch since), it adds to that sample (unless walk_stacks
		 * takes it meanwhile); elsewhere off CPU, its weight goes to the
		 * sample at the place it waits at now. */
		u8 k = walk_kind(task, since);
		if (k == ST_ONCPU)
			return;
		u32 switches = (u32)(task->nvcsw + task->nivcsw);
		if (k == st->out_state && switches == st->pad2 && !(pend & WALKED_OUT) &&
		    __sync_val_compare_and_swap(&st->last_runnable, pend, pend + walk_w) == pend)
			return;
		struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
		emit_walk_carry(timed ? SLOT_WTIMER : SLOT_ITER, tgid, tid, k, walk_w, BPF_CORE_READ(regs, ip), BPF_CORE_READ(regs, sp),
				BPF_CORE_READ(regs, bp));
		return;
	}
	u64 now = bpf_ktime_get_ns();
	u64 prev = st->based ? st->in_ts : st->first_ts;
	u64 w = prev && now > prev ? now - prev : period_ns;
	/* Read by the previous walk too: its sample weighs the time between
	 * the two walks' instants, which the timer sets, rather than between
	 * the two reads, which come later when the CPUs are busy (and so with
	 * what the threads do then). */
	if (timed)
		w = walk_w; /* each of the timer's walks stands for its mean interval (walk_tick) */
	else if (st->based && walk_gen > 1 && st->walk_gen == walk_gen - 1 && walk_prev_at && walk_at > walk_prev_at)
		w = walk_at - walk_prev_at;
	st->walk_gen = walk_gen;
	u8 was = st->out_state;
	bool seen = st->based;
	u8 k = walk_account(task, st, now, since);
	u32 switches = (u32)(task->nvcsw + task->nivcsw);
	u32 before = st->pad2;
	st->pad2 = switches;
	st->last_runnable = 0;
	bool same = seen && k == was && switches == before;
	/* From the timer, a thread that moved but waits at the place of its
	 * latest stack (the same user registers and kernel stack, in the same
	 * state: a thread of a server blocks in the same few places over and
	 * over) adds to that sample there and then: no stack to take, no
	 * wake-up of wallprof. */
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	u64 ip = 0, sp = 0, bp = 0;
	bool there = false;
	if (!same && k != ST_ONCPU) {
		/* (Not read for a thread in the same wait: a walk of a
		 * thousand idle threads.) */
		ip = BPF_CORE_READ(regs, ip);
		sp = BPF_CORE_READ(regs, sp);
		bp = BPF_CORE_READ(regs, bp);
		there = timed && seen && walk_at_latest(task, st, k, ip, sp, bp);
	}
	if (!same && !there)
		walk_release(timed ? SLOT_WTIMER : SLOT_ITER, st, task->tgid, tid); /* it moved */
	if (k == ST_ONCPU)
		return;
	if (k == ST_RUNNABLE && arrival && walked_out(task, arrival)) {
		/* Running at the walk's instant, it waits for the walk: that
		 * wait (counted runnable) is sampled for what it lasts, not
		 * for the time since the previous walk (walk_stacks). */
		st->out_state = ST_ONCPU; /* no sample of a wait of its own yet */
		st->last_runnable = WALKED_OUT | now;
		walk_pending++;
		return;
	}
	if (same) {
		/* Unless its process's unwind tables changed since its stack
		 * was taken (walk_stacks reads it again). */
		u32 tgid = task->tgid;
		struct unw_proc *up = bpf_map_lookup_elem(&unw_procs, &tgid);
		same = !up || up->gen == st->walk_tables;
	}
	if (same || there) {
		/* In the wait it was in at the previous walk, which took its
		 * stack (or at that place again): the time goes to that
		 * sample. */
		walk_hold(st, k, w);
		return;
	}
	if (!ip && !sp && !bp) {
		/* In the same wait, whose stack is read again (see above). */
		ip = BPF_CORE_READ(regs, ip);
		sp = BPF_CORE_READ(regs, sp);
		bp = BPF_CORE_READ(regs, bp);
	}
	st->inst_ip = ip;
	st->inst_sp = sp;
	st->inst_bp = bp;
	barrier(); /* the sample's fields before it is pending (walk_stacks) */
	st->last_runnable = w;
	walk_pending++;
}

SEC("iter.s/task")
int walk_states(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	if (!task)
		return 0;
	if (task->pid == 0 || !is_target(task->tgid))
		return 0;
	if (ctx->meta->seq_num == 0) {
		/* One byte per walk of a live target: a process's iterator that
		 * yields none has no threads left, and user space stops walking
		 * it. */
		u8 alive = 1;
		bpf_seq_write(ctx->meta->seq, &alive, 1);
	}
	struct task_struct *me = bpf_get_current_task_btf();
	u64 since = walk_instant(me);
	walk_thread(task, since ? since : 1, me->sched_info.last_arrival, false);
	return 0;
}

/* ----------------------------------------------------------------------
 * The first pass from a BPF timer (doc/walk-timer.md; Linux 6.7+, the
 * open-coded task iterator). walk_timer_start, run once by user space,
 * starts a timer pinned to its CPU whose callback, walk_tick, is a walk's
 * first pass: its instant is the callback's (every target thread is read
 * within microseconds of it, where the iterator walker reads them 30 us to
 * 400 us after its timer fired), and no thread of wallprof wakes for a walk
 * that leaves no stack to take. When one does (walk_pending), or the target
 * processes changed (target_forks), user space is woken (walk_wake) and runs
 * walk_stacks. The walks go on meanwhile (skipping them would leave out of
 * every sample the moments when wallprof's thread takes a CPU from the
 * target's: -0.7 point of runnable time in the bursts test's compute
 * phases), but not over a thread whose stack is still to be taken.
 * ---------------------------------------------------------------------- */

extern int bpf_iter_task_new(struct bpf_iter_task *it, struct task_struct *task, unsigned int flags) __ksym;
extern struct task_struct *bpf_iter_task_next(struct bpf_iter_task *it) __ksym;
extern void bpf_iter_task_destroy(struct bpf_iter_task *it) __ksym;
extern struct task_struct *bpf_task_from_pid(s32 pid) __ksym;
extern void bpf_task_release(struct task_struct *p) __ksym;

#define TASK_ITER_ALL_THREADS 1
#define TASK_ITER_PROC_THREADS 2
#define TIMER_ABS (1ULL << 0)
#define TIMER_CPU_PIN (1ULL << 1)

struct walk_timer {
	struct bpf_timer t;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct walk_timer);
} walk_timers SEC(".maps");

/* One record when a walk left stacks to take or the targets changed. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} walk_wake SEC(".maps");

/* The live target processes the timer walks, written by user space, with
 * target_forks as of then (forks); a process found gone has its slot
 * zeroed. n > MAX_WALK_PIDS: every thread of the machine is looked at
 * (is_target). */
#define MAX_WALK_PIDS 64
struct walk_list {
	u32 n;
	u32 forks;
	u32 pid[MAX_WALK_PIDS];
};
struct walk_list walk_procs = {};

/* Set by user space: the mean interval between two walks, the longest one
 * (the sampling period), and the end. */
volatile u64 walk_every_ns = 0;
volatile u64 walk_max_ns = 0;
/* How many threads a walk reads at the full rate: past them the walks are
 * spaced further apart (collect.timerWalkThreads). */
volatile u32 walk_full = 16;
volatile u32 walk_stop = 0;
/* The timer's firings, its time in all (ns), and what starting it
 * returned. */
volatile u64 walk_fires = 0;
volatile u64 walk_tick_ns = 0;
volatile s64 walk_start_err = 0;
static u64 walk_next;
/* Quantiles of the distribution of the timer's intervals, of mean 1
 * (x 65536), written by user space (collect.walkGapQuantiles): each
 * interval is drawn from them. */
#define WALK_GAPS 1024
u32 walk_gaps[WALK_GAPS] = {};

/* walk_timed is walk_thread from the timer: a function of its own, which
 * the verifier checks once (inline in the timer's loops, it took seconds). */
#define __arg_trusted __attribute__((btf_decl_tag("arg:trusted")))
__attribute__((noinline)) int walk_timed(struct task_struct *task __arg_trusted)
{
	if (task->pid)
		walk_thread(task, WALK_NOW, 0, true);
	return 0;
}

/* walk_pid walks the threads of the process in slot i of walk_procs. */
static int walk_pid(u32 i, void *unused)
{
	if (i >= MAX_WALK_PIDS)
		return 1;
	u32 pid = walk_procs.pid[i];
	if (!pid)
		return 0;
	struct task_struct *leader = bpf_task_from_pid(pid);
	if (!leader) {
		walk_procs.pid[i] = 0; /* gone: user space forgets it */
		return 0;
	}
	struct bpf_iter_task it;
	struct task_struct *t;
	bpf_iter_task_new(&it, leader, TASK_ITER_PROC_THREADS);
	while ((t = bpf_iter_task_next(&it)))
		walk_timed(t);
	bpf_iter_task_destroy(&it);
	bpf_task_release(leader);
	return 0;
}

static int walk_tick(void *map, int *key, struct walk_timer *wt)
{
	if (walk_stop)
		return 0;
	u64 t0 = bpf_ktime_get_ns();
	walk_fires++;
	walk_prev_at = walk_tid ? 0 : walk_at; /* see walk_instant */
	walk_at = t0;
	walk_gen++;
	walk_pending = 0;
	walk_threads = 0;
	walk_tid = 0; /* the next iterator walk is a new walk */
	u32 procs = walk_procs.n;
	if (procs > MAX_WALK_PIDS) {
		struct bpf_iter_task it;
		struct task_struct *t;
		bpf_iter_task_new(&it, NULL, TASK_ITER_ALL_THREADS);
		while ((t = bpf_iter_task_next(&it)))
			if (is_target(t->tgid))
				walk_timed(t);
		bpf_iter_task_destroy(&it);
	} else {
		bpf_loop(procs, walk_pid, NULL, 0);
	}
	if (walk_pending || walk_procs.forks != target_forks) {
		u32 one = 1;
		bpf_ringbuf_output(&walk_wake, &one, sizeof(one), BPF_RB_FORCE_WAKEUP);
	}
	/* The next walk, an interval drawn from walk_gaps away: a distribution
	 * whose walks sample the moments right after a walk at the same rate
	 * as any other (when wallprof's thread takes the stacks: with
	 * intervals of half a period or more, -0.7 point of runnable time in
	 * the bursts test's compute phases; see collect.walkGapQuantiles). Its
	 * mean is spaced further past walk_full threads
	 * (collect.walker.spacing). */
	u64 mean = walk_every_ns;
	u32 n = walk_threads;
	u32 full = walk_full ? walk_full : 1;
	if (n > full) {
		mean = mean * n / full;
		if (mean > walk_max_ns)
			mean = walk_max_ns;
	}
	if (mean > 4000000000ULL)
		mean = 4000000000ULL;
	walk_w = mean;
	u32 q = bpf_get_prandom_u32() & (WALK_GAPS - 1);
	u64 next = walk_next + ((mean * walk_gaps[q]) >> 16);
	u64 end = bpf_ktime_get_ns();
	if (next <= end)
		next = end + 1; /* late: from now on */
	walk_next = next;
	walk_tick_ns += end - t0;
	bpf_timer_start(&wt->t, next, TIMER_ABS | TIMER_CPU_PIN);
	return 0;
}

SEC("syscall")
int walk_timer_start(void *ctx)
{
	u32 zero = 0;
	struct walk_timer *wt = bpf_map_lookup_elem(&walk_timers, &zero);
	if (!wt)
		return 1;
	long err = bpf_timer_init(&wt->t, &walk_timers, 1 /* CLOCK_MONOTONIC */);
	if (!err)
		err = bpf_timer_set_callback(&wt->t, walk_tick);
	walk_next = bpf_ktime_get_ns() + walk_every_ns;
	walk_w = walk_every_ns;
	if (!err)
		err = bpf_timer_start(&wt->t, walk_next, TIMER_ABS | TIMER_CPU_PIN);
	walk_start_err = err;
	return 0;
}

/* walk_timer_stop ends the walks: when it returns, no callback runs. */
SEC("syscall")
int walk_timer_stop(void *ctx)
{
	walk_stop = 1;
	u32 zero = 0;
	struct walk_timer *wt = bpf_map_lookup_elem(&walk_timers, &zero);
	if (wt)
		bpf_timer_cancel(&wt->t);
	return 0;
}

/* walk_stacks, right after walk_states: the stacks of the threads with a
 * sample pending. One that has run since (its switch count moved, or it
 * is on a CPU now) may be elsewhere: its time goes to its latest sample in
 * that state, without a stack. */
SEC("iter.s/task")
int walk_stacks(struct bpf_iter__task *ctx)
{
	struct task_struct *me = bpf_get_current_task_btf();
	if (me->pid == walk_tid)
		walk_rd = me->sched_info.run_delay; /* see walk_instant */
	struct task_struct *task = ctx->task;
	if (!task)
		return 0;
	u32 tid = task->pid;
	if (tid == 0 || !is_target(task->tgid))
		return 0;
	struct tstate *st = bpf_map_lookup_elem(&threads, &tid);
	if (!st || st->exited || !st->last_runnable)
		return 0;
	/* The sample's fields, then the sample taken (the timer may walk the
	 * thread again as soon as it is no longer pending, walk_thread). */
	u32 k = st->out_state, switches = st->pad2;
	u64 iip = st->inst_ip, isp = st->inst_sp, ibp = st->inst_bp;
	barrier();
	u64 w = __sync_lock_test_and_set(&st->last_runnable, 0);
	if (!w)
		return 0;
	if (w & WALKED_OUT) {
		/* Preempted by the walker: its wait lasted the walk so far,
		 * and its stack is where it was preempted (unless it has run
		 * on another CPU since: taken all the same). */
		u64 at = w & ~WALKED_OUT;
		u64 now = bpf_ktime_get_ns();
		emit_task_sample(task, tid, SAMPLE_WALK, ST_RUNNABLE, now > at ? now - at : 1);
		return 0;
	}
	if (k >= NSTATES)
		k = ST_OTHER;
	if (task->on_cpu || (u32)(task->nvcsw + task->nivcsw) != switches) {
		emit_walk_carry(SLOT_ITER, task->tgid, tid, k, w, iip, isp, ibp);
		if (walk_every_ns) {
			/* From the timer: it waited there, and a later walk
			 * that finds it in the same wait holds its time for
			 * that place (walk_hold), not for the place of its
			 * latest stack. (The kernel stack is not known: the
			 * next stack taken is read again.) Not for the thread
			 * walker, whose accuracy on the bursts was measured
			 * without it (doc/walk-timer.md). */
			st->walk_ip = iip;
			st->walk_sp = isp;
			st->walk_bp = ibp;
			st->walk_kh = 0;
			st->walk_k = k;
		}
		return 0;
	}
	/* Waiting where its latest stack was taken (the same user registers
	 * and kernel stack, in the same state): a thread of a server blocks
	 * in the same few places over and over. Its weight goes to that
	 * sample; its user stack (read from another process's memory, the
	 * walk's dearest part) is not read again. */
	u32 zero = 0;
	struct sample_event *e = bpf_map_lookup_elem(&scratch, &zero);
	if (!e)
		return 0;
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	u64 ip = BPF_CORE_READ(regs, ip), sp = BPF_CORE_READ(regs, sp), bp = BPF_CORE_READ(regs, bp);
	long klen = bpf_get_task_stack(task, e->kstack, sizeof(e->kstack), 0);
	u64 kh = klen;
	for (int i = 0; i < MAX_STACK; i++) {
		if (i * 8 >= klen)
			break;
		kh = (kh ^ e->kstack[i]) * 0x100000001b3ULL;
	}
	u32 tgid = task->tgid;
	struct unw_proc *up = bpf_map_lookup_elem(&unw_procs, &tgid);
	u32 tables = up ? up->gen : 0;
	/* (Unless its process's unwind tables changed since: a thread that
	 * blocked as its process started was read with frame pointers alone,
	 * before the tables of its program were loaded.) */
	if (st->walk_ip == ip && st->walk_sp == sp && st->walk_bp == bp && st->walk_kh == kh && st->walk_k == k &&
	    st->walk_tables == tables && (!walk_every_ns || walk_near(task, st))) {
		walk_hold(st, k, w);
		return 0;
	}
	st->walk_exec = task->se.sum_exec_runtime;
	st->walk_tables = tables;
	st->walk_ip = ip;
	st->walk_sp = sp;
	st->walk_bp = bp;
	st->walk_kh = kh;
	st->walk_k = k;
	emit_task_sample(task, tid, SAMPLE_WALK, k, w);
	return 0;
}

/* ======================================================================
 * A snapshot of one process's threads now (wallprof dump).
 *
 * A task iterator of its own, loaded alone (collect.SnapshotThreads): no
 * other program of this file is attached, no thread table is used. For every
 * thread of snap_tgid it writes one struct thread_snap to the iterator's
 * output: its scheduler state, the scheduler's timestamps user space derives
 * the time in that state from, and its stacks as dump_offcpu takes them.
 * ====================================================================== */

/* The process to snapshot, set by user space before loading. */
const volatile u32 snap_tgid = 0;

struct thread_snap {
	u32 pid;
	u32 tid;
	u32 state;  /* task->__state: 0 running or runnable, else TASK_* bits */
	u32 flags;  /* task->flags (PF_EXITING...) */
	s32 on_cpu; /* on a CPU now */
	s32 on_rq;  /* on a run queue (running or runnable) */
	u32 cpu;    /* the CPU whose run queue it is (or was last) on */
	u32 pad;
	u64 now;          /* bpf_ktime_get_ns() (CLOCK_MONOTONIC) when read */
	u64 rq_clock;     /* its run queue's clock (rq->clock), as last updated */
	u64 my_rq_clock;  /* the reading CPU's run queue's clock */
	u64 rq_clock_task; /* its run queue's clock_task (less steal and IRQ time) */
	u64 exec_start;   /* se.exec_start: rq clock_task when its CPU time was last charged */
	u64 sum_exec;     /* se.sum_exec_runtime: its CPU time */
	u64 prev_sum_exec; /* se.prev_sum_exec_runtime: its CPU time at its latest switch-in */
	u64 last_arrival; /* sched_info.last_arrival: rq clock at its latest switch-in */
	u64 last_queued;  /* sched_info.last_queued: rq clock when its current wait for a CPU began, 0 if none */
	u64 run_delay;    /* sched_info.run_delay: its total wait for a CPU */
	u64 nvcsw, nivcsw;
	char comm[16];
	u64 ip, sp, bp; /* saved user registers */
	s32 klen;       /* bytes of kstack, or negative errno */
	s32 ulen;       /* bytes of ustack */
	u32 snap_len;
	u32 pad2;
	u64 kstack[MAX_STACK];
	u64 ustack[MAX_STACK];
	u8 snap[SNAP_BYTES];
};

const struct thread_snap *unused_thread_snap __attribute__((unused));

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, u32);
	__type(value, struct thread_snap);
} snap_buf SEC(".maps");


SEC("iter.s/task")
int snapshot_threads(struct bpf_iter__task *ctx)
{
	struct task_struct *task = ctx->task;
	if (!task || (u32)task->tgid != snap_tgid)
		return 0;
	u32 zero = 0;
	/* Per CPU: the program stays on its CPU (sleepable programs run with
	 * migration disabled). Two dumps at once whose iterators sleep in a
	 * page fault on the same CPU could mix a record: not guarded. */
	struct thread_snap *e = bpf_map_lookup_elem(&snap_buf, &zero);
	if (!e)
		return 0;
	e->pid = task->tgid;
	e->tid = task->pid;
	e->state = task->__state;
	e->flags = task->flags;
	e->on_cpu = task->on_cpu;
	e->on_rq = task->on_rq;
	e->cpu = task_cpu(task);
	e->pad = 0;
	/* The clocks first, the stacks after: a thread that runs meanwhile
	 * shows the stack it ran into, its timestamps say when it was read. */
	e->now = bpf_ktime_get_ns();
	rq_clocks(task, &e->rq_clock, &e->rq_clock_task);
	u64 mine;
	rq_clocks(bpf_get_current_task_btf(), &e->my_rq_clock, &mine);
	e->exec_start = task->se.exec_start;
	e->sum_exec = task->se.sum_exec_runtime;
	e->prev_sum_exec = 0;
	if (bpf_core_field_exists(task->se.prev_sum_exec_runtime))
		e->prev_sum_exec = task->se.prev_sum_exec_runtime;
	e->last_arrival = 0;
	e->last_queued = 0;
	e->run_delay = 0;
	if (bpf_core_field_exists(task->sched_info.last_arrival)) {
		e->last_arrival = task->sched_info.last_arrival;
		e->last_queued = task->sched_info.last_queued;
		e->run_delay = task->sched_info.run_delay;
	}
	e->nvcsw = task->nvcsw;
	e->nivcsw = task->nivcsw;
	bpf_probe_read_kernel_str(e->comm, sizeof(e->comm), task->comm);
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	e->ip = BPF_CORE_READ(regs, ip);
	e->sp = BPF_CORE_READ(regs, sp);
	e->bp = BPF_CORE_READ(regs, bp);
	e->klen = bpf_get_task_stack(task, e->kstack, sizeof(e->kstack), 0);
	e->ulen = walk_task_user(task, e->ip, e->bp, e->ustack) * 8;
	e->snap_len = snapshot_task(task, e->sp, e->snap);
	e->pad2 = 0;
	bpf_seq_write(ctx->meta->seq, e, sizeof(*e));
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
