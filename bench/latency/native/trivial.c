/* The target of bench/latency/native.sh: calls trivial() N times in a
 * tight loop and prints the nanoseconds per call. It waits for SIGUSR1
 * first (unless N is negative: -N calls at once), so that a tracer is
 * attached before it starts.
 *
 *   cc -O2 -rdynamic -o trivial trivial.c && ./trivial -1000000
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t go;
static void start(int sig) { (void)sig; go = 1; }

__attribute__((noinline)) int trivial(int x)
{
	__asm__ volatile("");
	return x + 1;
}

static long long now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100000;
	if (n > 0) {
		signal(SIGUSR1, start);
		fprintf(stderr, "ready\n");
		while (!go)
			pause();
	} else {
		n = -n;
	}
	long long t = now();
	int s = 0;
	for (long i = 0; i < n; i++)
		s += trivial((int)i);
	long long d = now() - t;
	printf("%.1f\n", (double)d / n + (s == 42 ? 1e-9 : 0));
	return 0;
}
