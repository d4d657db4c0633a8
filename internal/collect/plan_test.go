package collect

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/collect/bpf"
)

func TestPlanValidate(t *testing.T) {
	ok := Plan{PIDs: []int{1}, Freq: DefaultFreq}
	for _, c := range []struct {
		name    string
		edit    func(*Plan)
		wantErr string // "" for valid
	}{
		{"default", func(*Plan) {}, ""},
		{"lowest frequency", func(p *Plan) { p.Freq = 1 }, ""},
		{"highest frequency", func(p *Plan) { p.Freq = MaxFreq }, ""},
		{"duration and options", func(p *Plan) {
			p.Duration, p.FollowForks, p.Stats, p.PIDs = 5*time.Second, true, StatsOff, []int{3, 4, 5}
		}, ""},
		{"zero frequency", func(p *Plan) { p.Freq = 0 }, "frequency 0 Hz"},
		{"negative frequency", func(p *Plan) { p.Freq = -99 }, "frequency -99 Hz"},
		{"frequency too high", func(p *Plan) { p.Freq = MaxFreq + 1 }, "out of range"},
		{"negative duration", func(p *Plan) { p.Duration = -time.Second }, "negative duration"},
		{"nil PIDs", func(p *Plan) { p.PIDs = nil }, "no process"},
		{"empty PIDs", func(p *Plan) { p.PIDs = []int{} }, "no process"},
		{"PID 0", func(p *Plan) { p.PIDs = []int{0} }, "bad PID 0"},
		{"negative PID among good ones", func(p *Plan) { p.PIDs = []int{1, 2, -7} }, "bad PID -7"},
		{"agent's ring", func(p *Plan) { p.RingBytes = 2 << 20 }, ""},
		{"ring not a power of two", func(p *Plan) { p.RingBytes = 3 << 20 }, "power of two"},
		{"ring too small", func(p *Plan) { p.RingBytes = 4096 }, "power of two"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := ok
			p.PIDs = append([]int(nil), ok.PIDs...)
			c.edit(&p)
			err := p.Validate()
			if c.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate(%+v) = %v, want nil", p, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate(%+v) = nil, want an error", p)
			}
			if !errors.Is(err, ErrBadPlan) {
				t.Errorf("error %v does not wrap ErrBadPlan", err)
			}
			if !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("error %q does not mention %q", err, c.wantErr)
			}
		})
	}
}

func TestPlanPeriodNs(t *testing.T) {
	for _, c := range []struct {
		freq int
		want uint64
	}{
		{1, 1_000_000_000},
		{DefaultFreq, 10_101_010}, // also the BPF program's default period_ns
		{100, 10_000_000},
		{997, 1_003_009},
		{1000, 1_000_000},
		{MaxFreq, 50_000},
	} {
		if got := (Plan{Freq: c.freq}).PeriodNs(); got != c.want {
			t.Errorf("PeriodNs at %d Hz = %d, want %d", c.freq, got, c.want)
		}
	}
	// The period never rounds to zero over the valid range.
	for f := 1; f <= MaxFreq; f++ {
		if (Plan{Freq: f}).PeriodNs() == 0 {
			t.Fatalf("PeriodNs at %d Hz is 0", f)
		}
	}
}

// The names of the lost counters follow the BPF program's enum: one per
// entry of the lost array, and the recovered switch-ins' slot unnamed (they
// are not a loss and are reported apart).
func TestLostNamesMatchProgram(t *testing.T) {
	spec, err := bpf.LoadWallprof()
	if err != nil {
		t.Fatal(err)
	}
	m := spec.Maps["lost"]
	if m == nil {
		t.Fatal("no lost map in the BPF object")
	}
	if int(m.MaxEntries) != len(lostNames) {
		t.Errorf("lost map has %d entries, lostNames %d", m.MaxEntries, len(lostNames))
	}
	if recoveredSwitchIn >= len(lostNames) || lostNames[recoveredSwitchIn] != "" {
		t.Errorf("recovered switch-ins (counter %d) must not be named as a loss", recoveredSwitchIn)
	}
	if lostNames[recoveredSwitchIn-1] != "unreported-switch-out" {
		t.Errorf("counter %d is %q, want unreported-switch-out before the recovered switch-ins", recoveredSwitchIn-1, lostNames[recoveredSwitchIn-1])
	}
}
