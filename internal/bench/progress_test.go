package bench

import (
	"testing"
	"time"
)

func TestBenchProgressRemaining(t *testing.T) {
	s := time.Second
	for _, c := range []struct {
		p    Progress
		want time.Duration
		ok   bool
	}{
		{Progress{Done: 0, Total: 5, Elapsed: 3 * s}, 0, false},
		{Progress{Done: 1, Total: 5, Elapsed: 4 * s, DoneAt: 4 * s}, 16 * s, true},
		{Progress{Done: 2, Total: 5, Elapsed: 7 * s, DoneAt: 6 * s}, 8 * s, true}, // 3 s a step, 9 s for 3, 1 s spent
		{Progress{Done: 2, Total: 5, Elapsed: 30 * s, DoneAt: 6 * s}, 0, true},    // the current step overran the estimate
		{Progress{Done: 5, Total: 5, Elapsed: 9 * s, DoneAt: 9 * s}, 0, true},
	} {
		got, ok := c.p.Remaining()
		if got != c.want || ok != c.ok {
			t.Errorf("%+v: Remaining() = %v, %v; want %v, %v", c.p, got, ok, c.want, c.ok)
		}
	}
}

// NewProgress reports each step with the time of the steps done.
func TestBenchNewProgress(t *testing.T) {
	var got []Progress
	step := NewProgress(func(p Progress) { got = append(got, p) }, "round", 2)
	step(0)
	time.Sleep(20 * time.Millisecond)
	step(1)
	step(2)
	if len(got) != 3 || got[0].Done != 0 || got[0].DoneAt != 0 || got[1].Done != 1 || got[1].DoneAt < 20*time.Millisecond ||
		got[1].DoneAt != got[1].Elapsed || got[2].Done != 2 || got[2].Total != 2 || got[2].Phase != "round" {
		t.Errorf("progress %+v", got)
	}
	NewProgress(nil, "round", 1)(0) // no report: nothing happens
}
