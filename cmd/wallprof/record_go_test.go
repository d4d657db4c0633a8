package main

import (
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/groundtruth"
	"github.com/wallprof/wallprof/internal/profile"
)

// TestRecordGoProgram records the Go ground-truth workload, built normally
// and stripped, and checks its thread view (TestRecordGoroutines checks its
// goroutine view). It checks that the per-thread invariant holds, that the process's
// on-CPU time agrees with the CPU time the workload measured itself, and that
// the stripped binary symbolizes to the same Go functions.
func TestRecordGoProgram(t *testing.T) {
	requireRecording(t)
	dir := groundtruth.WorkloadDir(t, "gogt")
	funcs := map[bool][]string{}
	for _, stripped := range []bool{false, true} {
		bin := groundtruth.BuildGo(t, dir, stripped, "")
		tmp := t.TempDir()
		out, truthPath := filepath.Join(tmp, "go.pb.gz"), filepath.Join(tmp, "truth.json")
		steal0 := machineSteal(t)
		code, stderr := wallprof(t, "record", "-o", out, "--", bin, "--truth", truthPath)
		steal := machineSteal(t) - steal0
		if code != 0 {
			t.Fatalf("stripped=%v: wallprof record exited %d:\n%s", stripped, code, stderr)
		}
		truth, err := groundtruth.ReadTruth(truthPath)
		if err != nil {
			t.Fatal(err)
		}
		p := readProfile(t, out)
		if err := p.Validate(); err != nil {
			t.Errorf("stripped=%v: invariant: %v", stripped, err)
		}
		checkAccounting(t, p)
		var cpu time.Duration
		for _, th := range p.Threads {
			cpu += th.Time[profile.OnCPU]
		}
		want := time.Duration(truth.Process.CPUNS)
		wall := time.Duration(truth.Process.WallNS)
		// The hypervisor's steal while a thread holds a CPU is on-CPU time
		// in the profile and not in getrusage: the machine's steal during
		// the recording (/proc/stat, in 10 ms ticks) may be over.
		stolen := 100 * steal.Seconds() / wall.Seconds()
		if d := 100 * (cpu - want).Seconds() / wall.Seconds(); d > tolerancePoints+stolen || d < -tolerancePoints {
			t.Errorf("stripped=%v: process on-CPU %v, the workload measured %v (%.1f points of its %v; the machine's steal meanwhile %v)",
				stripped, cpu, want, d, wall, steal)
		} else {
			t.Logf("stripped=%v: process on-CPU %v, the workload measured %v over %v; the machine's steal meanwhile %v", stripped, cpu, want, wall, steal)
		}
		// Where the CPU went: main.compute's two goroutines burn nearly all of it.
		var compute time.Duration
		seen := map[string]bool{}
		for _, s := range p.Samples {
			if s.State == profile.OnCPU && stackHas(s, "main.compute") {
				compute += time.Duration(s.Value)
			}
			for _, l := range s.Stack {
				for _, f := range l.Frames {
					if len(f.Function) > 5 && f.Function[:5] == "main." {
						seen[f.Function] = true
					}
				}
			}
		}
		if compute < cpu/2 {
			t.Errorf("stripped=%v: main.compute has %v of %v on-CPU time", stripped, compute, cpu)
		}
		for fn := range seen {
			funcs[stripped] = append(funcs[stripped], fn)
		}
		sort.Strings(funcs[stripped])
		if !seen["main.compute"] {
			t.Errorf("stripped=%v: main.compute is in no stack (saw %v)", stripped, funcs[stripped])
		}
		// Every address in the Go binary is named, stripped or not.
		for _, l := range p.Locs {
			if l.Mapping != nil && filepath.Base(l.Mapping.File) == filepath.Base(bin) {
				for _, f := range l.Frames {
					if strings.Contains(f.Function, "+0x") {
						t.Errorf("stripped=%v: unnamed frame %s", stripped, f.Function)
					}
				}
			}
		}
	}
	t.Logf("Go functions seen: %v", funcs[false])
}
