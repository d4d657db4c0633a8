package groundtruth

import (
	"debug/elf"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/linux"
)

// within reports whether got is within frac of want.
func within(got, want time.Duration, frac float64) bool {
	d := float64(got - want)
	return d <= frac*float64(want) && -d <= frac*float64(want)
}

// stolen returns the time the hypervisor has taken from this machine's
// CPUs (linux.MachineSteal), 0 where not reported.
func stolen() time.Duration {
	d, _ := linux.MachineSteal()
	return d
}

func TestCGT(t *testing.T) {
	bin := Build(t, "cgt")
	steal0 := stolen()
	tr := Run(t, bin, "--late-threads")
	// Time the hypervisor took from the VM's CPUs counts neither as a
	// thread's CPU time nor as its run delay; allow it (and a tick of the
	// counter's resolution) when there was some.
	steal := stolen() - steal0
	if steal > 0 {
		steal += 10 * time.Millisecond
		t.Logf("the hypervisor took %v from this machine's CPUs during the workload", steal)
	}
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	if tr.Partial || tr.Workload != "cgt" {
		t.Errorf("partial=%v workload=%q", tr.Partial, tr.Workload)
	}
	for name, want := range map[string]int{"burner": 1, "sleeper": 1, "reader": 1, "writer": 1,
		"waiter": 1, "contend": 1, "spinner": 3, "late": 1} {
		if got := len(tr.Thread(name)); got != want {
			t.Errorf("%d threads named %s, want %d", got, name, want)
		}
	}
	phase := func(thread, name string) Phase {
		t.Helper()
		th := tr.Thread(thread)
		if len(th) == 0 {
			t.Fatalf("no thread %s", thread)
		}
		p, ok := th[0].Phases[name]
		if !ok {
			t.Fatalf("thread %s has no phase %s: %v", thread, name, th[0].PhaseNames())
		}
		t.Logf("%-8s %-10s wall %-12v cpu %-12v runnable %v", thread, name, p.Wall(), p.CPU(), p.RunDelay())
		return p
	}
	// A spinner is on a CPU or runnable all the time: cpu + run delay = wall
	// holds whatever else runs on the machine.
	spins := map[string]Phase{"burn_cpu": phase("burner", "burn_cpu"), "late_burn": phase("late", "late_burn"),
		"contend": phase("contend", "contend"), "spin": phase("spinner", "spin")}
	for name, p := range spins {
		if d := p.CPU() + p.RunDelay() - p.Wall(); d > p.Wall()*3/100 || -d > p.Wall()*3/100+steal {
			t.Errorf("%s: cpu %v + runnable %v != wall %v", name, p.CPU(), p.RunDelay(), p.Wall())
		}
	}
	// burn_cpu lasts its second. How much of it is on a CPU depends on what
	// else the (shared) machine runs; that it never blocks is checked above.
	if b := spins["burn_cpu"]; !within(b.Wall(), time.Second, 0.05) {
		t.Errorf("burn_cpu: wall %v, want ~1s", b.Wall())
	}
	for _, c := range []struct {
		thread, phase string
		wall          time.Duration
	}{{"sleeper", "do_sleep", time.Second}, {"reader", "read_pipe", time.Second},
		{"writer", "feed_pipe", time.Second}, {"waiter", "wait_cond", time.Second / 2}} {
		p := phase(c.thread, c.phase)
		if !within(p.Wall(), c.wall, 0.1) || p.CPU() > p.Wall()/5 {
			t.Errorf("%s: wall %v cpu %v, want ~%v mostly blocked", c.phase, p.Wall(), p.CPU(), c.wall)
		}
	}
	checkContention(t, tr, spins["contend"])
}

// checkContention checks that contend (one of 4 spinning threads) waited
// for a CPU about half of the time on 2 CPUs. That only holds if the
// spinners got both CPUs, so it is skipped when other jobs took a share.
func checkContention(t *testing.T, tr *Truth, c Phase) {
	t.Helper()
	if n := runtime.NumCPU(); n != 2 || tr.NProc != 2 {
		t.Logf("%d CPUs: not checking contend's runnable share (only meaningful on 2)", n)
		return
	}
	spin, n := tr.PhaseTotal("spin")
	cpus := float64(spin.CPUNS+c.CPUNS) / float64(c.WallNS)
	frac := float64(c.RunDelayNS) / float64(c.WallNS)
	if n != 3 || cpus < 1.8 {
		t.Logf("the 4 spinners got %.2f CPUs of 2 (machine busy): contend runnable %.0f%%, not checked", cpus, 100*frac)
		return
	}
	if frac < 0.35 || frac > 0.65 {
		t.Errorf("contend: runnable %.0f%% of wall, want ~50%% on 2 CPUs", 100*frac)
	}
}

func TestCGTExitAfter(t *testing.T) {
	tr := Run(t, Build(t, "cgt"), "--exit-after", "300", "--scale", "0.5")
	if !tr.Partial {
		t.Error("partial = false after --exit-after")
	}
	if err := tr.Validate(); err != nil {
		t.Error(err)
	}
	if len(tr.Thread("burner")) != 1 || len(tr.Thread("burner")[0].Phases) != 0 {
		t.Errorf("burner at 300ms of 500: %+v", tr.Thread("burner"))
	}
}

func TestGoGT(t *testing.T) {
	tr := Run(t, Build(t, "gogt"), "--duration", "500ms")
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	d := 500 * time.Millisecond
	for _, c := range []struct {
		fn    string
		count int
	}{{"main.compute", 2}, {"main.sleeper", 2}, {"main.chanWaiter", 2}, {"main.chanFeeder", 1},
		{"main.pipeReader", 1}, {"main.pipeWriter", 1}, {"main.mutexContender", 3}} {
		g := tr.Group(c.fn)
		if g == nil {
			t.Errorf("no group %s", c.fn)
			continue
		}
		p := g.Phases[c.fn]
		t.Logf("%-20s x%d wall %v lock wait %v", c.fn, g.Count, p.Wall(), time.Duration(p.LockWaitNS))
		if g.Count != c.count || !within(p.Wall(), time.Duration(c.count)*d, 0.15) {
			t.Errorf("%s: %d goroutines, wall %v; want %d, ~%v each", c.fn, g.Count, p.Wall(), c.count, d)
		}
	}
	mu := tr.Group("main.mutexContender").Phases["main.mutexContender"]
	// 3 contenders, one holding at a time: each waits ~2/3 of the time.
	if frac := float64(mu.LockWaitNS) / float64(mu.WallNS); frac < 0.4 || frac > 0.8 {
		t.Errorf("mutexContender waits %.0f%% of its time in Lock, want ~67%%", 100*frac)
	}
	if tr.Process == nil || tr.Process.CPUNS <= 0 || tr.Process.WallNS <= 0 {
		t.Errorf("process = %+v", tr.Process)
	}
}

func TestBuildGoStripped(t *testing.T) {
	bin := BuildGo(t, WorkloadDir(t, "gogt"), true, "")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Section(".symtab") != nil {
		t.Error("stripped binary has .symtab")
	}
	if f.Section(".gopclntab") == nil {
		t.Error("stripped binary lost .gopclntab")
	}
}

// TestBuildGoToolchain builds with an older toolchain when the go command
// can get it (it may download it once).
func TestBuildGoToolchain(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: may download a Go toolchain")
	}
	bin := BuildGo(t, WorkloadDir(t, "gogt"), false, "go1.22.12")
	out, err := exec.Command("go", "version", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`: go1\.22\.12\b`).Match(out) {
		t.Errorf("go version %s: %s", bin, out)
	}
}

func TestBenchWorkloads(t *testing.T) {
	for name, re := range map[string]string{
		"pingpong": `pingpong: iters=2000 elapsed_ns=\d+ switches_per_s=\d+ user_ns=\d+ sys_ns=\d+ start_mono_ns=\d+ end_mono_ns=\d+`,
		"cpubound": `^[0-9a-f]{16}\ncpubound: iters=2000 checksum=[0-9a-f]{16} elapsed_ns=\d+ user_ns=\d+ sys_ns=\d+ start_mono_ns=\d+ end_mono_ns=\d+`,
	} {
		out, err := exec.Command(Build(t, name), "--iters", "2000").CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v\n%s", name, err, out)
			continue
		}
		if !regexp.MustCompile(re).Match(out) {
			t.Errorf("%s printed %q, want a match for %s", name, out, re)
		}
	}
}

func TestGoGTBursts(t *testing.T) {
	tr := Run(t, Build(t, "gogt"), "--bursts", "--duration", "500ms")
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	if tr.Mode != "bursts" || tr.Process == nil || tr.Process.CPUNS <= 0 {
		t.Fatalf("mode %q, process %+v", tr.Mode, tr.Process)
	}
	var computeCPU int64
	for _, c := range []struct {
		fn     string
		count  int
		phases []string
	}{
		{"main.burstHandler", 3, []string{"main.burstCompute", "main.burstSleep", "main.burstChan", "main.burstPipe"}},
		{"main.burstFeeder", 3, []string{"main.burstFeeder"}},
		{"main.burstWriter", 3, []string{"main.burstWriter"}},
		{"main.crowd", 4, []string{"main.crowdCompute", "main.crowdSleep"}},
	} {
		g := tr.Group(c.fn)
		if g == nil {
			t.Errorf("no group %s", c.fn)
			continue
		}
		if g.Count != c.count || len(g.Phases) != len(c.phases) || !within(time.Duration(g.WallNS), time.Duration(c.count)*500*time.Millisecond, 0.2) {
			t.Errorf("%s: %d goroutines, wall %v, phases %v; want %d, ~%v each, phases %v", c.fn, g.Count, time.Duration(g.WallNS),
				g.Phases, c.count, 500*time.Millisecond, c.phases)
		}
		var sum time.Duration
		for _, name := range c.phases {
			p, ok := g.Phases[name]
			if !ok || p.WallNS <= 0 {
				t.Errorf("%s: phase %s missing or empty: %+v", c.fn, name, p)
			}
			t.Logf("%-18s %-18s wall %-12v cpu %v", c.fn, name, p.Wall(), p.CPU())
			sum += p.Wall()
			if strings.HasSuffix(name, "Compute") {
				if p.CPUNS <= 0 || p.CPUNS > p.WallNS {
					t.Errorf("%s: cpu %v, wall %v", name, p.CPU(), p.Wall())
				}
				computeCPU += p.CPUNS
			} else if p.CPUNS != 0 {
				t.Errorf("%s: cpu %v measured in a phase that does not measure it", name, p.CPU())
			}
		}
		// The phases fill the goroutines' time but for the loop between
		// them: the calibration of the compute phases, and the readings of
		// the CPU clock around them, where the kernel often preempts the
		// thread (reading the clock updates its CPU time, which can end its
		// time slice): up to 8% of the crowd's time on a busy machine.
		if sum > time.Duration(g.WallNS) || sum < time.Duration(g.WallNS)*85/100 {
			t.Errorf("%s: phases add up to %v of %v", c.fn, sum, time.Duration(g.WallNS))
		}
	}
	// Nearly all of the process's CPU time is spent computing.
	if computeCPU > tr.Process.CPUNS || computeCPU < tr.Process.CPUNS*8/10 {
		t.Errorf("compute phases used %v of the process's %v of CPU time", time.Duration(computeCPU), tr.Process.CPU())
	}
}
