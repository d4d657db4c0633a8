package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// fakeWall writes a wall-clock profile as wallprof's recorder does: a
// thread sample off CPU in the runtime, and goroutine samples, one per
// entry of waits (function -> nanoseconds waiting in it, under
// time.Sleep), plus the testing goroutine waiting and a running one.
func fakeWall(t *testing.T, path string, waits map[string]int64) {
	fns := map[string]*profile.Function{}
	var locs []*profile.Location
	loc := func(name string) *profile.Location {
		if fns[name] == nil {
			fns[name] = &profile.Function{ID: uint64(len(fns) + 1), Name: name}
		}
		l := &profile.Location{ID: uint64(len(locs) + 1), Line: []profile.Line{{Function: fns[name]}}}
		locs = append(locs, l)
		return l
	}
	g := func(state string, v int64, stack ...string) *profile.Sample {
		s := &profile.Sample{Value: []int64{0, 0, 0, v}, Label: map[string][]string{"gstate": {state}}}
		for _, f := range stack {
			s.Location = append(s.Location, loc(f))
		}
		return s
	}
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "wall", Unit: "nanoseconds"}, {Type: "cpu", Unit: "nanoseconds"},
			{Type: "offcpu", Unit: "nanoseconds"}, {Type: "goroutine", Unit: "nanoseconds"}},
		Sample: []*profile.Sample{
			{Value: []int64{5e6, 0, 5e6, 0}, Location: []*profile.Location{loc("futex_do_wait"), loc("runtime.futex"), loc("runtime.findRunnable")}},
			g("waiting", 7e6, "runtime.gopark", "runtime.chanrecv1", "testing.(*B).run1", "main.main"),
			g("running", 9e6, "example.com/x.compute", "example.com/x.BenchmarkX"),
		},
	}
	for fn, v := range waits {
		p.Sample = append(p.Sample, g("waiting", v, "runtime.gopark", "time.Sleep", fn, "example.com/x.BenchmarkX"))
	}
	p.Function = make([]*profile.Function, 0, len(fns))
	for _, f := range fns {
		p.Function = append(p.Function, f)
	}
	p.Location = locs
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := p.Write(f); err != nil {
		t.Fatal(err)
	}
}

// ExplainOffCPU names the function whose goroutines' off-CPU time per op
// grew, not time.Sleep, the runtime or the testing package; the profiles
// are kept beside the others.
func TestBenchExplainOffCPU(t *testing.T) {
	dir := t.TempDir()
	var argvs [][]string
	rec := func(ctx context.Context, pkgDir string, argv []string, out string) error {
		argvs = append(argvs, argv)
		waits := map[string]int64{"example.com/x.poll": 1e6}
		if strings.Contains(argv[0], "new") {
			waits = map[string]int64{"example.com/x.poll": 1e6, "example.com/x.(*Pool).get": 50e6}
		}
		fakeWall(t, out, waits)
		return nil
	}
	ex := &Explanation{Series: Series{Pkg: "example.com/x", Name: "X-2", Unit: "sec/op"}}
	base, head := Binary{Path: "/base/x.test", PkgDir: "/b"}, Binary{Path: "/new/x.test", PkgDir: "/n"}
	if err := ExplainOffCPU(context.Background(), ex, base, head, 99, dir, 5, rec); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ex.OffCPU) != "[{example.com/x.(*Pool).get 0 500000}]" || ex.OffCPUSkipped != "" {
		t.Errorf("off-CPU growth %+v (skipped %q)", ex.OffCPU, ex.OffCPUSkipped)
	}
	want := []string{filepath.Join(dir, "base-X-2.wall.pprof"), filepath.Join(dir, "new-X-2.wall.pprof")}
	if fmt.Sprint(ex.Profiles) != fmt.Sprint(want) {
		t.Errorf("profiles %v; want %v", ex.Profiles, want)
	}
	if len(argvs) != 2 || !strings.Contains(strings.Join(argvs[0], " "), "-test.bench ^BenchmarkX$ -test.benchmem -test.count 1 -test.benchtime 99x") {
		t.Errorf("recorded %q", argvs)
	}

	// A machine that cannot record: one note, no error, no profile.
	ex = &Explanation{Series: ex.Series}
	cannot := func(context.Context, string, []string, string) error {
		return fmt.Errorf("%w: needs root", ErrCannotRecord)
	}
	if err := ExplainOffCPU(context.Background(), ex, base, head, 99, dir, 5, cannot); err != nil || ex.OffCPUSkipped != "off-CPU recording skipped: needs root" || len(ex.Profiles) != 0 {
		t.Errorf("cannot record: %v, %+v", err, ex)
	}
	var b strings.Builder
	WriteExplanation(&b, ex)
	if !strings.Contains(b.String(), "  off-CPU time:\n    (off-CPU recording skipped: needs root)\n") {
		t.Errorf("explanation text:\n%s", b.String())
	}
}

func TestBenchStandardLibrary(t *testing.T) {
	for name, want := range map[string]bool{
		"time.Sleep": true, "sync.(*Mutex).Lock": true, "internal/poll.(*FD).Read": true, "testing.(*B).run1": true,
		"main.main": true, "futex_do_wait": true, "runtime.gopark": true,
		"example.com/x.wait": false, "github.com/a/b/c.(*T).M": false, "main.helper": false,
	} {
		if got := standardLibrary(name); got != want {
			t.Errorf("standardLibrary(%q) = %v; want %v", name, got, want)
		}
	}
}
