/* libs: dlopen every library named on the command line, then compute for
 * SECONDS, so that a recording loads the unwind tables of all of them
 * (bench/unwind.sh). Usage: libs SECONDS LIB... */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static volatile unsigned long sink;

__attribute__((noinline)) static void work(void)
{
	for (int i = 0; i < 100000; i++)
		sink += i * 31;
}

int main(int argc, char **argv)
{
	int loaded = 0;
	for (int i = 2; i < argc; i++)
		if (dlopen(argv[i], RTLD_NOW | RTLD_LOCAL))
			loaded++;
	fprintf(stderr, "libs: loaded %d of %d\n", loaded, argc - 2);
	time_t end = time(NULL) + (argc > 1 ? atoi(argv[1]) : 3);
	while (time(NULL) < end)
		work();
	return 0;
}
