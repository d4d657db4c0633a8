/* topstack: a CPU-bound loop whose stack ends right above it, at an
 * unreadable page, for the in-kernel unwinder's test
 * (TestRecordUnwindsAtTheStackTop): the walk reads the stack through a
 * window of a few hundred bytes (struct unw_frames), which here crosses
 * into the page after the stack's top at every sample.
 *
 * main switches (swapcontext) to a context on an 8 KiB stack of its own
 * whose next page is PROT_NONE:
 *   __start_context (glibc) -> ctx_entry -> ctx_work -> ctx_leaf (CPU)
 * and comes back when ctx_leaf's time is up. Built without frame pointers
 * (the rows of .eh_frame), every function noinline with work after its
 * call (no tail calls). Usage: topstack SECONDS */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>

#define NOINLINE __attribute__((noinline))
#define STACK_BYTES 8192

static volatile uint64_t sink;
static double seconds;
static ucontext_t main_uc, ctx_uc;

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

NOINLINE uint64_t ctx_leaf(uint64_t x)
{
	double end = now() + seconds;
	while (now() < end)
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005ULL + 1442695040888963407ULL;
	return x;
}

NOINLINE uint64_t ctx_work(uint64_t x)
{
	uint64_t r = ctx_leaf(x + 1);
	sink = r;
	return r ^ x;
}

NOINLINE void ctx_entry(void)
{
	uint64_t r = ctx_work(sink + 7);
	sink = r + 1;
}

int main(int argc, char **argv)
{
	seconds = argc > 1 ? atof(argv[1]) : 3;
	char *base = mmap(NULL, STACK_BYTES + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED || mprotect(base + STACK_BYTES, 4096, PROT_NONE)) {
		perror("topstack: mmap");
		return 1;
	}
	if (getcontext(&ctx_uc)) {
		perror("topstack: getcontext");
		return 1;
	}
	ctx_uc.uc_stack.ss_sp = base;
	ctx_uc.uc_stack.ss_size = STACK_BYTES;
	ctx_uc.uc_link = &main_uc;
	makecontext(&ctx_uc, ctx_entry, 0);
	if (swapcontext(&main_uc, &ctx_uc)) {
		perror("topstack: swapcontext");
		return 1;
	}
	printf("%llu\n", (unsigned long long)sink);
	return 0;
}
