// Test program for package symbolize: DWARF inline records that are not
// calls. Built with gcc -g -O2 and only read, never run.
//
// split_me returns early on its likely path; GCC's partial inlining moves
// the rest into split_me.part.0 and inlines it back into split_me and its
// callers, which DWARF describes as split_me inlined into split_me at
// split_me's own declaration line. recurse's inlined calls to itself, made
// from its body, are real frames.
#include <stdlib.h>

volatile int multi;
static volatile long sink;

__attribute__((noinline)) int enable(void) { return (int)sink; }
__attribute__((noinline)) void disable(int old) { sink += old; }
__attribute__((noinline)) long work(long x) { sink += x; return sink; }

long split_me(int fd, long n)
{
	if (__builtin_expect(multi == 0, 1))
		return fd;
	int old = enable();
	long r = work(fd) + work(n);
	disable(old);
	return r;
}

long split_caller1(int fd) { return split_me(fd, 1) + 1; }
long split_caller2(int fd) { return split_me(fd, 2) * 3; }

static inline long recurse(long n)
{
	if (n <= 1)
		return work(n);
	return recurse(n - 1) + work(n);
}

long recurse_outer(long n) { return recurse(n) + recurse(n + 7); }

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 3;
	return (int)(split_caller1((int)n) + split_caller2((int)n) + recurse_outer(n));
}
