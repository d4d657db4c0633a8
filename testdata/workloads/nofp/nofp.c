/* nofp: a workload built without frame pointers (-O2 -fomit-frame-pointer),
 * with a known call tree, for the in-kernel unwinder's test
 * (TestRecordUnwindsWithoutFramePointers).
 *
 * main -> driver -> stage_parse -> parse_leaf                    (CPU)
 *                -> stage_sort -> qsort (libc) -> cmp_items -> cmp_leaf (CPU)
 *                -> stage_deep -> recurse x6 -> deep_leaf      (CPU, a frame over 512 bytes)
 *                -> feed_worker                                 (a byte every 5 ms, to a pipe)
 * worker_main -> worker_loop -> worker_nap  (nanosleep: off-CPU)
 *                            -> worker_wait (read from the pipe: off-CPU)
 * idle_main -> idle_wait (read from a pipe nobody writes: blocked for the
 *                         whole run, its stack read at the end)
 *
 * Every function is noinline and does some work after its call, so that no
 * call is a tail call (a jump leaves no frame: its caller would be skipped in
 * any unwinder); the arithmetic keeps many values live so that the compiler
 * uses RBP as a general register. Usage: nofp SECONDS */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static volatile uint64_t sink;
static int pipefd[2], idlefd[2];
static volatile int stop;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* spin computes for about n iterations with many live values. */
static NOINLINE uint64_t spin(uint64_t n, uint64_t seed)
{
	uint64_t a = seed, b = seed * 3, c = seed * 5, d = seed * 7, e = seed * 11, f = seed * 13, g = 17, h = 19;
	for (uint64_t i = 0; i < n; i++) {
		a += b ^ i;
		b += c * 3;
		c ^= d + i;
		d += e >> 1;
		e ^= f + a;
		f += g * h;
		g ^= a + d;
		h += c ^ e;
	}
	return a ^ b ^ c ^ d ^ e ^ f ^ g ^ h;
}

NOINLINE uint64_t parse_leaf(uint64_t n) { return spin(n, 1) * 3; }
NOINLINE uint64_t stage_parse(void) { return parse_leaf(200000) + 1; }

NOINLINE int cmp_leaf(uint64_t a, uint64_t b)
{
	uint64_t h = spin(40, a ^ b);
	sink += h;
	return a < b ? -1 : a > b;
}
NOINLINE int cmp_items(const void *x, const void *y)
{
	return cmp_leaf(*(const uint64_t *)x, *(const uint64_t *)y) * 2;
}
NOINLINE uint64_t stage_sort(void)
{
	static uint64_t items[2048];
	for (int i = 0; i < 2048; i++)
		items[i] = (uint64_t)rand() << 16 ^ rand();
	qsort(items, 2048, sizeof(items[0]), cmp_items);
	return items[0];
}

NOINLINE uint64_t deep_leaf(uint64_t n)
{
	volatile uint64_t big[96]; /* 768 bytes: more than a stack snapshot */
	for (int i = 0; i < 96; i++)
		big[i] = i * n;
	return spin(n, big[n % 96]) + big[3];
}
NOINLINE uint64_t recurse(int depth, uint64_t n)
{
	if (depth == 0)
		return deep_leaf(n) * 7;
	uint64_t r = recurse(depth - 1, n + depth);
	sink += r; /* not a loop: GCC turns accumulating recursion into one */
	return r ^ depth;
}
NOINLINE uint64_t stage_deep(void) { return recurse(6, 200000) * 5; }

NOINLINE void feed_worker(void)
{
	char c = 'x';
	if (write(pipefd[1], &c, 1) != 1)
		abort();
}

/* driver feeds the worker every 5 ms, whatever the speed of the machine:
 * the worker's read then waits, off CPU, for part of each period. */
NOINLINE void driver(double end)
{
	double fed = 0;
	while (now() < end) {
		sink += stage_parse();
		sink += stage_sort();
		sink += stage_deep();
		if (now() - fed >= 0.005) {
			feed_worker();
			fed = now();
		}
	}
}

NOINLINE void worker_nap(void)
{
	struct timespec ts = {0, 2000000};
	nanosleep(&ts, NULL);
	sink++;
}
NOINLINE int worker_wait(void)
{
	char c;
	int n = read(pipefd[0], &c, 1);
	sink += c;
	return n;
}
NOINLINE void worker_loop(void)
{
	while (!stop) {
		worker_nap();
		if (worker_wait() != 1)
			return;
	}
}
NOINLINE void *worker_main(void *arg)
{
	worker_loop();
	return arg;
}

NOINLINE int idle_wait(void)
{
	char c;
	int n = read(idlefd[0], &c, 1);
	sink += n;
	return n;
}
NOINLINE void *idle_main(void *arg)
{
	sink += idle_wait();
	return arg;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 3;
	if (pipe(pipefd) || pipe(idlefd))
		return 1;
	pthread_t th, idle;
	if (pthread_create(&th, NULL, worker_main, NULL) || pthread_create(&idle, NULL, idle_main, NULL))
		return 1;
	driver(now() + secs);
	stop = 1;
	feed_worker();
	pthread_join(th, NULL);
	return 0;
}
