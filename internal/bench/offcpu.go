package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/google/pprof/profile"
)

// Recorder runs argv (a test binary and its arguments) in dir under a
// wall-clock recorder until it exits, and writes the recording to out as a
// pprof profile with wallprof's sample types (offcpu, and goroutine for
// a Go program's goroutine view). An error wrapping ErrCannotRecord says
// that recording is impossible here (its text says why: "needs root").
type Recorder func(ctx context.Context, dir string, argv []string, out string) error

// ErrCannotRecord is wrapped by a Recorder's error when this machine or
// user cannot record.
var ErrCannotRecord = errors.New("off-CPU recording skipped")

// ExplainOffCPU adds to ex the functions whose off-CPU time per operation
// grew most: it runs the benchmark of base and of head as Explain does
// (iters iterations) under rec, keeps the profiles as
// base-NAME.wall.pprof and new-NAME.wall.pprof in dir, and compares them
// (offCPUByFunction). When rec cannot record, ex.OffCPUSkipped says why
// and the error is nil.
func ExplainOffCPU(ctx context.Context, ex *Explanation, base, head Binary, iters int, dir string, top int, rec Recorder) error {
	if iters < 1 {
		iters = 1
	}
	stem := fileSafe.ReplaceAllString(ex.Name, "_")
	cfg := RunConfig{Bench: BenchRegexp(ex.Name), Benchtime: fmt.Sprintf("%dx", iters)}
	var byFn [2]map[string]float64
	var paths []string
	for i, b := range []Binary{base, head} {
		out := filepath.Join(dir, []string{"base", "new"}[i]+"-"+stem+".wall.pprof")
		err := rec(ctx, b.PkgDir, append([]string{b.Path}, benchArgs(cfg, nil)...), out)
		if errors.Is(err, ErrCannotRecord) {
			ex.OffCPUSkipped = strings.TrimSuffix(err.Error(), ".")
			return nil
		}
		if err != nil {
			return fmt.Errorf("record %s of %s: %w", ex.Name, []string{"the base", "the new version"}[i], err)
		}
		if byFn[i], err = offCPUByFunction(out, float64(iters+1)); err != nil {
			return err
		}
		paths = append(paths, out)
	}
	ex.OffCPU = growth(byFn[0], byFn[1], top)
	ex.Profiles = append(ex.Profiles, paths...)
	return nil
}

// offCPUByFunction sums the off-CPU time of the wall-clock profile at path
// by function, divided by ops. When the profile has the goroutine view
// (a Go program), its goroutines' time not running (waiting: channels,
// locks, sleep, I/O, system calls; and runnable) is what counts, since a
// goroutine that blocks leaves its thread to others; otherwise the
// threads' offcpu samples. A sample is charged to its innermost function
// outside Go's standard library (the code that chose to wait, rather than
// time.Sleep or sync.(*Mutex).Lock); samples without one (idle runtime
// threads, the testing package waiting for the benchmark) are left out.
func offCPUByFunction(path string, ops float64) (map[string]float64, error) {
	p, err := readPprof(path)
	if err != nil {
		return nil, err
	}
	gi, ti := -1, -1
	for i, st := range p.SampleType {
		switch st.Type {
		case "goroutine":
			gi = i
		case "offcpu":
			ti = i
		}
	}
	if ti < 0 && gi < 0 {
		return nil, fmt.Errorf("profile %s has no offcpu samples", path)
	}
	m := map[string]float64{}
	for _, s := range p.Sample {
		var v int64
		switch {
		case gi >= 0:
			if st := s.Label["gstate"]; len(st) == 0 || st[0] == "running" {
				continue
			}
			v = s.Value[gi]
		default:
			v = s.Value[ti]
		}
		if fn := userFunction(s); fn != "" && v > 0 {
			m[fn] += float64(v) / ops
		}
	}
	return m, nil
}

// userFunction is the innermost function of s outside Go's standard
// library and the test binary's generated main, or "".
func userFunction(s *profile.Sample) string {
	for _, loc := range s.Location {
		for _, ln := range loc.Line {
			if ln.Function != nil && !standardLibrary(ln.Function.Name) {
				return ln.Function.Name
			}
		}
	}
	return ""
}

// standardLibrary reports whether the Go function name belongs to the
// standard library (its import path's first element has no dot), to the
// generated main of a test binary, or is not Go's (a kernel function, a
// C library's).
func standardLibrary(name string) bool {
	if name == "main.main" || strings.HasPrefix(name, "main.init") {
		return true
	}
	if strings.HasPrefix(name, "main.") {
		return false
	}
	slash := strings.IndexByte(name, '/')
	if slash < 0 {
		return true // a package path of one element (fmt.Println, time.Sleep), or not Go's
	}
	return !strings.Contains(name[:slash], ".") // internal/poll, not example.com/x
}
