package groundtruth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const sampleTruth = `{"workload": "cgt", "pid": 123, "scale": 1, "nproc": 2,
 "start_ns": 1000, "end_ns": 5000000000, "partial": false,
 "threads": [
  {"tid": 124, "name": "burner", "start_ns": 1000, "end_ns": 1000001000, "phases": {
    "burn_cpu": {"wall_ns": 999000000, "cpu_ns": 998000000, "run_delay_ns": 500000}}},
  {"tid": 125, "name": "spinner", "start_ns": 1000, "end_ns": 2000001000, "phases": {
    "stage_wait": {"wall_ns": 1000000000, "cpu_ns": 10000, "run_delay_ns": 0},
    "spin": {"wall_ns": 1000000000, "cpu_ns": 500000000, "run_delay_ns": 490000000}}},
  {"tid": 126, "name": "spinner", "start_ns": 1000, "end_ns": 2000001000, "phases": {
    "spin": {"wall_ns": 1000000000, "cpu_ns": 400000000, "run_delay_ns": 590000000}}}
 ],
 "process": {"wall_ns": 7, "cpu_ns": 3, "run_delay_ns": 1},
 "groups": [{"name": "mutexContender", "function": "main.mutexContender", "count": 3,
   "wall_ns": 3000, "phases": {"main.mutexContender": {"wall_ns": 3000, "lock_wait_ns": 2000}}}]
}`

func TestParseTruth(t *testing.T) {
	tr, err := ParseTruth([]byte(sampleTruth))
	if err != nil {
		t.Fatal(err)
	}
	if tr.PID != 123 || tr.Workload != "cgt" || tr.NProc != 2 || len(tr.Threads) != 3 {
		t.Fatalf("parsed %+v", tr)
	}
	if err := tr.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
	b := tr.Thread("burner")
	if len(b) != 1 || b[0].TID != 124 || b[0].Lifetime() != time.Second {
		t.Errorf("Thread(burner) = %+v", b)
	}
	p := b[0].Phases["burn_cpu"]
	if p.Wall() != 999*time.Millisecond || p.CPU() != 998*time.Millisecond || p.RunDelay() != 500*time.Microsecond {
		t.Errorf("burn_cpu = %+v", p)
	}
	if got := p.Blocked(); got != 500*time.Microsecond {
		t.Errorf("Blocked = %v", got)
	}
	if got := len(tr.Thread("spinner")); got != 2 {
		t.Errorf("Thread(spinner) has %d threads, want 2", got)
	}
	if got := tr.Thread("nobody"); got != nil {
		t.Errorf("Thread(nobody) = %v", got)
	}
	sum, n := tr.PhaseTotal("spin")
	if n != 2 || sum.WallNS != 2e9 || sum.CPUNS != 9e8 || sum.RunDelayNS != 108e7 {
		t.Errorf("PhaseTotal(spin) = %+v, %d", sum, n)
	}
	if got := b[0].PhaseNames(); len(got) != 1 || got[0] != "burn_cpu" {
		t.Errorf("PhaseNames = %v", got)
	}
	g := tr.Group("main.mutexContender")
	if g == nil || g != tr.Group("mutexContender") || g.Count != 3 || g.Phases["main.mutexContender"].LockWaitNS != 2000 {
		t.Errorf("Group = %+v", g)
	}
	if tr.Process == nil || tr.Process.CPUNS != 3 {
		t.Errorf("Process = %+v", tr.Process)
	}
}

func TestParseTruthErrors(t *testing.T) {
	for name, in := range map[string]string{
		"not json":    `{"pid": 1,`,
		"no pid":      `{"threads": []}`,
		"thread tid":  `{"pid": 1, "threads": [{"name": "x"}]}`,
		"thread name": `{"pid": 1, "threads": [{"tid": 2}]}`,
		"group":       `{"pid": 1, "groups": [{"name": "x"}]}`,
		"wrong type":  `{"pid": "1"}`,
	} {
		if _, err := ParseTruth([]byte(in)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestValidateFindsInconsistencies(t *testing.T) {
	tr, err := ParseTruth([]byte(sampleTruth))
	if err != nil {
		t.Fatal(err)
	}
	tr.Threads[0].EndNS = tr.Threads[0].StartNS + 1e8 // shorter than its phase
	tr.Threads[1].Phases["spin"] = Phase{WallNS: 1e9, CPUNS: 9e8, RunDelayNS: 5e8}
	err = tr.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"burner: phases last", "phase spin: cpu"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestReadTruth(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.json")
	if _, err := ReadTruth(path); err == nil {
		t.Error("missing file: no error")
	}
	if err := os.WriteFile(path, []byte(sampleTruth), 0o644); err != nil {
		t.Fatal(err)
	}
	if tr, err := ReadTruth(path); err != nil || tr.PID != 123 {
		t.Errorf("ReadTruth = %v, %v", tr, err)
	}
}
