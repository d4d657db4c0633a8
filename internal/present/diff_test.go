package present

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/profile"
)

// beforeAfter returns testProfile as "before" (1s) and an "after" recorded
// for 2s in which main.fib doubled per second, schedule's sleep halved per
// second, the disk read is gone and a new function appeared.
func beforeAfter() (before, after *profile.Profile) {
	before = testProfile()
	after = testProfile()
	after.Duration = 2 * time.Second
	after.Command = `./server -addr ":8080" -cache`
	const ms = int64(time.Millisecond)
	var kept []*profile.Sample
	for _, s := range after.Samples {
		c := *s
		switch {
		case stackHolds(s, "main.fib"):
			c.Value *= 4 // twice the time per second
		case stackHolds(s, "schedule"):
			c.Value = 200 * ms // the same time over twice as long
		case stackHolds(s, "ext4_file_read_iter"):
			continue
		default:
			c.Value *= 2 // unchanged per second
		}
		kept = append(kept, &c)
	}
	newLoc := &profile.Location{ID: 11, Mapping: after.Mappings[0], Address: 0x401500,
		Frames: []profile.Frame{{Function: "cache.(*LRU).Get", File: "/src/cache/lru.go", Line: 12}}}
	after.Locs = append(after.Locs, newLoc)
	kept = append(kept, &profile.Sample{Stack: []*profile.Location{newLoc, after.Locs[1], after.Locs[0]},
		PID: 100, TID: 101, Thread: "worker pool 1", State: profile.OnCPU, Value: 30 * ms})
	after.Samples = kept
	return before, after
}

func stackHolds(s *profile.Sample, fn string) bool {
	for _, n := range frameNames(nil, s.Stack) {
		if n == fn {
			return true
		}
	}
	return false
}

func TestDiffGolden(t *testing.T) {
	for _, tc := range []struct {
		golden string
		opt    DiffOptions
	}{
		{"diff.txt", DiffOptions{BeforeName: "before.pb.gz", AfterName: "after.pb.gz"}},
		{"diff-top3-cpu.txt", DiffOptions{Top: 3, Weight: CPU}},
		{"diff.json", DiffOptions{JSON: true, Top: 4, BeforeName: "before.pb.gz", AfterName: "after.pb.gz"}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			before, after := beforeAfter()
			var b bytes.Buffer
			if err := WriteDiff(&b, before, after, tc.opt); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tc.golden, b.Bytes())
		})
	}
}

func TestDiffNormalises(t *testing.T) {
	before, after := beforeAfter()
	r, err := NewDiff(before, after, DiffOptions{Top: -1})
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]DiffRow{}
	for _, row := range r.Flat.Rows {
		rows[row.Name] = row
	}
	const ms = int64(time.Millisecond)
	check := func(name string, b, a int64, dp any) {
		t.Helper()
		row := rows[name]
		if row.BeforeNSPerS != b || row.AfterNSPerS != a || row.DeltaNSPerS != a-b {
			t.Errorf("%s: %+v, want before %d after %d", name, row, b, a)
		}
		switch want := dp.(type) {
		case nil:
			if row.DeltaPercent != nil {
				t.Errorf("%s: delta%% %v, want none", name, *row.DeltaPercent)
			}
		case float64:
			if row.DeltaPercent == nil || *row.DeltaPercent != want {
				t.Errorf("%s: delta%% %v, want %v", name, row.DeltaPercent, want)
			}
		}
	}
	check("main.fib", 50*ms, 100*ms, 100.0)
	check("schedule", 200*ms, 100*ms, -50.0)
	check("ext4_file_read_iter", 120*ms, 0, -100.0)
	check("cache.(*LRU).Get", 0, 15*ms, nil)
	check("main.handle", 50*ms, 50*ms, 0.0)
	if r.Flat.Rows[0].Name != "ext4_file_read_iter" {
		t.Errorf("largest change first: got %s", r.Flat.Rows[0].Name)
	}
}

func TestDiffNeedsDuration(t *testing.T) {
	before, after := beforeAfter()
	after.Duration = 0
	err := WriteDiff(&bytes.Buffer{}, before, after, DiffOptions{AfterName: "go-cpu.pprof"})
	var de *DurationError
	if !errors.As(err, &de) || de.Which != "after" || !strings.Contains(err.Error(), "go-cpu.pprof has no recording duration") {
		t.Errorf("err = %v, want a DurationError naming go-cpu.pprof", err)
	}
}

func TestDiffJSONFields(t *testing.T) {
	before, after := beforeAfter()
	var b bytes.Buffer
	if err := WriteDiff(&b, before, after, DiffOptions{JSON: true}); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"format", "weight", "before", "after", "states", "flat", "cum"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("JSON diff lacks %q", k)
		}
	}
}
