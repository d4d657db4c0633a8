package symbolize

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// buildGo builds testdata/goprog.go as its own module, normally and
// stripped (-s -w), into a temporary folder.
func buildGo(t *testing.T) (normal, stripped string) {
	t.Helper()
	goBin := filepath.Join(os.Getenv("GOROOT"), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
		needTool(t, "go")
	}
	dir := t.TempDir()
	src, err := os.ReadFile("testdata/goprog.go")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), src, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module goprog\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	normal, stripped = filepath.Join(dir, "goprog"), filepath.Join(dir, "goprog-stripped")
	for _, args := range [][]string{
		{"build", "-o", normal, "."},
		{"build", "-ldflags=-s -w", "-o", stripped, "."},
	} {
		cmd := exec.Command(goBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "CGO_ENABLED=0", "GOTOOLCHAIN=local")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %v: %v\n%s", args, err, out)
		}
	}
	return normal, stripped
}

func TestGoBinaries(t *testing.T) {
	normal, stripped := buildGo(t)
	syms := funcSymbols(t, normal)
	on, ost := openTestObject(t, normal), openTestObject(t, stripped)
	if on.goTable() == nil || ost.goTable() == nil {
		t.Fatal("Go binaries not recognised by gopclntab")
	}
	if on.buildID == "" || ost.buildID == "" {
		t.Errorf("no build ID (GNU or Go) found: %q %q", on.buildID, ost.buildID)
	}
	for _, name := range []string{"main.spin", "main.main", "runtime.schedule", "runtime.mallocgc"} {
		s, ok := syms[name]
		if !ok {
			t.Fatalf("no symbol %s", name)
		}
		for _, o := range []*object{on, ost} {
			fr := o.frames(s.Value + 1)
			if len(fr) == 0 || outermost(fr) != name || fr[len(fr)-1].Line == 0 {
				t.Errorf("%s: frames at %s+1 = %+v", o.name, name, fr)
			}
		}
	}
}

// TestFixLeafGo checks the SP-delta path: a Go thread parked in the
// frameless runtime.futex has its caller runtime.futexsleep missing from
// the frame-pointer chain, and FixLeaf puts it back.
func TestFixLeafGo(t *testing.T) {
	requires(t, os.Geteuid() == 0, "ptrace of a child for ground-truth registers needs root here")
	normal, _ := buildGo(t)
	cmd := startChild(t, normal, "sleep")
	pid := cmd.Process.Pid
	waitSyscall(t, pid, pid, unix.SYS_FUTEX, unix.SYS_EPOLL_PWAIT, unix.SYS_EPOLL_WAIT, unix.SYS_NANOSLEEP)
	p, err := NewProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir("/proc/" + itoa(pid) + "/task")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, e := range ents {
		tid := atoi(e.Name())
		s := snapshot(t, pid, tid, 512)
		names, _ := symbolizeStack(p, s.chain)
		if names[0] != "runtime.futex" {
			continue
		}
		fixed, _ := symbolizeStack(p, p.FixLeaf(s.regs, s.stack, s.chain))
		t.Logf("thread %d chain %v\nfixed %v", tid, names, fixed)
		if len(names) > 1 && names[1] == "runtime.futexsleep" {
			t.Errorf("chain already has runtime.futexsleep: %v", names)
		}
		if len(fixed) < 2 || fixed[1] != "runtime.futexsleep" || len(fixed) != len(names)+1 {
			t.Errorf("fixed stack %v, want runtime.futexsleep spliced after runtime.futex into %v", fixed, names)
		}
		checked++
	}
	if checked == 0 {
		t.Skip("no thread was parked in runtime.futex")
	}
}
