package collect

import (
	"os/exec"
	"slices"
	"sort"
	"testing"
	"time"
)

// Each accounting loads only the tracepoint programs it attaches: the
// verifier spends 0.3-0.4 s of CPU on those the walk does not use (the
// switch-time accounting's and the resumption accounting's), which every
// recording's start paid before.
func TestOpenLoadsOnlyWhatItAttaches(t *testing.T) {
	requireBPF(t)
	if !hasExitTP() || !hasSchedstat() {
		t.Skip("the kernel has no sched_exit_tp or no schedstat: neither the walk nor the resumption accounting runs here")
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	time.Sleep(50 * time.Millisecond)
	for _, c := range []struct {
		acc  Accounting
		want []string
	}{
		{AccountWalk, []string{progTaskExit, progTaskFree}},
		{AccountResume, []string{progResume, progTaskExit, progTaskFree}},
		{AccountSwitch, []string{progSchedExit, progSwitch}},
	} {
		s, err := Open(Plan{PIDs: []int{cmd.Process.Pid}, Freq: DefaultFreq, Accounting: c.acc})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for name := range s.objs.tracing {
			got = append(got, name)
		}
		sort.Strings(got)
		walking := s.walk != nil
		s.Close()
		if !slices.Equal(got, c.want) {
			t.Errorf("accounting %v loaded %v, want %v", c.acc, got, c.want)
		}
		if walking != (c.acc == AccountWalk) {
			t.Errorf("accounting %v: walking %v", c.acc, walking)
		}
	}
}
