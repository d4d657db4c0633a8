/* The ground truth of wallprof latency's native-function test: calls
 * usleep() (libc) N times with a known mix of 1, 2 and 5 ms, times each
 * call itself, and prints the count and percentiles as JSON at exit. It
 * waits for SIGUSR1 first, so that the probes are attached before it starts.
 *
 *   cc -O2 -o native main.c && ./native 2000 > truth.json
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t go;
static void start(int sig) { (void)sig; go = 1; }

static long long now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;
	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 2000;
	static const int mix[] = {1000, 1000, 1000, 2000, 2000, 5000, 1000};
	long long *d = calloc(n, sizeof *d);
	signal(SIGUSR1, start);
	fprintf(stderr, "ready\n");
	while (!go)
		pause();
	for (int i = 0; i < n; i++) {
		long long t = now();
		usleep(mix[i % 7]);
		d[i] = now() - t;
	}
	qsort(d, n, sizeof *d, cmp);
#define Q(p) d[(int)((p) * n + 0.999999) - 1]
	printf("{\"count\":%d,\"p50_ns\":%lld,\"p90_ns\":%lld,\"p99_ns\":%lld,\"max_ns\":%lld}\n",
	       n, Q(0.5), Q(0.9), Q(0.99), d[n - 1]);
	return 0;
}
