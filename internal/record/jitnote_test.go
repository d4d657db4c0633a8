package record

import (
	"strings"
	"testing"

	"github.com/wallprof/wallprof/internal/profile"
)

type fakeSources struct {
	paths []string
	nspid int
}

func (f fakeSources) JITSources() ([]string, int) { return f.paths, f.nspid }

func TestJITNotes(t *testing.T) {
	anon := &profile.Mapping{ID: 1, File: ""}
	lib := &profile.Mapping{ID: 2, File: "/usr/lib/libx.so"}
	named := &profile.Location{ID: 1, Mapping: anon, Frames: []profile.Frame{{Function: "py::f:/a.py"}}}
	unnamed := &profile.Location{ID: 2, Mapping: anon, Frames: []profile.Frame{{Function: "[anon]+0x7f00"}}}
	native := &profile.Location{ID: 3, Mapping: lib, Frames: []profile.Frame{{Function: "g"}}}
	p := &profile.Profile{Samples: []*profile.Sample{
		{PID: 10, State: profile.OnCPU, Value: 300, Stack: []*profile.Location{unnamed, named, native}},
		{PID: 10, State: profile.OnCPU, Value: 100, Stack: []*profile.Location{named}},
		{PID: 10, State: profile.Sleeping, Value: 9000, Stack: []*profile.Location{unnamed}}, // off-CPU: not counted
		{PID: 20, State: profile.OnCPU, Value: 100, Stack: []*profile.Location{unnamed}},
		{PID: 30, State: profile.OnCPU, Value: 100, Stack: []*profile.Location{named, native}},
	}}
	notes := jitNotes(p, func(pid int) jitSourcer {
		switch pid {
		case 10:
			return fakeSources{[]string{"/tmp/perf-3.map"}, 3}
		case 20:
			return fakeSources{nil, 1}
		}
		return nil
	})
	if len(notes) != 2 {
		t.Fatalf("notes = %q", notes)
	}
	// Process 10: 300 of its 700 ns of anonymous frames are unnamed.
	if want := "42.9% of the on-CPU frames in anonymous executable memory (JIT or interpreter code) of process 10 stayed unnamed: /tmp/perf-3.map did not name them"; !strings.HasPrefix(notes[0], want) {
		t.Errorf("note = %q, want it to start with %q", notes[0], want)
	}
	if want := "100.0% of the on-CPU frames in anonymous executable memory (JIT or interpreter code) of process 20 stayed unnamed: no perf map or jitdump for PID 20 (/tmp/perf-1.map in its mount namespace); run node with --perf-basic-prof"; !strings.HasPrefix(notes[1], want) {
		t.Errorf("note = %q, want it to start with %q", notes[1], want)
	}
}
