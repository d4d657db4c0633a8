package bench

import (
	"strings"
	"testing"
)

// Parse takes untrusted input: it must not panic, and whatever it returns
// must be storable and comparable.
func FuzzBenchParse(f *testing.F) {
	f.Add("pkg: p\nBenchmarkX-2 10 100 ns/op 5 B/op\n")
	f.Add("goos: linux\nBenchmarkY/a=1-8 1 NaN ns/op\nBenchmarkY/a=1-8 1 1e309 ns/op\n")
	f.Add("Unit ns/op assume=exact\nBenchmarkZ 1 2 ns/op\n")
	f.Add("BenchmarkBad 1 x ns/op\n")
	f.Fuzz(func(t *testing.T, in string) {
		res, err := Parse(strings.NewReader(in), "fuzz")
		if err != nil {
			return
		}
		r := &Run{Results: res}
		Compare(r, r, Options{})
		Histories([]*Run{r, r}, "X", "", 0.05, 3)
	})
}
