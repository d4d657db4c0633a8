package collect

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// StatsMode says how the run time of wallprof's BPF programs is measured.
// The kernel's BPF statistics cost two clock reads per program run, about as
// much as the programs themselves on a switch-heavy machine, so by default
// they are on for a tenth of the time and the total is extrapolated.
type StatsMode int

const (
	StatsSampled StatsMode = iota // on for StatsWindow of every StatsEvery; the total is estimated
	StatsFull                     // on for the whole recording; exact
	StatsOff                      // not measured
)

// Duty cycle of StatsSampled.
const (
	StatsEvery  = time.Second
	StatsWindow = 100 * time.Millisecond
)

// ParseStatsMode parses "sampled", "full" or "off".
func ParseStatsMode(s string) (StatsMode, error) {
	switch s {
	case "sampled":
		return StatsSampled, nil
	case "full":
		return StatsFull, nil
	case "off":
		return StatsOff, nil
	}
	return 0, fmt.Errorf("%w: unknown BPF statistics mode %q (use sampled, full or off)", ErrBadPlan, s)
}

// statsSwitch turns the kernel's BPF statistics on and off and keeps how
// long they were on. Closing the descriptor restores the previous setting
// (statistics the administrator turned on stay on).
type statsSwitch struct {
	mu    sync.Mutex
	fd    io.Closer
	since time.Time
	on    time.Duration
	stop  chan struct{}
	done  chan struct{}
	err   error
	// always: the administrator keeps the statistics on, so they measured
	// the whole recording, whatever this switch did.
	always bool
}

func (w *statsSwitch) enable() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd != nil {
		return
	}
	fd, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		w.err = err
		return
	}
	w.fd, w.since = fd, time.Now()
}

func (w *statsSwitch) disable() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fd == nil {
		return
	}
	w.on += time.Since(w.since)
	_ = w.fd.Close()
	w.fd = nil
}

// start turns the statistics on, for good (full) or for a window every
// period (sampled).
func (w *statsSwitch) start(mode StatsMode) {
	w.stop, w.done = make(chan struct{}), make(chan struct{})
	w.enable()
	if statsAlreadyOn() {
		w.always = true
		// Someone else keeps them on (sysctl kernel.bpf_stats_enabled=1):
		// the programs are measured all the time whatever we do, and a
		// total scaled up from a window would be too large.
		mode = StatsFull
	}
	if mode != StatsSampled {
		close(w.done)
		return
	}
	go func() {
		defer close(w.done)
		t := time.NewTimer(StatsWindow)
		defer t.Stop()
		on := true
		for {
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
			if on {
				w.disable()
				t.Reset(StatsEvery - StatsWindow)
			} else {
				w.enable()
				t.Reset(StatsWindow)
			}
			on = !on
		}
	}()
}

// statsAlreadyOn reports whether the kernel's BPF statistics are on before
// wallprof turns them on (the sysctl shows the administrator's setting;
// wallprof's own descriptor does not change it).
func statsAlreadyOn() bool {
	b, err := os.ReadFile("/proc/sys/kernel/bpf_stats_enabled")
	return err == nil && strings.TrimSpace(string(b)) == "1"
}

// finish turns the statistics off and returns how long they were on.
func (w *statsSwitch) finish() time.Duration {
	if w.stop != nil {
		select {
		case <-w.stop:
		default:
			close(w.stop)
		}
		<-w.done
	}
	w.disable()
	return w.on
}
