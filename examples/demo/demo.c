/*
 * demo: the workload of wallprof's quick start. Four threads spend their
 * time in four different ways, so that one recording shows them all:
 *
 *   compute  a CPU-bound loop                      (on-CPU)
 *   napper   1 ms sleeps                           (blocked: sleeping)
 *   reader   reads a pipe fed every 20 ms          (blocked: waiting for I/O)
 *   crowd    3 busy threads sharing the CPUs       (on-CPU and runnable: waiting for a CPU)
 *
 * Built with frame pointers, like most code you will profile should be:
 *   gcc -O1 -g -fno-omit-frame-pointer -pthread -o demo demo.c
 * Usage: demo [seconds]   (default 3)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static double seconds = 3.0;
static int pipefd[2];

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) unsigned long spin(double until)
{
	unsigned long x = 1;
	while (now() < until)
		for (int i = 0; i < 100000; i++)
			x = x * 6364136223846793005UL + 1442695040888963407UL;
	return x;
}

__attribute__((noinline)) int nap(double until)
{
	struct timespec ms = {0, 1000000};
	int n = 0;
	while (now() < until) {
		nanosleep(&ms, NULL);
		n++;
	}
	return n;
}

__attribute__((noinline)) int read_pipe(void)
{
	char c;
	int n = 0;
	while (read(pipefd[0], &c, 1) == 1)
		n++;
	return n;
}

__attribute__((noinline)) void feed_pipe(double until)
{
	struct timespec ms = {0, 20000000};
	while (now() < until) {
		nanosleep(&ms, NULL);
		if (write(pipefd[1], "x", 1) != 1)
			break;
	}
	close(pipefd[1]);
}

static double until;

static void *compute_main(void *a) { pthread_setname_np(pthread_self(), "compute"); spin(until); return a; }
static void *napper_main(void *a) { pthread_setname_np(pthread_self(), "napper"); printf("napper: %d naps\n", nap(until)); return a; }
static void *reader_main(void *a) { pthread_setname_np(pthread_self(), "reader"); printf("reader: %d bytes\n", read_pipe()); return a; }
static void *feeder_main(void *a) { pthread_setname_np(pthread_self(), "feeder"); feed_pipe(until); return a; }
static void *crowd_main(void *a) { pthread_setname_np(pthread_self(), "crowd"); spin(until); return a; }

int main(int argc, char **argv)
{
	if (argc > 1)
		seconds = atof(argv[1]);
	if (seconds <= 0 || pipe(pipefd) != 0) {
		fprintf(stderr, "usage: demo [seconds]\n");
		return 2;
	}
	until = now() + seconds;
	void *(*fns[])(void *) = {compute_main, napper_main, reader_main, feeder_main, crowd_main, crowd_main, crowd_main};
	pthread_t th[7];
	for (int i = 0; i < 7; i++)
		pthread_create(&th[i], NULL, fns[i], NULL);
	for (int i = 0; i < 7; i++)
		pthread_join(th[i], NULL);
	return 0;
}
