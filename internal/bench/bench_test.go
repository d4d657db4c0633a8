package bench

import (
	"context"
	"encoding/csv"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func readTestRun(t *testing.T, name string) *Run {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := Parse(f, name)
	if err != nil {
		t.Fatal(err)
	}
	return &Run{Results: res}
}

func TestBenchParseKeepsEverything(t *testing.T) {
	r := readTestRun(t, "old.txt")
	if len(r.Results) != 30 {
		t.Fatalf("%d results; want 30", len(r.Results))
	}
	s := r.Results[0]
	if s.Name != "Search-2" || s.Pkg != "example.com/x" || s.Iters != 1000 || s.Config["goos"] != "linux" ||
		s.Config["goarch"] != "amd64" || s.Config["cpu"] != "Test CPU" {
		t.Errorf("first result: %+v", s)
	}
	units := map[string]bool{}
	for _, v := range s.Values {
		units[v.Unit] = true
	}
	for _, u := range []string{"sec/op", "B/op", "allocs/op", "items/op"} {
		if !units[u] {
			t.Errorf("unit %s lost: %v", u, s.Values)
		}
	}
	if n := len(r.Samples()[Series{"example.com/x", "Search-2", "sec/op"}]); n != 10 {
		t.Errorf("%d samples of Search-2 sec/op; want 10", n)
	}
	if _, err := Parse(strings.NewReader("PASS\nok x 1s\n"), "x"); err != ErrNoBenchmarks {
		t.Errorf("non-benchmark input: %v", err)
	}
}

// The deltas, p-values and centers are benchstat's, on the same two files.
func TestBenchMatchesBenchstat(t *testing.T) {
	if testing.Short() {
		t.Skip("builds benchstat")
	}
	old, nw := filepath.Join("testdata", "old.txt"), filepath.Join("testdata", "new.txt")
	cmd := exec.Command("go", "run", "golang.org/x/perf/cmd/benchstat", "-format", "csv", old, nw)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("benchstat: %v", err)
	}
	// benchstat's CSV: per unit, a header ",UNIT,CI,UNIT,CI,vs base,P" and rows.
	want := map[string][3]string{} // "name unit" -> change, p, base center
	unit := ""
	for _, block := range strings.Split(string(out), "\n\n") {
		cr := csv.NewReader(strings.NewReader(block))
		cr.FieldsPerRecord = -1
		recs, _ := cr.ReadAll()
		for _, rec := range recs {
			if len(rec) == 7 && rec[0] == "" && rec[2] == "CI" {
				unit = rec[1]
			} else if len(rec) == 7 && rec[0] != "" && rec[0] != "geomean" && unit != "" {
				want[rec[0]+" "+unit] = [3]string{rec[5], strings.Fields(rec[6])[0], rec[1]}
			}
		}
	}
	if len(want) != 7 {
		t.Fatalf("parsed %d rows of benchstat's output; want 7:\n%s", len(want), out)
	}
	deltas := Compare(readTestRun(t, "old.txt"), readTestRun(t, "new.txt"), Options{})
	if len(deltas) != len(want) {
		t.Errorf("%d deltas; benchstat has %d rows", len(deltas), len(want))
	}
	for _, d := range deltas {
		w, ok := want[d.Name+" "+d.Unit]
		if !ok {
			t.Errorf("%s %s not in benchstat's output", d.Name, d.Unit)
			continue
		}
		got := [3]string{d.FormatChange(), fmt.Sprintf("p=%.3f", d.P), fmt.Sprint(d.Base.Center)}
		var center float64
		fmt.Sscan(w[2], &center)
		if got[0] != w[0] || got[1] != w[1] || math.Abs(d.Base.Center-center) > 1e-9*math.Abs(center) {
			t.Errorf("%s %s: wallprof %v, benchstat %v", d.Name, d.Unit, got, w)
		}
	}
	// The regressions: Search's time (+11.6%), bytes and allocations
	// (+50%), and Insert's throughput (-10%).
	var regs []string
	for _, d := range deltas {
		if d.Regression {
			regs = append(regs, d.Name+" "+d.Unit)
		}
	}
	if got := strings.Join(regs, ", "); got != "Insert/n=10-2 B/s, Search-2 sec/op, Search-2 B/op, Search-2 allocs/op" {
		t.Errorf("regressions: %s", got)
	}
	// Above a 20% threshold only the +50% ones remain.
	n := 0
	for _, d := range Compare(readTestRun(t, "old.txt"), readTestRun(t, "new.txt"), Options{Threshold: 0.2}) {
		if d.Regression {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d regressions above 20%%; want 2", n)
	}
}

func TestBenchChangePoints(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var x []float64
	for i := range 30 {
		v := 100.0
		if i >= 12 {
			v = 120
		}
		if i >= 22 {
			v = 90
		}
		x = append(x, v*(1+0.02*rng.NormFloat64()))
	}
	if got := fmt.Sprint(ChangePoints(x, 0.01, 199, 3)); got != "[12 22]" {
		t.Errorf("change points %s; want [12 22]", got)
	}
	var flat []float64
	for range 30 {
		flat = append(flat, 100*(1+0.02*rng.NormFloat64()))
	}
	if got := ChangePoints(flat, 0.01, 199, 3); len(got) != 0 {
		t.Errorf("change points in noise: %v", got)
	}
}

func TestBenchStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "bench.db")
	st, err := Open(ctx, path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	in := readTestRun(t, "old.txt")
	in.Commit, in.Dirty, in.Time, in.Machine, in.Toolchain, in.Label = "abc", true, time.Unix(1e9, 0), "m", "go1.26", "import"
	if err := st.Save(ctx, in); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err = Open(ctx, path, time.Second) // reopening migrates nothing
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.Runs(ctx)
	if err != nil || len(runs) != 1 {
		t.Fatalf("%d runs, %v", len(runs), err)
	}
	got := runs[0]
	if got.Commit != "abc" || !got.Dirty || !got.Time.Equal(in.Time) || got.Label != "import" || len(got.Results) != len(in.Results) {
		t.Errorf("stored run differs: %+v", got.Info())
	}
	if fmt.Sprint(got.Results[0]) != fmt.Sprint(in.Results[0]) || fmt.Sprint(got.Samples()) != fmt.Sprint(in.Samples()) {
		t.Errorf("results differ:\n%v\n%v", got.Results[0], in.Results[0])
	}
	var mode string
	st.(*sqlStore).db.QueryRow("PRAGMA journal_mode").Scan(&mode)
	if mode != "wal" {
		t.Errorf("journal mode %q; want wal", mode)
	}
}

func TestBenchRegexp(t *testing.T) {
	for name, want := range map[string]string{
		"Search-2":        "^BenchmarkSearch$",
		"Insert/n=10-2":   "^BenchmarkInsert$/^n=10$",
		"Odd.Name(x)/a-8": "^BenchmarkOdd\\.Name\\(x\\)$/^a$",
	} {
		if got := BenchRegexp(name); got != want {
			t.Errorf("BenchRegexp(%q) = %q; want %q", name, got, want)
		}
	}
}

func TestBenchGrowth(t *testing.T) {
	base := map[string]float64{"a": 10, "b": 5, "c": 1}
	head := map[string]float64{"a": 110, "b": 25, "c": 2, "d": 3, "e": 0.5}
	got := fmt.Sprint(growth(base, head, 3))
	if want := "[{a 10 110} {b 5 25}]"; got != want { // c (+1) and d (+3) are under 5% of a's +100
		t.Errorf("growth = %s; want %s", got, want)
	}
}

func TestBenchParseStrictness(t *testing.T) {
	in := "pkg: p\nBenchmarkA-2 10 100 ns/op\nBenchmarkB-2 \thello from the benchmark\nBenchmarkA-2 10 110 ns/op\n"
	if _, err := Parse(strings.NewReader(in), "in"); err == nil || !strings.Contains(err.Error(), "in:3") {
		t.Errorf("Parse of a broken line: %v; want a syntax error at in:3", err)
	}
	res, err := parse(strings.NewReader(in), "in", false)
	if err != nil || len(res) != 2 {
		t.Errorf("lenient parse: %d results, %v", len(res), err)
	}
}

// A check of 4 rounds has unbounded confidence intervals; its JSON writes
// them as null instead of failing on -Inf.
func TestBenchJSONSmallSample(t *testing.T) {
	run := func(vs ...float64) *Run {
		r := &Run{}
		for _, v := range vs {
			r.Results = append(r.Results, Result{Pkg: "p", Name: "A-2", Iters: 1, Values: []Value{{v, "sec/op"}}})
		}
		return r
	}
	ds := Compare(run(1, 2, 3, 4), run(5, 6, 7, 8), Options{})
	if len(ds) != 1 || !math.IsInf(ds[0].Base.Lo, -1) && !math.IsInf(ds[0].Base.Hi, 1) {
		t.Fatalf("deltas %+v; want an unbounded interval", ds)
	}
	var b strings.Builder
	if err := WriteJSON(&b, &Report{Command: "check", Deltas: ds}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "null") || !strings.Contains(b.String(), `"center": 2.5`) {
		t.Errorf("JSON:\n%s", b.String())
	}
}

// bestSplitCubic is bestSplit as first written, every sum recomputed for
// every tau: the reference of TestBenchBestSplitIncremental.
func bestSplitCubic(x []float64, minSize int) (int, float64) {
	n := len(x)
	within := func(x []float64) float64 {
		s := 0.0
		for i := range x {
			for j := i + 1; j < len(x); j++ {
				s += math.Abs(x[i] - x[j])
			}
		}
		n := float64(len(x))
		return s / (n * (n - 1) / 2)
	}
	best, bestQ := -1, math.Inf(-1)
	for tau := minSize; tau <= n-minSize; tau++ {
		a, b := x[:tau], x[tau:]
		m, k := float64(len(a)), float64(len(b))
		between := 0.0
		for _, u := range a {
			for _, v := range b {
				between += math.Abs(u - v)
			}
		}
		e := 2*between/(m*k) - within(a) - within(b)
		if q := m * k / (m + k) * e; q > bestQ {
			best, bestQ = tau, q
		}
	}
	return best, bestQ
}

// The incremental bestSplit finds the split and Q of the cubic one.
func TestBenchBestSplitIncremental(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 300 {
		n := 1 + rng.IntN(80)
		x := make([]float64, n)
		step := rng.IntN(n)
		for i := range x {
			x[i] = 100 * (1 + 0.05*rng.NormFloat64())
			if i >= step {
				x[i] *= 1.2
			}
		}
		minSize := 2 + rng.IntN(3)
		tau, q := bestSplit(x, minSize)
		wtau, wq := bestSplitCubic(x, minSize)
		if tau != wtau || (tau >= 0 && math.Abs(q-wq) > 1e-9*math.Abs(wq)+1e-9) {
			t.Fatalf("trial %d (n %d, min %d): bestSplit %d %g; cubic %d %g", trial, n, minSize, tau, q, wtau, wq)
		}
	}
}
