// Shared library for package symbolize's tests.
static volatile int counter;

__attribute__((noinline)) static int shared_helper(int x) {
	counter += x;
	return counter * 2;
}

__attribute__((noinline)) int shared_fn(int x) {
	return shared_helper(x) + 1;
}
