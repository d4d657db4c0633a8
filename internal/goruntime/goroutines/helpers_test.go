package goroutines

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// requireRoot skips the test unless it runs as root (it fails it when
// CI=true: CI runs as root and must exercise every test).
func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	msg := "reading another process's memory needs root (or CAP_SYS_PTRACE)"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// workload is a running goparked process.
type workload struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
}

// startWorkload runs bin with args, waits for it to print "ready" and
// kills it when the test ends.
func startWorkload(t testing.TB, bin string, args ...string) *workload {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	w := &workload{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	ready := make(chan bool, 1)
	go func() { ready <- w.out.Scan() && w.out.Text() == "ready" }()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("%s did not print ready", bin)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s not ready after 30s", bin)
	}
	return w
}

// alive asks the workload for its counters: how many blocked goroutines
// woke up and how many spin rounds it made.
func (w *workload) alive(t testing.TB) (woken, spins int64) {
	t.Helper()
	woken, spins, _ = w.counters(t)
	return woken, spins
}

// counters asks the workload for its counters: blocked goroutines that
// woke up, spin rounds, and short-lived goroutines started.
func (w *workload) counters(t testing.TB) (woken, spins, children int64) {
	t.Helper()
	if _, err := io.WriteString(w.stdin, "?\n"); err != nil {
		t.Fatalf("workload gone: %v", err)
	}
	if !w.out.Scan() {
		t.Fatalf("workload gone: %v", w.out.Err())
	}
	if _, err := fmt.Sscanf(w.out.Text(), "alive woken=%d spins=%d children=%d", &woken, &spins, &children); err != nil {
		t.Fatalf("workload said %q: %v", w.out.Text(), err)
	}
	return woken, spins, children
}

// procState returns the state letter of pid in /proc/PID/stat.
func procState(t testing.TB, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+3 > len(s) {
		t.Fatalf("bad /proc/%d/stat: %q", pid, s)
	}
	return s[i+2 : i+3]
}
