/*
 * pingpong: two threads pass one byte back and forth through two pipes
 * --iters N times (default 300000), so the run is dominated by context
 * switches: the worst case for a profiler that hooks the scheduler.
 * --work N adds N loop iterations of computation per hop, to set the
 * switch rate (bench uses it for a ~150k switches/s variant).
 *
 * On exit it prints to stderr one line of key=value pairs that
 * bench/cmd/overhead parses:
 *   pingpong: iters=N elapsed_ns=.. switches_per_s=.. user_ns=.. sys_ns=..
 *             start_mono_ns=.. end_mono_ns=..
 * elapsed covers the ping-pong loop only; user/sys are the whole process
 * (getrusage RUSAGE_SELF); *_mono_ns are CLOCK_MONOTONIC at main's entry
 * and just before exit.
 *
 * Build: gcc -O2 -g -fno-omit-frame-pointer -pthread -o pingpong pingpong.c
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static long iters = 300000;
static long work; /* --work N: loop iterations of computation per hop */
static int ping[2], pong[2];

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t tv_ns(struct timeval tv) { return (int64_t)tv.tv_sec * 1000000000 + tv.tv_usec * 1000; }

static void xfer(int in, int out, long n, int first)
{
	char c = 'p';
	for (long i = 0; i < n; i++) {
		if (first && write(out, &c, 1) != 1)
			exit(1);
		if (read(in, &c, 1) != 1)
			exit(1);
		for (volatile long k = 0; k < work; k++)
			;
		if (!first && write(out, &c, 1) != 1)
			exit(1);
	}
}

__attribute__((noinline)) void *ponger(void *arg)
{
	(void)arg;
	xfer(ping[0], pong[1], iters, 0);
	return NULL;
}

__attribute__((noinline)) void pinger(void) { xfer(pong[0], ping[1], iters, 1); }

int main(int argc, char **argv)
{
	int64_t start = mono_ns();
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--iters") && i + 1 < argc)
			iters = atol(argv[++i]);
		else if (!strcmp(argv[i], "--work") && i + 1 < argc)
			work = atol(argv[++i]);
		else {
			fprintf(stderr, "usage: pingpong [--iters N] [--work N]\n");
			return 2;
		}
	}
	if (pipe(ping) || pipe(pong)) {
		perror("pingpong: pipe");
		return 1;
	}
	pthread_t th;
	int64_t t0 = mono_ns();
	if (pthread_create(&th, NULL, ponger, NULL) != 0) {
		perror("pingpong: pthread_create");
		return 1;
	}
	pinger();
	pthread_join(th, NULL);
	int64_t t1 = mono_ns();
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	double secs = (t1 - t0) / 1e9;
	/* Each iteration blocks and wakes each thread once: 2 switches. */
	fprintf(stderr, "pingpong: iters=%ld elapsed_ns=%lld switches_per_s=%.0f user_ns=%lld sys_ns=%lld start_mono_ns=%lld end_mono_ns=%lld\n",
	        iters, (long long)(t1 - t0), secs > 0 ? 2.0 * iters / secs : 0.0,
	        (long long)tv_ns(ru.ru_utime), (long long)tv_ns(ru.ru_stime), (long long)start,
	        (long long)mono_ns());
	return 0;
}
