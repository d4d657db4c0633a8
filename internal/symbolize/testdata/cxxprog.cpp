// C++ test program for package symbolize: templated, namespaced functions.
#include <cstdio>
#include <string>
#include <vector>

namespace outer {
namespace inner {
template <typename T>
struct Box {
	T value;
	__attribute__((noinline)) T twice(const std::vector<T> &extra, int n) const {
		T r = value;
		for (int i = 0; i < n; i++)
			r = r + value;
		return extra.empty() ? r : r + extra[0];
	}
};

template <typename K, typename V>
__attribute__((noinline)) V pick(const K &key, V fallback) {
	return key.size() > 3 ? fallback : V();
}
} // namespace inner
} // namespace outer

int main(int argc, char **argv) {
	outer::inner::Box<double> b{1.5};
	std::vector<double> v{2.0};
	double d = b.twice(v, argc);
	long l = outer::inner::pick<std::string, long>(std::string(argv[0]), 7L);
	std::printf("%f %ld\n", d, l);
	return 0;
}
