package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/bench"
)

// slowBench is a benchmark that logs its process ID to $SLOW_LOG on each
// run, and from its third run on blocks for a minute: an interrupt then
// finds two complete rounds and the third running.
const slowBench = `package slow

import (
	"bytes"
	"fmt"
	"os"
	"testing"
	"time"
)

func BenchmarkSlow(b *testing.B) {
	log := os.Getenv("SLOW_LOG")
	before, _ := os.ReadFile(log)
	f, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Fprintln(f, os.Getpid())
	f.Close()
	for b.Loop() {
		if bytes.Count(before, []byte("\n")) >= 2 {
			time.Sleep(time.Minute)
		}
		time.Sleep(time.Millisecond)
	}
}
`

// Ctrl-C during the third round of 'wallprof bench': the benchmark binary
// is killed, the two complete rounds are stored as a run marked
// incomplete, one sentence says so, and the exit status is 130.
func TestBenchInterruptKeepsRounds(t *testing.T) {
	bin := wallprofBin(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/slow\n\ngo 1.26\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "slow_test.go"), []byte(slowBench), 0o644)
	gitIn(t, dir, "init", "-q", "-b", "main")
	gitIn(t, dir, "add", ".")
	gitIn(t, dir, "commit", "-q", "-m", "slow")
	log := filepath.Join(t.TempDir(), "runs.log")

	cmd := exec.Command(bin, "bench", "--count", "10", "--benchtime", "1x")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SLOW_LOG="+log)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pids []int
	for deadline := time.Now().Add(2 * time.Minute); len(pids) < 3; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("the third round did not start:\n%s", stderr.String())
		}
		data, _ := os.ReadFile(log)
		pids = pids[:0]
		for _, f := range strings.Fields(string(data)) {
			p, _ := strconv.Atoi(f)
			pids = append(pids, p)
		}
	}
	sent := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	t.Logf("after %v: %v\n%s", time.Since(sent), err, stderr.String())
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Errorf("exit status %d; want 130", code)
	}
	if time.Since(sent) > 30*time.Second {
		t.Errorf("it waited %v for the blocked benchmark", time.Since(sent))
	}
	if err := syscall.Kill(pids[2], 0); err != syscall.ESRCH {
		t.Errorf("the benchmark binary of the third round (pid %d) still runs: %v", pids[2], err)
	}
	msg := stderr.String()
	if strings.Count(msg, "\n") != 1 || !strings.Contains(msg, "interrupted after 2 of 10 rounds") || !strings.Contains(msg, "marked incomplete") {
		t.Errorf("stderr %q; want one sentence: interrupted after 2 of 10 rounds ... marked incomplete", msg)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout %q", stdout.String())
	}

	// The store: one run, incomplete, with the two rounds' samples, and a
	// database that passes SQLite's integrity check.
	dbPath := filepath.Join(dir, ".wallprof", "bench.db")
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	var check string
	db.QueryRow("PRAGMA integrity_check").Scan(&check)
	db.Close()
	if check != "ok" {
		t.Errorf("integrity check: %q", check)
	}
	st, err := bench.Open(context.Background(), dbPath, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := st.Runs(context.Background())
	st.Close()
	if err != nil || len(runs) != 1 {
		t.Fatalf("%d runs stored (%v); want 1", len(runs), err)
	}
	r := runs[0]
	if !r.Incomplete || len(r.Results) != 2 || len(r.Samples()[bench.Series{Pkg: "example.com/slow", Name: "Slow-" + gomaxprocs(r), Unit: "sec/op"}]) != 2 {
		t.Errorf("stored run: incomplete %v, %d results %+v; want 2 results, incomplete", r.Incomplete, len(r.Results), r.Results)
	}

	// history shows it marked, in text and JSON.
	t.Chdir(dir)
	code, out, errs := runCmd("bench", "history", "Slow")
	if code != exitOK || !strings.Contains(out, "incomplete") {
		t.Errorf("history exited %d:\n%s%s", code, out, errs)
	}
	code, out, _ = runCmd("bench", "history", "Slow", "--json")
	var rep bench.Report
	if err := json.Unmarshal([]byte(out), &rep); code != exitOK || err != nil || len(rep.Histories) != 1 || !rep.Histories[0].Points[0].Incomplete {
		t.Errorf("history --json exited %d (%v): %s", code, err, out)
	}
}

// gomaxprocs is the -N suffix of the run's benchmark names.
func gomaxprocs(r *bench.Run) string {
	if len(r.Results) == 0 {
		return ""
	}
	n := r.Results[0].Name
	return n[strings.LastIndexByte(n, '-')+1:]
}
