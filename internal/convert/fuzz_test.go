package convert

import (
	"bytes"
	"testing"

	"github.com/wallprof/wallprof/internal/profile"
)

// fuzzImport imports data as f and checks what must hold for any input:
// no panic, a profile whenever there is no error, a valid profile whose
// stacks only use its own locations and mappings (what WritePprof needs;
// WritePprof itself, with its gzip, is too slow to fuzz here and runs in
// the golden and CLI tests), and one that WriteSpeedscope accepts.
func fuzzImport(t *testing.T, data []byte, f Format) {
	r, err := Import(data, f, Options{})
	if err != nil {
		return
	}
	p := r.Profile
	if p == nil {
		t.Fatal("no error and no profile")
	}
	if r.Skipped > r.Lines {
		t.Fatalf("skipped %d of %d lines", r.Skipped, r.Lines)
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("invalid profile: %v", err)
	}
	locs := map[*profile.Location]bool{}
	maps := map[*profile.Mapping]bool{}
	for _, m := range p.Mappings {
		maps[m] = true
	}
	for i, l := range p.Locs {
		if l.ID != uint64(i+1) || l.Mapping != nil && !maps[l.Mapping] {
			t.Fatalf("location %d: ID %d, mapping %v", i, l.ID, l.Mapping)
		}
		locs[l] = true
	}
	for i, s := range p.Samples {
		for _, l := range s.Stack {
			if !locs[l] {
				t.Fatalf("sample %d uses a location not in Profile.Locs", i)
			}
		}
	}
	var buf bytes.Buffer
	if err := WriteSpeedscope(&buf, p, SpeedscopeOptions{PerThread: true, States: true}); err != nil {
		t.Fatalf("WriteSpeedscope: %v", err)
	}
}

func addSeeds(f *testing.F, files ...string) {
	for _, s := range files {
		f.Add(readSample(f, s))
	}
}

func FuzzPerfScript(f *testing.F) {
	addSeeds(f, "perf-cpu.txt")
	f.Add([]byte("a b 1/2 [000] 1.5: 7 offcpu-time: \n\tffff x+0x1 ([kernel.kallsyms])\n\n:-1 3/-1 [001] 2.0: sched:sched_switch: prev_comm=a b prev_pid=2 prev_prio=1 prev_state=D ==> next_comm=c next_pid=2 next_prio=1\n"))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzImport(t, data, Perf) })
}

func FuzzPtPmp(f *testing.F) {
	addSeeds(f, "ptpmp.txt")
	f.Add([]byte("Sun Nov 22 01:28:34 UTC 2026\n 9223372036854775807 a,,b\n"))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzImport(t, data, PtPmp) })
}

func FuzzEuStack(f *testing.F) {
	addSeeds(f, "eustack.txt", "eustack-verbose.txt")
	f.Fuzz(func(t *testing.T, data []byte) { fuzzImport(t, data, EuStack) })
}

func FuzzGdb(f *testing.F) {
	addSeeds(f, "gdb.txt")
	f.Add([]byte("Thread 1 (LWP 5) \"x\"):\n#0  0x1 in std::function<void ()>::operator() (this=0x2) at a.h:3\n#1  0x2 in ?? ()\n"))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzImport(t, data, GDB) })
}

func FuzzCollapsed(f *testing.F) {
	addSeeds(f, "wallprof.folded")
	f.Add([]byte("comm x-1/2;main;read_[k];[sleeping] 1e300\n;; 5\n"))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzImport(t, data, Collapsed) })
}

// FuzzDetect checks that detection, then import as the detected format,
// never panics.
func FuzzDetect(f *testing.F) {
	for _, s := range samples {
		f.Add(readSample(f, s.file))
	}
	f.Add([]byte{0x1f, 0x8b, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, ok := Detect(data); ok {
			fuzzImport(t, data, "")
		}
	})
}
