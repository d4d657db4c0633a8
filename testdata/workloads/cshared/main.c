/* The C side of cshared: main -> c_caller -> GoSpin (Go). Usage: cshared SECONDS */
#include <stdlib.h>
#include <time.h>

extern unsigned long long GoSpin(int n);
static volatile unsigned long long sink;

__attribute__((noinline)) void c_caller(void)
{
	sink += GoSpin(2000000);
	sink++;
}

int main(int argc, char **argv)
{
	time_t end = time(0) + (argc > 1 ? atoi(argv[1]) : 3);
	while (time(0) < end)
		c_caller();
	return 0;
}
