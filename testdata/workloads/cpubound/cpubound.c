/*
 * cpubound: a deterministic CPU-bound loop (--iters N, default 300000000
 * steps of a xorshift generator folded into a checksum), the baseline case
 * for a sampling profiler: no system calls, no context switches of its own.
 *
 * Prints the checksum to stdout, and to stderr one line of key=value pairs
 * that bench/cmd/overhead parses:
 *   cpubound: iters=N checksum=.. elapsed_ns=.. user_ns=.. sys_ns=..
 *             start_mono_ns=.. end_mono_ns=..
 *
 * Build: gcc -O2 -g -fno-omit-frame-pointer -o cpubound cpubound.c
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static int64_t mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t tv_ns(struct timeval tv) { return (int64_t)tv.tv_sec * 1000000000 + tv.tv_usec * 1000; }

__attribute__((noinline)) uint64_t mix(uint64_t x)
{
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return x;
}

__attribute__((noinline)) uint64_t crunch(long iters)
{
	uint64_t x = 88172645463325252ull, sum = 0;
	for (long i = 0; i < iters; i++) {
		x = mix(x);
		sum += x >> (i & 31);
	}
	return sum;
}

int main(int argc, char **argv)
{
	int64_t start = mono_ns();
	long iters = 300000000;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--iters") && i + 1 < argc)
			iters = atol(argv[++i]);
		else {
			fprintf(stderr, "usage: cpubound [--iters N]\n");
			return 2;
		}
	}
	int64_t t0 = mono_ns();
	uint64_t sum = crunch(iters);
	int64_t t1 = mono_ns();
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("%016llx\n", (unsigned long long)sum);
	fflush(stdout);
	fprintf(stderr, "cpubound: iters=%ld checksum=%016llx elapsed_ns=%lld user_ns=%lld sys_ns=%lld start_mono_ns=%lld end_mono_ns=%lld\n",
	        iters, (unsigned long long)sum, (long long)(t1 - t0), (long long)tv_ns(ru.ru_utime),
	        (long long)tv_ns(ru.ru_stime), (long long)start, (long long)mono_ns());
	return 0;
}
