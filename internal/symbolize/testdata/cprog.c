// Test program for package symbolize. Modes:
//   cprog inline N     compute with inlined helpers, print the result
//   cprog pipe         a thread-free read() on a pipe that never gets data (read_pipe)
//   cprog tpipe        the same read() in a second thread (glibc's multi-threaded path)
//   cprog sleep        nanosleep() in a loop (do_sleep)
//   cprog cond         a second thread blocks in pthread_cond_wait (wait_cond)
// Every mode but "inline" prints "ready\n" and blocks forever.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern int shared_fn(int x);

static volatile int sink;

static inline __attribute__((always_inline)) int inl_leaf(int x) {
	sink += x;
	return x * 3 + sink;
}

static inline __attribute__((always_inline)) int inl_mid(int x) {
	int y = inl_leaf(x + 1);
	return y ^ inl_leaf(x);
}

__attribute__((noinline)) static int static_outer(int n) {
	int acc = 0;
	for (int i = 0; i < n; i++)
		acc += inl_mid(i);
	return acc;
}

__attribute__((noinline)) int read_pipe(int fd) {
	char buf[64];
	long total = 0;
	for (;;) {
		ssize_t n = read(fd, buf, sizeof buf);
		if (n <= 0)
			break;
		total += n;
	}
	return (int)total + sink;
}

__attribute__((noinline)) int do_sleep(void) {
	int n = 0;
	for (;;) {
		struct timespec ts = {1000, 0};
		nanosleep(&ts, NULL);
		n++;
		sink = n;
	}
	return n;
}

static void *pipe_thread(void *arg) {
	sink = read_pipe(*(int *)arg);
	return NULL;
}

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int flag;

__attribute__((noinline)) int wait_cond(void) {
	int n = 0;
	pthread_mutex_lock(&mu);
	while (!flag) {
		pthread_cond_wait(&cv, &mu);
		n++;
	}
	pthread_mutex_unlock(&mu);
	return n + sink;
}

static void *cond_thread(void *arg) {
	(void)arg;
	sink = wait_cond();
	return NULL;
}

int main(int argc, char **argv) {
	if (argc < 2)
		return 2;
	if (strcmp(argv[1], "inline") == 0) {
		int n = argc > 2 ? atoi(argv[2]) : 10;
		printf("%d %d\n", static_outer(n), shared_fn(n));
		return 0;
	}
	setvbuf(stdout, NULL, _IONBF, 0);
	if (strcmp(argv[1], "pipe") == 0) {
		int fds[2];
		if (pipe(fds) != 0)
			return 1;
		printf("ready\n");
		return read_pipe(fds[0]);
	}
	if (strcmp(argv[1], "tpipe") == 0) {
		int fds[2];
		pthread_t t;
		if (pipe(fds) != 0)
			return 1;
		pthread_create(&t, NULL, pipe_thread, &fds[0]);
		printf("ready\n");
		pthread_join(t, NULL);
		return 0;
	}
	if (strcmp(argv[1], "sleep") == 0) {
		printf("ready\n");
		return do_sleep();
	}
	if (strcmp(argv[1], "cond") == 0) {
		pthread_t t;
		pthread_create(&t, NULL, cond_thread, NULL);
		printf("ready\n");
		pthread_join(t, NULL);
		return 0;
	}
	return 2;
}
