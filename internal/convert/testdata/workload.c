// w: a small workload for the converter samples: one thread computes, one
// sleeps in short naps, the main thread waits for both.
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile double sink;
static double seconds = 1.0;

static double now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) static void spin_inner(void) {
	double x = 0;
	for (int i = 0; i < 100000; i++) x += i * 0.5;
	sink = x;
}

__attribute__((noinline)) static void compute_work(void) {
	spin_inner();
}

static void *compute(void *arg) {
	(void)arg;
	double end = now() + seconds;
	while (now() < end) compute_work();
	return NULL;
}

__attribute__((noinline)) static void take_nap(void) {
	usleep(20000);
}

static void *napper(void *arg) {
	(void)arg;
	double end = now() + seconds;
	while (now() < end) {
		take_nap();
		for (int i = 0; i < 20; i++) spin_inner();
	}
	return NULL;
}

int main(int argc, char **argv) {
	if (argc > 1) seconds = atof(argv[1]);
	pthread_t a, b;
	pthread_create(&a, NULL, compute, NULL);
	pthread_setname_np(a, "compute");
	pthread_create(&b, NULL, napper, NULL);
	pthread_setname_np(b, "napper");
	pthread_join(a, NULL);
	pthread_join(b, NULL);
	return 0;
}
