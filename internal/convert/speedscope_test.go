package convert

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/profile"
)

// checkSpeedscope checks data against speedscope's documented file format
// (src/lib/file-format-spec.ts): the required fields with their types,
// "sampled" profiles whose samples index the shared frames, as many weights
// as samples, and endValue-startValue equal to the total weight.
func checkSpeedscope(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var f map[string]any
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
	if f["$schema"] != SpeedscopeSchema {
		t.Errorf("$schema = %v", f["$schema"])
	}
	shared, _ := f["shared"].(map[string]any)
	frames, ok := shared["frames"].([]any)
	if !ok {
		t.Fatalf("no shared.frames array")
	}
	for i, fr := range frames {
		m, _ := fr.(map[string]any)
		if name, ok := m["name"].(string); !ok || name == "" {
			t.Errorf("frame %d has no name: %v", i, fr)
		}
		for k := range m {
			if k != "name" && k != "file" && k != "line" && k != "col" {
				t.Errorf("frame %d has unknown field %q", i, k)
			}
		}
	}
	profiles, ok := f["profiles"].([]any)
	if !ok || len(profiles) == 0 {
		t.Fatalf("no profiles")
	}
	if i, ok := f["activeProfileIndex"].(float64); !ok || int(i) >= len(profiles) {
		t.Errorf("activeProfileIndex = %v", f["activeProfileIndex"])
	}
	for pi, pr := range profiles {
		p, _ := pr.(map[string]any)
		if p["type"] != "sampled" || p["unit"] != "nanoseconds" {
			t.Errorf("profile %d: type %v unit %v", pi, p["type"], p["unit"])
		}
		if _, ok := p["name"].(string); !ok {
			t.Errorf("profile %d has no name", pi)
		}
		samples, ok1 := p["samples"].([]any)
		weights, ok2 := p["weights"].([]any)
		if !ok1 || !ok2 || len(samples) != len(weights) {
			t.Fatalf("profile %d: %d samples, %d weights", pi, len(samples), len(weights))
		}
		var sum float64
		for si, s := range samples {
			stack, _ := s.([]any)
			if len(stack) == 0 {
				t.Errorf("profile %d sample %d is empty", pi, si)
			}
			for _, x := range stack {
				if i, ok := x.(float64); !ok || i < 0 || int(i) >= len(frames) || i != float64(int(i)) {
					t.Errorf("profile %d sample %d: bad frame index %v", pi, si, x)
				}
			}
			w, _ := weights[si].(float64)
			if w <= 0 {
				t.Errorf("profile %d sample %d: weight %v", pi, si, weights[si])
			}
			sum += w
		}
		start, _ := p["startValue"].(float64)
		end, _ := p["endValue"].(float64)
		if end-start != sum {
			t.Errorf("profile %d: endValue-startValue = %v, weights sum to %v", pi, end-start, sum)
		}
	}
	return f
}

func TestSpeedscopeSamples(t *testing.T) {
	for _, s := range samples {
		r, err := Import(readSample(t, s.file), s.format, s.opt)
		if err != nil {
			t.Fatal(err)
		}
		for _, perThread := range []bool{false, true} {
			var buf bytes.Buffer
			if err := WriteSpeedscope(&buf, r.Profile, SpeedscopeOptions{PerThread: perThread, States: true}); err != nil {
				t.Fatal(err)
			}
			checkSpeedscope(t, buf.Bytes())
		}
	}
}

// TestSpeedscopeGolden pins the exact output for a small profile: root
// first stacks, inlined frames expanded, one profile per thread, weights.
func TestSpeedscopeGolden(t *testing.T) {
	m := &profile.Mapping{ID: 1, File: "/bin/app"}
	main := &profile.Location{ID: 1, Mapping: m, Address: 0x10, Frames: []profile.Frame{{Function: "main", File: "app.c", Line: 3}}}
	work := &profile.Location{ID: 2, Mapping: m, Address: 0x20, Frames: []profile.Frame{{Function: "inlined"}, {Function: "work", File: "app.c", Line: 9}}}
	unknown := &profile.Location{ID: 3, Mapping: m, Address: 0x1234}
	p := &profile.Profile{Mappings: []*profile.Mapping{m}, Locs: []*profile.Location{main, work, unknown},
		Samples: []*profile.Sample{
			{Stack: []*profile.Location{work, main}, PID: 1, TID: 2, Thread: "worker", State: profile.OnCPU, Value: 30},
			{Stack: []*profile.Location{unknown, main}, PID: 1, TID: 1, Thread: "app", State: profile.Sleeping, Value: 70},
		}}
	var buf bytes.Buffer
	if err := WriteSpeedscope(&buf, p, SpeedscopeOptions{Name: "test", PerThread: true, States: true}); err != nil {
		t.Fatal(err)
	}
	checkSpeedscope(t, buf.Bytes())
	checkGolden(t, "speedscope-perthread.json.golden", buf.String())

	buf.Reset()
	if err := WriteSpeedscope(&buf, p, SpeedscopeOptions{Weight: present.OffCPU}); err != nil {
		t.Fatal(err)
	}
	f := checkSpeedscope(t, buf.Bytes())
	pr := f["profiles"].([]any)[0].(map[string]any)
	if w := pr["weights"].([]any); len(w) != 1 || w[0].(float64) != 70 {
		t.Errorf("off-CPU weights = %v, want [70]", w)
	}
}
