// Test program for package symbolize's separate debug info tests: built
// with -g, split into a stripped binary and its debug file, and read, never
// run. debug_marker_static is not exported, so only a .symtab (from a
// debug file or MiniDebugInfo) names it.
#include <stdlib.h>

static volatile long sink;

static __attribute__((noinline)) long debug_marker_static(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++)
		s += i * sink;
	return s;
}

__attribute__((noinline)) long debug_marker_exported(long n)
{
	return debug_marker_static(n) + 1;
}

int main(int argc, char **argv)
{
	return (int)debug_marker_exported(argc > 1 ? atol(argv[1]) : 3);
}
