package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// offcpuModule is a module whose benchmark computes a little and calls
// wait; commit B makes wait sleep 1 ms, time off CPU.
var offcpuModule = map[string]string{
	"go.mod": "module example.com/offcpu\n\ngo 1.26\n",
	"work.go": `package offcpu

var sink uint64

func compute() {
	for i := range 1000 {
		sink += uint64(i) * sink
	}
}

func wait() {}
`,
	"work_test.go": `package offcpu

import "testing"

func BenchmarkWork(b *testing.B) {
	for b.Loop() {
		compute()
		wait()
	}
}
`,
}

const offcpuSlower = `package offcpu

import "time"

var sink uint64

func compute() {
	for i := range 1000 {
		sink += uint64(i) * sink
	}
}

// wait blocks: the regression is time off CPU.
func wait() { time.Sleep(time.Millisecond) }
`

// bench check explains a regression that is time off CPU: the wallprof
// recordings of both versions name the function that blocks, and are
// stored beside the CPU and memory profiles.
func TestBenchCheckOffCPU(t *testing.T) {
	requireRecording(t)
	dir := t.TempDir()
	for name, text := range offcpuModule {
		os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644)
	}
	gitIn(t, dir, "init", "-q", "-b", "main")
	gitIn(t, dir, "add", ".")
	gitIn(t, dir, "commit", "-q", "-m", "A")
	a := gitIn(t, dir, "rev-parse", "HEAD")
	os.WriteFile(filepath.Join(dir, "work.go"), []byte(offcpuSlower), 0o644)
	gitIn(t, dir, "commit", "-q", "-am", "B: wait sleeps")
	t.Chdir(dir)

	code, stdout, stderr := runCmd("bench", "check", "--base", a, "--count", "5", "--benchtime", "100x")
	t.Logf("check:\n%s%s", stdout, stderr)
	if code != exitError {
		t.Fatalf("check exited %d; want 1", code)
	}
	_, section, ok := strings.Cut(stdout, "  off-CPU time:\n")
	if !ok {
		t.Fatal("no off-CPU part in the explanation")
	}
	first, _, _ := strings.Cut(section, "\n")
	if !strings.HasSuffix(first, " example.com/offcpu.wait") {
		t.Errorf("the off-CPU growth names %q first; want example.com/offcpu.wait", first)
	}
	walls, _ := filepath.Glob(filepath.Join(dir, ".wallprof", "profiles", "*", "*-Work-*.wall.pprof"))
	all, _ := filepath.Glob(filepath.Join(dir, ".wallprof", "profiles", "*", "*.pprof"))
	if len(walls) != 2 || len(all) != 6 {
		t.Errorf("profiles stored: %v; want 6, two of them .wall.pprof", all)
	}
}
