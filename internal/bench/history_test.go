package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/pgtest"
)

// The history of the goal: 50 commits × 20 benchmarks × 10
// samples, each with sec/op, B/op and allocs/op.
const (
	histCommits = 50
	histBenches = 20
	histSamples = 10
	histStepAt  = 31 // the commit (index) where the stepped benchmarks change
)

// histStep is the relative step of benchmark b at histStepAt: every fifth
// benchmark gets slower (by 6% to 21%), the others stay flat.
func histStep(b int) float64 {
	if b%5 != 0 {
		return 0
	}
	return 0.06 + 0.05*float64(b/5)
}

func histCommit(i int) string { return fmt.Sprintf("%040x", 0xc0ffee000+i) }

// fillHistory saves the synthetic history into st: a run per commit, in
// order; each benchmark's base time differs, every sample has ±2% noise
// (uniform) and one sample in 20 an outlier up to +15%.
func fillHistory(tb testing.TB, st Store) {
	tb.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(14, 50))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for c := range histCommits {
		run := &Run{Commit: histCommit(c), Time: t0.Add(time.Duration(c) * time.Hour), Machine: "m", Toolchain: "go1.26", Label: "import"}
		for b := range histBenches {
			base := 1e-6 * float64(1+b)
			if c >= histStepAt {
				base *= 1 + histStep(b)
			}
			for range histSamples {
				v := base * (1 + 0.04*(rng.Float64()-0.5))
				if rng.IntN(20) == 0 {
					v *= 1 + 0.15*rng.Float64()
				}
				run.Results = append(run.Results, Result{Pkg: "example.com/big", Name: fmt.Sprintf("Op%02d-2", b), Iters: 100000,
					Config: map[string]string{"goos": "linux", "goarch": "amd64", "pkg": "example.com/big", "cpu": "Xeon"},
					Values: []Value{{v, "sec/op"}, {float64(64 * b), "B/op"}, {float64(b), "allocs/op"}}})
			}
		}
		if err := st.Save(ctx, run); err != nil {
			tb.Fatal(err)
		}
	}
}

// checkHistory asserts the change points of every benchmark's sec/op
// history: at histStepAt for the stepped ones, none for the flat ones.
func checkHistory(t *testing.T, st Store) {
	ctx := context.Background()
	for b := range histBenches {
		name := fmt.Sprintf("BenchmarkOp%02d", b)
		start := time.Now()
		hs, err := LoadHistories(ctx, st, name, "sec/op", 0.01, 199)
		el := time.Since(start)
		if el > time.Second {
			t.Errorf("%s: the history took %v; the goal is under 1 s", name, el)
		}
		if err != nil || len(hs) != 1 || len(hs[0].Points) != histCommits {
			t.Fatalf("%s: %v, %d histories", name, err, len(hs))
		}
		var cps []int
		for i, p := range hs[0].Points {
			if p.Commit != histCommit(i) {
				t.Fatalf("%s: point %d is commit %s", name, i, p.Commit)
			}
			if p.ChangePoint {
				cps = append(cps, i)
			}
		}
		want := []int{}
		if histStep(b) != 0 {
			want = []int{histStepAt}
		}
		if fmt.Sprint(cps) != fmt.Sprint(want) {
			t.Errorf("%s (step %+.0f%%): change points at %v; want %v", name, 100*histStep(b), cps, want)
		}
		t.Logf("%s: %v, change points %v", name, el, cps)
	}
}

// histStores opens a store of each kind: SQLite in dir, and Postgres
// unless -short or it is not installed.
func histStores(tb testing.TB) map[string]string {
	m := map[string]string{"sqlite": filepath.Join(tb.TempDir(), "h.db")}
	if !testing.Short() {
		if _, err := pgtest.Find(); err == nil {
			m["postgres"] = pgtest.Start(tb)
		}
	}
	return m
}

// TestBenchHistoryScale is the goal: on 50 commits × 20
// benchmarks × 10 samples, each benchmark's history answers in under 1 s
// from SQLite and from Postgres, and its change point is at the commit of
// the step.
func TestBenchHistoryScale(t *testing.T) {
	for kind, dsn := range histStores(t) {
		t.Run(kind, func(t *testing.T) {
			st, err := Open(context.Background(), dsn, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			start := time.Now()
			fillHistory(t, st)
			t.Logf("filled in %v", time.Since(start))
			checkHistory(t, st)
		})
	}
}

// BenchmarkHistory times what 'wallprof bench history BenchmarkOp05' does
// on the goal's history: open the store, read the benchmark's samples,
// summarise each commit and find the change points (199 permutations).
func BenchmarkHistory(b *testing.B) {
	ctx := context.Background()
	stores := histStores(b)
	for _, kind := range []string{"sqlite", "postgres"} {
		dsn, ok := stores[kind]
		b.Run(kind, func(b *testing.B) {
			if !ok {
				b.Skip("no Postgres")
			}
			st, err := Open(ctx, dsn, time.Second)
			if err != nil {
				b.Fatal(err)
			}
			fillHistory(b, st)
			st.Close()
			for b.Loop() {
				st, err := Open(ctx, dsn, time.Second)
				if err != nil {
					b.Fatal(err)
				}
				hs, err := LoadHistories(ctx, st, "BenchmarkOp05", "sec/op", 0.01, 199)
				if err != nil || len(hs) != 1 || !hs[0].Points[histStepAt].ChangePoint {
					b.Fatalf("history: %v", err)
				}
				st.Close()
			}
		})
	}
}

// BenchmarkChangePoints times E-Divisive means with 199 permutations on a
// history of n commits with one step.
func BenchmarkChangePoints(b *testing.B) {
	for _, n := range []int{50, 500} {
		b.Run(fmt.Sprint("n=", n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(7, 8))
			x := make([]float64, n)
			for i := range x {
				x[i] = 100 * (1 + 0.02*(rng.Float64()-0.5))
				if i >= n*3/5 {
					x[i] *= 1.1
				}
			}
			for b.Loop() {
				if cp := ChangePoints(x, 0.01, 199, 3); len(cp) != 1 || cp[0] != n*3/5 {
					b.Fatalf("change points %v", cp)
				}
			}
		})
	}
}

// An interrupted run makes a point of its own, marked incomplete, that the
// change-point search leaves out: 6 commits at 100 ns/op, then 4 whose
// only runs were interrupted, at 150. Counted, those 4 would be a change
// point.
func TestBenchHistoryIncomplete(t *testing.T) {
	runs := func(incomplete bool) []*Run {
		var out []*Run
		for c := range 10 {
			v, inc := 100.0, false
			if c >= 6 {
				v, inc = 150, incomplete
			}
			r := &Run{Commit: histCommit(c), Time: time.Unix(int64(c), 0), Incomplete: inc}
			for k := range 5 {
				r.Results = append(r.Results, Result{Pkg: "p", Name: "X-2", Iters: 1, Values: []Value{{(v + float64(k)) * 1e-9, "sec/op"}}})
			}
			out = append(out, r)
		}
		return out
	}
	hs := Histories(runs(false), "X", "sec/op", 0.05, 199)
	if len(hs) != 1 || !hs[0].Points[6].ChangePoint {
		t.Fatalf("all complete: no change point at commit 6: %+v", hs)
	}
	hs = Histories(runs(true), "X", "sec/op", 0.05, 199)
	if len(hs) != 1 || len(hs[0].Points) != 10 {
		t.Fatalf("histories %+v", hs)
	}
	for i, p := range hs[0].Points {
		if p.ChangePoint || p.Incomplete != (i >= 6) {
			t.Errorf("point %d: change point %v, incomplete %v", i, p.ChangePoint, p.Incomplete)
		}
	}
	// One commit with a complete and an interrupted run: two points.
	both := runs(false)[:6]
	extra := *both[5]
	extra.Incomplete = true
	hs = Histories(append(both, &extra), "X", "sec/op", 0.05, 199)
	if n := len(hs[0].Points); n != 7 || !hs[0].Points[6].Incomplete || hs[0].Points[6].Commit != both[5].Commit {
		t.Errorf("complete and interrupted runs of one commit: %d points %+v", n, hs[0].Points)
	}
}
