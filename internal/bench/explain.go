package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/google/pprof/profile"
)

// Growth is how much one function's flat CPU time or allocated bytes per
// benchmark operation grew from the base to the new version.
type Growth struct {
	Function string  `json:"function"`
	Base     float64 `json:"base"` // per op: nanoseconds of CPU or bytes allocated
	New      float64 `json:"new"`
}

// Explanation compares the profiles of one benchmark in two versions.
type Explanation struct {
	Series
	CPU   []Growth `json:"cpu"`   // functions whose CPU time per op grew most, largest growth first
	Alloc []Growth `json:"alloc"` // functions whose allocated bytes per op grew most
	// OffCPU are the functions whose off-CPU time per op (nanoseconds)
	// grew most, from wallprof recordings of both versions (ExplainOffCPU);
	// OffCPUSkipped says why there are none to look at, when not recorded.
	OffCPU        []Growth `json:"offcpu"`
	OffCPUSkipped string   `json:"offcpu_skipped,omitempty"`
	// Profiles are the base CPU, base memory, new CPU and new memory
	// profile files, then the base and new wall-clock profiles if recorded.
	Profiles []string `json:"profiles"`
}

// Explain runs the benchmark name of base and head (the test binaries of
// its package) once each with -test.cpuprofile and -test.memprofile for
// iters iterations, writes the profiles into dir, and returns the top
// functions whose flat CPU time or allocated bytes per operation grew.
// A function in package runtime is charged to its first caller outside the
// runtime, so that allocations and GC work are named by the code that
// caused them. Growths under 5% of the largest are left out.
func Explain(ctx context.Context, base, head Binary, s Series, iters int, dir string, top int) (*Explanation, error) {
	if iters < 1 {
		iters = 1
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ex := &Explanation{Series: s}
	var flats [2][2]map[string]float64
	stem := fileSafe.ReplaceAllString(s.Name, "_")
	for i, b := range []Binary{base, head} {
		side := []string{"base", "new"}[i]
		cpu := filepath.Join(dir, side+"-"+stem+".cpu.pprof")
		mem := filepath.Join(dir, side+"-"+stem+".mem.pprof")
		cfg := RunConfig{Bench: BenchRegexp(s.Name), Benchtime: fmt.Sprintf("%dx", iters)}
		if _, err := runBinary(ctx, b, cfg, []string{"-test.cpuprofile", cpu, "-test.memprofile", mem, "-test.memprofilerate", "4096"}); err != nil {
			return nil, err
		}
		ops := float64(iters + 1) // the run with b.N = 1, then b.N = iters
		var err error
		if flats[i][0], err = flatByFunction(cpu, "cpu", ops); err != nil {
			return nil, err
		}
		if flats[i][1], err = flatByFunction(mem, "alloc_space", ops); err != nil {
			return nil, err
		}
		ex.Profiles = append(ex.Profiles, cpu, mem)
	}
	ex.CPU = growth(flats[0][0], flats[1][0], top)
	ex.Alloc = growth(flats[0][1], flats[1][1], top)
	return ex, nil
}

// readPprof reads the pprof profile at path.
func readPprof(path string) (*profile.Profile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("read profile %s: %w", path, err)
	}
	return p, nil
}

var fileSafe = regexp.MustCompile(`[^A-Za-z0-9_.=-]+`)

// flatByFunction sums the sample type typ of the profile at path by the
// function of each sample's leaf (see Explain), divided by ops.
func flatByFunction(path, typ string, ops float64) (map[string]float64, error) {
	p, err := readPprof(path)
	if err != nil {
		return nil, err
	}
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == typ {
			idx = i
		}
	}
	if idx < 0 {
		return nil, fmt.Errorf("profile %s has no %s samples", path, typ)
	}
	m := map[string]float64{}
	for _, smp := range p.Sample {
		if fn := chargedFunction(smp); fn != "" {
			m[fn] += float64(smp.Value[idx]) / ops
		}
	}
	return m, nil
}

func chargedFunction(s *profile.Sample) string {
	first := ""
	for _, loc := range s.Location {
		for _, ln := range loc.Line { // innermost inlined function first
			if ln.Function == nil {
				continue
			}
			name := ln.Function.Name
			if first == "" {
				first = name
			}
			if !strings.HasPrefix(name, "runtime.") && !strings.HasPrefix(name, "internal/runtime/") {
				return name
			}
		}
	}
	return first
}

func growth(base, head map[string]float64, top int) []Growth {
	var out []Growth
	for fn, v := range head {
		if v > base[fn] {
			out = append(out, Growth{fn, base[fn], v})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		di, dj := out[i].New-out[i].Base, out[j].New-out[j].Base
		return di > dj || di == dj && out[i].Function < out[j].Function
	})
	if len(out) > top {
		out = out[:top]
	}
	// Growths under 5% of the largest are sampling noise (and the
	// profiler's own work of writing the profile).
	for i, g := range out {
		if i > 0 && g.New-g.Base < 0.05*(out[0].New-out[0].Base) {
			return out[:i]
		}
	}
	return out
}
