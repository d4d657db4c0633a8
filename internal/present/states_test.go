package present

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/profile"
)

func statesFixture() *profile.Profile {
	loc := func(id uint64, fn string) *profile.Location {
		return &profile.Location{ID: id, Frames: []profile.Frame{{Function: fn}}}
	}
	main, work, read, rec := loc(1, "main"), loc(2, "work"), loc(3, "read"), loc(4, "rec")
	p := &profile.Profile{Locs: []*profile.Location{main, work, read, rec}}
	p.Samples = []*profile.Sample{
		{TID: 1, State: profile.OnCPU, Value: 30, Stack: []*profile.Location{work, main}},
		{TID: 1, State: profile.Runnable, Value: 10, Stack: []*profile.Location{work, main}},
		{TID: 1, State: profile.Sleeping, Value: 50, Stack: []*profile.Location{read, work, main}},
		{TID: 2, State: profile.Disk, Value: 10, Stack: []*profile.Location{rec, rec, main}},
	}
	th := func(tid int, name string, cpu, sleep time.Duration) *profile.Thread {
		t := &profile.Thread{TID: tid, Name: name}
		t.Time[profile.OnCPU], t.Time[profile.Sleeping] = cpu, sleep
		return t
	}
	p.Threads = []*profile.Thread{th(1, "app", 40, 50), th(2, "io", 0, 10)}
	return p
}

func TestFunctionStates(t *testing.T) {
	tab := FunctionStates(statesFixture())
	if tab.Wall != 100 {
		t.Errorf("wall %d, want 100", tab.Wall)
	}
	tab.Sort("wall", nil)
	var names []string
	for _, r := range tab.Rows {
		names = append(names, r.Name)
	}
	// main has no self time: not listed when sorting by self wall time.
	if strings.Join(names, " ") != "read work rec" {
		t.Errorf("rows %v, want read work rec", names)
	}
	work := tab.Rows[1]
	if work.Self[profile.OnCPU] != 30 || work.Self[profile.Runnable] != 10 || work.Total != 90 || work.Cum[profile.Sleeping] != 50 {
		t.Errorf("work %+v: want self 30 on CPU and 10 runnable, total 90 with 50 sleeping", work)
	}
	// Recursion counts once in the total.
	if rec := tab.Rows[2]; rec.Total != 10 {
		t.Errorf("rec total %d, want 10", rec.Total)
	}
	cum := FunctionStates(statesFixture())
	cum.Cumulative()
	cum.Sort("total", regexp.MustCompile("^(main|work)$"))
	if len(cum.Rows) != 2 || cum.Rows[0].Name != "main" || cum.Rows[0].Wall() != 100 {
		t.Errorf("cumulative rows %+v: want main (100) then work", cum.Rows)
	}
	line := StateLine(tab.Rows[1], tab.Wall, 0)
	if want := "  40.0   30.0   10.0      -      -   90.0  work"; line != want {
		t.Errorf("line %q, want %q", line, want)
	}
	if l := StateLine(tab.Rows[1], tab.Wall, 20); len([]rune(l)) != 20 || !strings.HasSuffix(l, "…") {
		t.Errorf("clipped line %q: want 20 columns ending in …", l)
	}
}

func TestThreadStates(t *testing.T) {
	tab := ThreadStates(statesFixture())
	tab.Sort("cpu", nil)
	if len(tab.Rows) != 1 || tab.Rows[0].Name != "app (1)" || tab.Wall != 100 {
		t.Errorf("threads by CPU %+v (wall %d): want app (1) alone, of 100", tab.Rows, tab.Wall)
	}
	if s := StateSummary([profile.NumStates]int64{25, 25, 50, 0, 0}); s != "on-CPU 25.0% · runnable 25.0% · sleeping 50.0% · disk 0.0% · other 0.0%" {
		t.Errorf("summary %q", s)
	}
}
