package collect

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/linux"
)

// requireBPF skips the test without the privileges to load BPF programs
// (it fails it when CI=true: CI runs as root).
func requireBPF(t *testing.T) {
	t.Helper()
	if err := linux.CheckPrivileges(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but BPF programs cannot be loaded here: %v", err)
		}
		t.Skipf("cannot load BPF programs here: %v", err)
	}
}

// SnapshotThreads reads a sleeping process: one thread, sleeping since it
// started, in the kernel's nanosleep, with a user stack.
func TestSnapshotThreadsSleep(t *testing.T) {
	requireBPF(t)
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	time.Sleep(300 * time.Millisecond)
	t0 := time.Now()
	ts, err := SnapshotThreads(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot took %v", time.Since(t0))
	if len(ts) != 1 {
		t.Fatalf("%d threads, want 1: %+v", len(ts), ts)
	}
	th := ts[0]
	t.Logf("%+v", th.State)
	t.Logf("tid %d comm %q state %s in %v (known %v) ran %v ago cpu %v kernel %d user %d snap %d", th.TID, th.Comm, th.State, th.InState, th.InStateKnown, th.SinceRan, th.CPUTime, len(th.Kernel), len(th.User), len(th.Snap))
	if th.TID != cmd.Process.Pid || th.Comm != "sleep" || th.State != Sleeping {
		t.Errorf("thread %d %q %s; want %d sleep sleeping", th.TID, th.Comm, th.State, cmd.Process.Pid)
	}
	if !th.InStateKnown || th.InState < 250*time.Millisecond || th.InState > 2*time.Second {
		t.Errorf("in state for %v (known %v), want about 300ms", th.InState, th.InStateKnown)
	}
	if len(th.Kernel) == 0 || len(th.User) == 0 || len(th.Snap) == 0 {
		t.Errorf("stacks: kernel %d, user %d, snapshot %d bytes", len(th.Kernel), len(th.User), len(th.Snap))
	}
}

func TestSnapshotThreadsNoProcess(t *testing.T) {
	requireBPF(t)
	if _, err := SnapshotThreads(1 << 30); err == nil {
		t.Fatal("no error for a process that does not exist")
	}
}
