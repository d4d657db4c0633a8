// Package bench keeps the benchmark history of a Go module: it parses
// 'go test -bench' output with golang.org/x/perf/benchfmt, keeping every
// sample with its unit and configuration; compares two runs with
// golang.org/x/perf/benchmath, the test and confidence intervals of
// benchstat; stores runs per commit (Store, SQLite by default); runs
// benchmarks, alone or A/B against a base commit built in a git worktree
// with the rounds interleaved; finds change points in a benchmark's history
// (E-Divisive means); and explains a regression by comparing the CPU and
// allocation profiles of the two versions by function, and their off-CPU
// time from wall-clock recordings (a Recorder that cmd/wallprof gives). It
// writes reports as text, JSON, Markdown and one self-contained HTML page
// (WritePage: trend charts, the comparison; flame graphs come rendered
// from the caller, as this package draws none).
//
// Nothing here prints for a user or picks exit codes: cmd/wallprof does.
package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	"golang.org/x/perf/benchfmt"
)

// ErrNoBenchmarks is returned by Parse when the input holds no benchmark
// result line.
var ErrNoBenchmarks = errors.New("no benchmark results in the input (is it 'go test -bench' output?)")

// Run is one benchmark run: the results of one or more 'go test -bench'
// invocations of one version of the code.
type Run struct {
	ID        int64     // in the store; 0 before it is saved
	Commit    string    // the commit hash; "" when unknown
	Dirty     bool      // the working tree had uncommitted changes
	Time      time.Time // when it ran (or was imported)
	Machine   string    // host name
	Toolchain string    // go version
	Label     string    // why it ran: "run", "base", "head", "import"
	// Incomplete says the run was interrupted (Ctrl-C): it holds the
	// rounds that were complete, fewer than asked for.
	Incomplete bool
	Results    []Result
}

// Result is one benchmark result line with its configuration.
type Result struct {
	Pkg    string            // the pkg configuration key
	Name   string            // the full name without "Benchmark", e.g. "Search/n=10-2"
	Config map[string]string // every configuration key in effect (goos, goarch, cpu, ...)
	Iters  int
	Values []Value
}

// Value is one measurement of a result, in benchfmt's tidied unit
// ("sec/op" for ns/op, "B/s" for MB/s) or a custom unit.
type Value struct {
	Value float64
	Unit  string
}

// Series names the samples of one benchmark in one unit.
type Series struct {
	Pkg  string `json:"pkg"`
	Name string `json:"name"`
	Unit string `json:"unit"`
}

func (s Series) String() string {
	if s.Pkg == "" {
		return s.Name + " " + s.Unit
	}
	return s.Pkg + "." + s.Name + " " + s.Unit
}

// Parse reads 'go test -bench' output (or the benchmark format's files)
// from r; name is used in syntax errors. It returns ErrNoBenchmarks when r
// has no result, and the first syntax error of a line that looked like a
// result.
func Parse(r io.Reader, name string) ([]Result, error) {
	return parse(r, name, true)
}

// parse is Parse; when strict is false, lines that look like results but
// are not (a benchmark that prints to stdout splits its result line) are
// skipped when the input has results.
func parse(r io.Reader, name string, strict bool) ([]Result, error) {
	br := benchfmt.NewReader(r, name)
	var out []Result
	var firstErr error
	for br.Scan() {
		switch rec := br.Result().(type) {
		case *benchfmt.Result:
			res := Result{Name: rec.Name.String(), Iters: rec.Iters, Config: map[string]string{}}
			for _, c := range rec.Config {
				res.Config[c.Key] = string(c.Value)
			}
			res.Pkg = res.Config["pkg"]
			for _, v := range rec.Values {
				// NaN and ±Inf are no measurement (1e309 parses to +Inf),
				// and the rank tests never finish on NaN: leave them out.
				if math.IsNaN(v.Value) || math.IsInf(v.Value, 0) {
					continue
				}
				res.Values = append(res.Values, Value{Value: v.Value, Unit: v.Unit})
			}
			out = append(out, res)
		case *benchfmt.SyntaxError:
			if firstErr == nil {
				firstErr = rec
			}
		}
	}
	if err := br.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if firstErr != nil && (strict || len(out) == 0) {
		return nil, firstErr
	}
	if len(out) == 0 {
		return nil, ErrNoBenchmarks
	}
	return out, nil
}

// Samples groups the run's values by series, in the order of the input.
func (r *Run) Samples() map[Series][]float64 {
	m := map[Series][]float64{}
	for _, res := range r.Results {
		for _, v := range res.Values {
			s := Series{res.Pkg, res.Name, v.Unit}
			m[s] = append(m[s], v.Value)
		}
	}
	return m
}

// SortedSeries returns the keys of m sorted by package, name and unit
// (sec/op first).
func SortedSeries(m map[Series][]float64) []Series {
	keys := make([]Series, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.Pkg != b.Pkg {
			return a.Pkg < b.Pkg
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return unitRank(a.Unit) < unitRank(b.Unit) || unitRank(a.Unit) == unitRank(b.Unit) && a.Unit < b.Unit
	})
	return keys
}

func unitRank(u string) int {
	switch u {
	case "sec/op":
		return 0
	case "B/op":
		return 1
	case "allocs/op":
		return 2
	}
	return 3
}

// HigherIsBetter reports whether a larger value of unit is an improvement:
// throughputs (units ending in "/s"). For every other unit (time, bytes,
// allocations and custom per-op metrics) smaller is better.
func HigherIsBetter(unit string) bool {
	return strings.HasSuffix(unit, "/s")
}
