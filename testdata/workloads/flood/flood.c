/*
 * flood: an event flood for a scheduler-hooking profiler (issue 20): two
 * ping-pong pairs pass a byte back and forth through pipes, --iters N
 * round trips each (default 400000), while a third thread creates and
 * joins short-lived threads without pause until the pairs are done. On two
 * CPUs that is about a million context switches a second and tens of
 * thousands of new threads a second, so the profiler's thread table churns
 * (and, with pid_max 32768, thread ids are reused within seconds).
 *
 * On exit it prints to stderr the line bench/cmd/overhead parses:
 *   flood: iters=N elapsed_ns=.. switches_per_s=.. threads_per_s=..
 *          user_ns=.. sys_ns=.. start_mono_ns=.. end_mono_ns=..
 * elapsed covers the ping-pong pairs (the work); switches_per_s counts
 * the pairs' switches only (2 per round trip per pair).
 *
 * Build: gcc -O2 -g -fno-omit-frame-pointer -pthread -o flood flood.c
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define PAIRS 2

static long iters = 400000;
static atomic_int done;
static long spawned;

struct pair {
	int ping[2], pong[2];
};

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t tv_ns(struct timeval tv) { return (int64_t)tv.tv_sec * 1000000000 + tv.tv_usec * 1000; }

static void xfer(int in, int out, long n, int first)
{
	char c = 'f';
	for (long i = 0; i < n; i++) {
		if (first && write(out, &c, 1) != 1)
			exit(1);
		if (read(in, &c, 1) != 1)
			exit(1);
		if (!first && write(out, &c, 1) != 1)
			exit(1);
	}
}

__attribute__((noinline)) void *pinger(void *arg)
{
	struct pair *p = arg;
	xfer(p->pong[0], p->ping[1], iters, 1);
	return NULL;
}

__attribute__((noinline)) void *ponger(void *arg)
{
	struct pair *p = arg;
	xfer(p->ping[0], p->pong[1], iters, 0);
	return NULL;
}

__attribute__((noinline)) void *short_lived(void *arg) { return arg; }

__attribute__((noinline)) void *spawner(void *arg)
{
	(void)arg;
	while (!atomic_load(&done)) {
		pthread_t t;
		if (pthread_create(&t, NULL, short_lived, NULL) != 0)
			continue;
		pthread_join(t, NULL);
		spawned++;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int64_t start = mono_ns();
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--iters") && i + 1 < argc)
			iters = atol(argv[++i]);
		else {
			fprintf(stderr, "usage: flood [--iters N]\n");
			return 2;
		}
	}
	struct pair pairs[PAIRS];
	pthread_t th[2 * PAIRS], sp;
	for (int i = 0; i < PAIRS; i++)
		if (pipe(pairs[i].ping) || pipe(pairs[i].pong)) {
			perror("flood: pipe");
			return 1;
		}
	if (pthread_create(&sp, NULL, spawner, NULL) != 0) {
		perror("flood: pthread_create");
		return 1;
	}
	int64_t t0 = mono_ns();
	for (int i = 0; i < PAIRS; i++)
		if (pthread_create(&th[2 * i], NULL, pinger, &pairs[i]) ||
		    pthread_create(&th[2 * i + 1], NULL, ponger, &pairs[i])) {
			perror("flood: pthread_create");
			return 1;
		}
	for (int i = 0; i < 2 * PAIRS; i++)
		pthread_join(th[i], NULL);
	int64_t t1 = mono_ns();
	atomic_store(&done, 1);
	pthread_join(sp, NULL);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	double secs = (t1 - t0) / 1e9;
	fprintf(stderr, "flood: iters=%ld elapsed_ns=%lld switches_per_s=%.0f threads_per_s=%.0f user_ns=%lld sys_ns=%lld start_mono_ns=%lld end_mono_ns=%lld\n",
	        iters, (long long)(t1 - t0), secs > 0 ? 2.0 * PAIRS * iters / secs : 0.0,
	        secs > 0 ? spawned / secs : 0.0, (long long)tv_ns(ru.ru_utime), (long long)tv_ns(ru.ru_stime),
	        (long long)start, (long long)mono_ns());
	return 0;
}
