/*
 * The loop bench/irqcost/run.sh samples: cpubound's xorshift steps for ever,
 * pinned by the caller, under DEPTH (argv[1], default 0) extra frames of a
 * recursion, so that a sampler's walk of the user stack is 5 + DEPTH
 * frames deep (mix, crunch, rec..., main, libc, _start).
 */
#include <stdint.h>
#include <stdlib.h>

static volatile uint64_t sink;

__attribute__((noinline)) uint64_t mix(uint64_t x)
{
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return x;
}

__attribute__((noinline)) uint64_t crunch(long iters, uint64_t x)
{
	uint64_t sum = 0;
	for (long i = 0; i < iters; i++) {
		x = mix(x);
		sum += x >> (i & 31);
	}
	sink = sum;
	return x;
}

__attribute__((noinline)) uint64_t rec(int depth, uint64_t x)
{
	if (depth <= 0)
		return crunch(1L << 40, x);
	uint64_t r = rec(depth - 1, x + 1);
	sink = r;
	return r;
}

int main(int argc, char **argv)
{
	int depth = argc > 1 ? atoi(argv[1]) : 0;
	uint64_t x = 88172645463325252ull;
	for (;;)
		x = depth ? rec(depth - 1, x) : crunch(1L << 40, x);
}
