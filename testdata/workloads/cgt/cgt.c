/*
 * cgt: C ground-truth workload for wallprof's accuracy tests.
 *
 * Every worker thread runs one or more "phases". A phase is a noinline,
 * external function whose name is the phase name in the truth file, so a
 * test can look the function up in profile stacks. Around each phase the
 * thread reads CLOCK_MONOTONIC (wall), CLOCK_THREAD_CPUTIME_ID (on-CPU) and
 * the 2nd field of /proc/thread-self/schedstat (time spent runnable, waiting
 * on a run queue) and records the differences.
 *
 * Schedule (all durations are multiplied by --scale):
 *   stage 1, 0.0 s .. 1.0 s, at most one thread wants a CPU:
 *     burner   burn_cpu   spins for 1.0 s
 *     sleeper  do_sleep   nanosleep(1 ms) in a loop for 1.0 s
 *     reader   read_pipe  read() on a pipe until EOF (~1.0 s)
 *     writer   feed_pipe  writes one byte every 50 ms for 1.0 s, then closes
 *     waiter   wait_cond  pthread_cond_wait until main signals it at 0.5 s
 *     late     late_burn  (--late-threads) spawned at 0.5 s, spins 0.3 s
 *   stage 2, 1.0 s .. 2.0 s, 4 threads want a CPU (half runnable on 2 CPUs):
 *     contend  stage_wait pthread_barrier_wait until the burner is done
 *              contend    spins for 1.0 s
 *     spinner  stage_wait, spin   (3 threads) the same as contend
 * The stages are sequential so that burn_cpu really runs ~100% on a CPU and
 * contend's run_delay comes only from its own 3 competitors.
 * Total runtime is about 2.1 s x scale.
 *
 * With --bursts SECONDS, the schedule is instead one of phases shorter than
 * a sampling period at the default rate (99 Hz, 10.1 ms), repeated for
 * SECONDS, the way a request-serving thread spends its time:
 *     server   (2 threads) in a loop: serve_compute burns 3 ms of CPU,
 *              serve_sleep nanosleeps 5 ms, serve_wait writes a request on
 *              a pipe and reads the reply, which its feeder sends 2 ms later
 *     feeder   (one per server) feed_replies: read a request, nanosleep
 *              2 ms, write the reply, until the server closes its pipe
 *     crowd    (3 threads) crowd_wait sleeps through the first half (or
 *              --crowd-after SECONDS), then,
 *              in a loop: crowd_burst burns 2 ms of CPU, crowd_nap
 *              nanosleeps 1 ms
 * In the second half they want ~2.6 CPUs: on 2 CPUs every thread also
 * waits for one.
 * Each phase's times are summed over its repetitions.
 *
 * Options: --truth FILE (or env WALLPROF_TRUTH), --scale F,
 *   --start-delay MS, --late-threads, --exit-after MS (_exit(0) abruptly
 *   after MS; the truth written then has "partial": true), --bursts SECONDS,
 *   --crowd-after SECONDS.
 * The truth format is documented in internal/groundtruth/doc.go.
 *
 * Build: gcc -O1 -g -fno-omit-frame-pointer -pthread -o cgt cgt.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 16
#define MAX_PHASES 4
#define NSPINNERS 3

/* A phase's stolen time is the wall time of its runs that never blocked
 * (no voluntary context switch) that was neither CPU time nor a wait for a
 * CPU: on a virtual machine, what the hypervisor took while the thread held
 * a CPU (steal), which the kernel's CPU clock leaves out. */
struct phase {
	const char *name;
	int64_t wall_ns, cpu_ns, run_delay_ns, stolen_ns;
};

struct thread_rec {
	const char *name;
	pid_t tid;
	int64_t start_ns, end_ns;
	int nphases;
	struct phase phases[MAX_PHASES];
};

struct snap {
	int64_t wall, cpu, delay;
	long nvcsw; /* voluntary context switches */
};

static double scale = 1.0;
static const char *truth_path;
static int64_t t0_ns;      /* stage 1 starts; deadlines count from here */
static int64_t proc_start_ns; /* before the first thread is created */
static int late_threads;

static pthread_mutex_t rec_mu = PTHREAD_MUTEX_INITIALIZER;
static struct thread_rec recs[MAX_THREADS];
static int nrecs;

static pthread_barrier_t start_barrier, stage_barrier;
static int pipefd[2];
static pthread_mutex_t cond_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int cond_flag;
volatile uint64_t sink; /* keeps the spinning loops from being optimised out */

static int64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t scaled_ns(double seconds) { return (int64_t)(seconds * scale * 1e9); }

/* The thread's schedstat file, kept open by threads that read it often. */
static __thread int schedstat_fd = -1;

/* run_delay_ns returns the time this thread has spent on a run queue. */
static int64_t run_delay_ns(void)
{
	char buf[128];
	long long oncpu = 0, delay = 0;
	ssize_t n;
	if (schedstat_fd >= 0) {
		n = pread(schedstat_fd, buf, sizeof buf - 1, 0);
	} else {
		int fd = open("/proc/thread-self/schedstat", O_RDONLY);
		if (fd < 0)
			return 0;
		n = read(fd, buf, sizeof buf - 1);
		close(fd);
	}
	if (n <= 0)
		return 0;
	buf[n] = 0;
	if (sscanf(buf, "%lld %lld", &oncpu, &delay) != 2)
		return 0;
	return delay;
}

/* voluntary_switches returns how many times this thread has blocked. */
static long voluntary_switches(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_THREAD, &ru) != 0)
		return -1;
	return ru.ru_nvcsw;
}

/* phase_begin and phase_end read the clocks in mirrored order so that the
 * wall interval encloses the CPU and run-delay intervals. */
static void phase_begin(struct snap *s)
{
	s->wall = clock_ns(CLOCK_MONOTONIC);
	s->cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	s->delay = run_delay_ns();
	s->nvcsw = voluntary_switches();
}

/* phase_end adds the phase begun at b to the thread's record of name (a
 * phase run repeatedly adds up). */
static void phase_end(struct thread_rec *r, const char *name, const struct snap *b)
{
	struct snap e;
	e.nvcsw = voluntary_switches();
	e.delay = run_delay_ns();
	e.cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	e.wall = clock_ns(CLOCK_MONOTONIC);
	pthread_mutex_lock(&rec_mu);
	struct phase *p = NULL;
	for (int i = 0; i < r->nphases; i++)
		if (!strcmp(r->phases[i].name, name))
			p = &r->phases[i];
	if (!p && r->nphases < MAX_PHASES) {
		p = &r->phases[r->nphases++];
		p->name = name;
	}
	if (p) {
		p->wall_ns += e.wall - b->wall;
		p->cpu_ns += e.cpu - b->cpu;
		p->run_delay_ns += e.delay - b->delay;
		int64_t rest = (e.wall - b->wall) - (e.cpu - b->cpu) - (e.delay - b->delay);
		if (e.nvcsw >= 0 && e.nvcsw == b->nvcsw && rest > 0)
			p->stolen_ns += rest;
	}
	pthread_mutex_unlock(&rec_mu);
}

static struct thread_rec *thread_enter(const char *name)
{
	pthread_setname_np(pthread_self(), name);
	pthread_mutex_lock(&rec_mu);
	struct thread_rec *r = &recs[nrecs++];
	r->name = name;
	r->tid = (pid_t)syscall(SYS_gettid);
	r->start_ns = clock_ns(CLOCK_MONOTONIC);
	pthread_mutex_unlock(&rec_mu);
	return r;
}

static void thread_exit(struct thread_rec *r)
{
	int64_t now = clock_ns(CLOCK_MONOTONIC);
	pthread_mutex_lock(&rec_mu);
	r->end_ns = now;
	pthread_mutex_unlock(&rec_mu);
}

/* spin_until computes until CLOCK_MONOTONIC reaches deadline, checking the
 * clock after every ~1 ms of work (100k iterations of a multiply-add). */
static uint64_t spin_until(int64_t deadline)
{
	uint64_t x = 88172645463325252ull;
	while (clock_ns(CLOCK_MONOTONIC) < deadline) {
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
	}
	return x;
}

/* ---- phases: one external noinline function each ---- */

__attribute__((noinline)) void burn_cpu(int64_t deadline)
{
	uint64_t x = 1;
	while (clock_ns(CLOCK_MONOTONIC) < deadline) {
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
	}
	sink += x;
}

__attribute__((noinline)) void late_burn(int64_t deadline)
{
	uint64_t x = 3;
	while (clock_ns(CLOCK_MONOTONIC) < deadline) {
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
	}
	sink += x;
}

__attribute__((noinline)) void contend(int64_t deadline) { sink += spin_until(deadline); }

__attribute__((noinline)) void spin(int64_t deadline) { sink += spin_until(deadline); }

__attribute__((noinline)) void do_sleep(int64_t deadline)
{
	struct timespec ms = {0, 1000000};
	while (clock_ns(CLOCK_MONOTONIC) < deadline)
		nanosleep(&ms, NULL);
}

__attribute__((noinline)) void read_pipe(int fd)
{
	char buf[64];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n == 0 || (n < 0 && errno != EINTR))
			return;
	}
}

__attribute__((noinline)) void feed_pipe(int fd, int64_t deadline)
{
	struct timespec gap = {0, 50000000};
	while (clock_ns(CLOCK_MONOTONIC) < deadline) {
		nanosleep(&gap, NULL);
		if (write(fd, "x", 1) != 1)
			break;
	}
	close(fd);
}

__attribute__((noinline)) void wait_cond(void)
{
	pthread_mutex_lock(&cond_mu);
	while (!cond_flag)
		pthread_cond_wait(&cond, &cond_mu);
	pthread_mutex_unlock(&cond_mu);
}

__attribute__((noinline)) void stage_wait(void) { pthread_barrier_wait(&stage_barrier); }

/* burn_for computes until the thread has used ns of CPU time. */
static void burn_for(int64_t ns)
{
	int64_t end = clock_ns(CLOCK_THREAD_CPUTIME_ID) + ns;
	uint64_t x = 7;
	while (clock_ns(CLOCK_THREAD_CPUTIME_ID) < end) {
		for (int i = 0; i < 10000; i++)
			x = x * 6364136223846793005ull + 1442695040888963407ull;
	}
	sink += x;
}

static void nap_ns(int64_t ns)
{
	struct timespec ts = {ns / 1000000000, ns % 1000000000};
	nanosleep(&ts, NULL);
}

/* In bursts mode a phase measures itself, from inside its function: the
 * clocks are read (and, under load, the thread preempted while reading them)
 * where a profile sees the phase's function on the stack. phase_begin reads
 * the wall clock first, phase_end last. */
#define SELF_BEGIN \
	struct snap s_; \
	phase_begin(&s_)


__attribute__((noinline)) void serve_compute(struct thread_rec *r)
{
	SELF_BEGIN;
	burn_for(3000000);
	phase_end(r, __func__, &s_);
}

__attribute__((noinline)) void serve_sleep(struct thread_rec *r)
{
	SELF_BEGIN;
	nap_ns(5000000);
	phase_end(r, __func__, &s_);
}

__attribute__((noinline)) void serve_wait(struct thread_rec *r, int req, int rep)
{
	SELF_BEGIN;
	char c = 'q';
	if (write(req, &c, 1) == 1)
		while (read(rep, &c, 1) < 0 && errno == EINTR)
			;
	phase_end(r, __func__, &s_);
}

__attribute__((noinline)) void feed_replies(struct thread_rec *r, int req, int rep)
{
	SELF_BEGIN;
	char c;
	while (read(req, &c, 1) == 1) {
		nap_ns(2000000);
		if (write(rep, &c, 1) != 1)
			break;
	}
	phase_end(r, __func__, &s_);
}

__attribute__((noinline)) void crowd_burst(struct thread_rec *r)
{
	SELF_BEGIN;
	burn_for(2000000);
	phase_end(r, __func__, &s_);
}

__attribute__((noinline)) void crowd_nap(struct thread_rec *r)
{
	SELF_BEGIN;
	nap_ns(1000000);
	phase_end(r, __func__, &s_);
}

__attribute__((noinline)) void crowd_wait(struct thread_rec *r, int64_t until)
{
	SELF_BEGIN;
	int64_t now;
	while ((now = clock_ns(CLOCK_MONOTONIC)) < until)
		nap_ns(until - now);
	phase_end(r, __func__, &s_);
}

/* ---- threads ---- */

#define PHASE(rec, fn, ...)                                                  \
	do {                                                                     \
		struct snap s_;                                                      \
		phase_begin(&s_);                                                    \
		fn(__VA_ARGS__);                                                     \
		phase_end(rec, #fn, &s_);                                            \
	} while (0)

static void *burner_main(void *arg)
{
	(void)arg;
	struct thread_rec *r = thread_enter("burner");
	pthread_barrier_wait(&start_barrier);
	PHASE(r, burn_cpu, t0_ns + scaled_ns(1.0));
	pthread_barrier_wait(&stage_barrier); /* releases stage 2 */
	thread_exit(r);
	return NULL;
}

static void *sleeper_main(void *arg)
{
	(void)arg;
	struct thread_rec *r = thread_enter("sleeper");
	pthread_barrier_wait(&start_barrier);
	PHASE(r, do_sleep, t0_ns + scaled_ns(1.0));
	thread_exit(r);
	return NULL;
}

static void *reader_main(void *arg)
{
	(void)arg;
	struct thread_rec *r = thread_enter("reader");
	pthread_barrier_wait(&start_barrier);
	PHASE(r, read_pipe, pipefd[0]);
	thread_exit(r);
	return NULL;
}

static void *writer_main(void *arg)
{
	(void)arg;
	struct thread_rec *r = thread_enter("writer");
	pthread_barrier_wait(&start_barrier);
	PHASE(r, feed_pipe, pipefd[1], t0_ns + scaled_ns(1.0));
	thread_exit(r);
	return NULL;
}

static void *waiter_main(void *arg)
{
	(void)arg;
	struct thread_rec *r = thread_enter("waiter");
	pthread_barrier_wait(&start_barrier);
	PHASE(r, wait_cond);
	thread_exit(r);
	return NULL;
}

static void *spinner_main(void *arg)
{
	int is_contend = arg != NULL;
	struct thread_rec *r = thread_enter(is_contend ? "contend" : "spinner");
	pthread_barrier_wait(&start_barrier);
	PHASE(r, stage_wait);
	int64_t deadline = clock_ns(CLOCK_MONOTONIC) + scaled_ns(1.0);
	if (is_contend)
		PHASE(r, contend, deadline);
	else
		PHASE(r, spin, deadline);
	thread_exit(r);
	return NULL;
}

static void *late_main(void *arg)
{
	(void)arg;
	struct thread_rec *r = thread_enter("late");
	PHASE(r, late_burn, clock_ns(CLOCK_MONOTONIC) + scaled_ns(0.3));
	thread_exit(r);
	return NULL;
}

/* ---- bursts mode ---- */

#define NSERVERS 2
#define NCROWD 3

static double bursts_seconds;
static double crowd_after = -1; /* seconds; negative: half of bursts_seconds */
static int64_t bursts_deadline;

struct server_pipes {
	int req[2], rep[2];
};
static struct server_pipes spipes[NSERVERS];

/* bursts_thread is the part of every bursts-mode thread's start. */
static struct thread_rec *bursts_thread(const char *name)
{
	struct thread_rec *r = thread_enter(name);
	schedstat_fd = open("/proc/thread-self/schedstat", O_RDONLY);
	pthread_barrier_wait(&start_barrier);
	return r;
}

static void *server_main(void *arg)
{
	struct server_pipes *sp = arg;
	struct thread_rec *r = bursts_thread("server");
	while (clock_ns(CLOCK_MONOTONIC) < bursts_deadline) {
		serve_compute(r);
		serve_sleep(r);
		serve_wait(r, sp->req[1], sp->rep[0]);
	}
	close(sp->req[1]);
	thread_exit(r);
	return NULL;
}

static void *feeder_main(void *arg)
{
	struct server_pipes *sp = arg;
	struct thread_rec *r = bursts_thread("feeder");
	feed_replies(r, sp->req[0], sp->rep[1]);
	thread_exit(r);
	return NULL;
}

static void *crowd_main(void *arg)
{
	(void)arg;
	struct thread_rec *r = bursts_thread("crowd");
	double after = crowd_after >= 0 ? crowd_after : bursts_seconds / 2;
	crowd_wait(r, t0_ns + (int64_t)(after * 1e9));
	while (clock_ns(CLOCK_MONOTONIC) < bursts_deadline) {
		crowd_burst(r);
		crowd_nap(r);
	}
	thread_exit(r);
	return NULL;
}

static void start(pthread_t *th, void *(*fn)(void *), void *arg);

/* run_bursts runs the bursts schedule and returns the threads started. */
static int run_bursts(pthread_t *th)
{
	int n = 0;
	pthread_barrier_init(&start_barrier, NULL, 2 * NSERVERS + NCROWD + 1);
	for (int i = 0; i < NSERVERS; i++) {
		if (pipe(spipes[i].req) != 0 || pipe(spipes[i].rep) != 0) {
			perror("cgt: pipe");
			exit(1);
		}
		start(&th[n++], server_main, &spipes[i]);
		start(&th[n++], feeder_main, &spipes[i]);
	}
	for (int i = 0; i < NCROWD; i++)
		start(&th[n++], crowd_main, NULL);
	t0_ns = clock_ns(CLOCK_MONOTONIC);
	bursts_deadline = t0_ns + (int64_t)(bursts_seconds * 1e9);
	pthread_barrier_wait(&start_barrier);
	return n;
}

/* ---- truth output ---- */

/* write_truth writes the JSON truth file; the caller holds rec_mu. */
static void write_truth(int partial)
{
	if (!truth_path || !*truth_path)
		return;
	char tmp[4096];
	snprintf(tmp, sizeof tmp, "%s.tmp", truth_path);
	FILE *f = fopen(tmp, "w");
	if (!f) {
		fprintf(stderr, "cgt: create %s: %s\n", tmp, strerror(errno));
		return;
	}
	int64_t now = clock_ns(CLOCK_MONOTONIC);
	fprintf(f, "{\"workload\": \"cgt\", \"pid\": %d, \"scale\": %g, \"nproc\": %ld,\n",
	        (int)getpid(), scale, sysconf(_SC_NPROCESSORS_ONLN));
	fprintf(f, " \"start_ns\": %lld, \"end_ns\": %lld, \"partial\": %s,\n \"threads\": [",
	        (long long)proc_start_ns, (long long)now, partial ? "true" : "false");
	for (int i = 0; i < nrecs; i++) {
		struct thread_rec *r = &recs[i];
		fprintf(f, "%s\n  {\"tid\": %d, \"name\": \"%s\", \"start_ns\": %lld, \"end_ns\": %lld, \"phases\": {",
		        i ? "," : "", (int)r->tid, r->name, (long long)r->start_ns,
		        (long long)(r->end_ns ? r->end_ns : now));
		for (int j = 0; j < r->nphases; j++) {
			struct phase *p = &r->phases[j];
			fprintf(f, "%s\n    \"%s\": {\"wall_ns\": %lld, \"cpu_ns\": %lld, \"run_delay_ns\": %lld, \"stolen_ns\": %lld}",
			        j ? "," : "", p->name, (long long)p->wall_ns, (long long)p->cpu_ns,
			        (long long)p->run_delay_ns, (long long)p->stolen_ns);
		}
		fprintf(f, "}}");
	}
	fprintf(f, "\n]}\n");
	if (fclose(f) != 0 || rename(tmp, truth_path) != 0)
		fprintf(stderr, "cgt: write %s: %s\n", truth_path, strerror(errno));
}

static void *exiter_main(void *arg)
{
	long ms = (long)arg;
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
	pthread_mutex_lock(&rec_mu);
	write_truth(1);
	_exit(0);
}

static void start(pthread_t *th, void *(*fn)(void *), void *arg)
{
	int err = pthread_create(th, NULL, fn, arg);
	if (err) {
		fprintf(stderr, "cgt: pthread_create: %s\n", strerror(err));
		exit(1);
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: cgt [--truth FILE] [--scale F] [--start-delay MS] [--late-threads] [--exit-after MS] [--bursts SECONDS [--crowd-after SECONDS]]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	long start_delay_ms = 0, exit_after_ms = -1;
	truth_path = getenv("WALLPROF_TRUTH");
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		int has_val = i + 1 < argc;
		if (!strcmp(a, "--truth") && has_val)
			truth_path = argv[++i];
		else if (!strcmp(a, "--scale") && has_val)
			scale = atof(argv[++i]);
		else if (!strcmp(a, "--start-delay") && has_val)
			start_delay_ms = atol(argv[++i]);
		else if (!strcmp(a, "--exit-after") && has_val)
			exit_after_ms = atol(argv[++i]);
		else if (!strcmp(a, "--late-threads"))
			late_threads = 1;
		else if (!strcmp(a, "--bursts") && has_val)
			bursts_seconds = atof(argv[++i]);
		else if (!strcmp(a, "--crowd-after") && has_val)
			crowd_after = atof(argv[++i]);
		else
			usage();
	}
	if (scale <= 0)
		usage();
	if (start_delay_ms > 0) {
		struct timespec ts = {start_delay_ms / 1000, (start_delay_ms % 1000) * 1000000};
		nanosleep(&ts, NULL);
	}
	pthread_t ex;
	if (exit_after_ms >= 0)
		start(&ex, exiter_main, (void *)exit_after_ms);
	pthread_t th[MAX_THREADS];
	int n = 0;
	proc_start_ns = clock_ns(CLOCK_MONOTONIC);
	if (bursts_seconds > 0) {
		n = run_bursts(th);
		goto join;
	}
	if (pipe(pipefd) != 0) {
		perror("cgt: pipe");
		return 1;
	}
	pthread_barrier_init(&start_barrier, NULL, 5 + 1 + NSPINNERS + 1);
	pthread_barrier_init(&stage_barrier, NULL, 1 + 1 + NSPINNERS);
	start(&th[n++], burner_main, NULL);
	start(&th[n++], sleeper_main, NULL);
	start(&th[n++], reader_main, NULL);
	start(&th[n++], writer_main, NULL);
	start(&th[n++], waiter_main, NULL);
	start(&th[n++], spinner_main, (void *)1);
	for (int i = 0; i < NSPINNERS; i++)
		start(&th[n++], spinner_main, NULL);
	t0_ns = clock_ns(CLOCK_MONOTONIC);
	pthread_barrier_wait(&start_barrier);

	struct timespec half = {0, 0};
	int64_t h = scaled_ns(0.5);
	half.tv_sec = h / 1000000000;
	half.tv_nsec = h % 1000000000;
	nanosleep(&half, NULL);
	if (late_threads)
		start(&th[n++], late_main, NULL);
	pthread_mutex_lock(&cond_mu);
	cond_flag = 1;
	pthread_cond_signal(&cond);
	pthread_mutex_unlock(&cond_mu);

join:
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	pthread_mutex_lock(&rec_mu);
	write_truth(0);
	pthread_mutex_unlock(&rec_mu);
	return 0;
}
