//go:build linux && amd64

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"math"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/wallprof/wallprof/internal/latency"
)

type splitTruth struct {
	Count      uint64 `json:"count"`
	WallNs     int64  `json:"wall_ns"`
	RunningNs  int64  `json:"running_ns"`
	RunnableNs int64  `json:"runnable_ns"`
	BlockedNs  int64  `json:"blocked_ns"`
}

// runLatencyOn starts wallprof latency --json on the target (started and
// waiting for SIGUSR1), lets the target run to its exit, checks the output
// against its schema, and returns the report and wallprof's stderr.
func runLatencyOn(t *testing.T, target *exec.Cmd, fn string) (*latency.Report, string) {
	t.Helper()
	wp := exec.Command(wallprofBin(t), "latency", "-p", strconv.Itoa(target.Process.Pid), "--json", fn)
	var stdout, stderr bytes.Buffer
	wp.Stdout = &stdout
	errPipe, _ := wp.StderrPipe()
	if err := wp.Start(); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(errPipe)
	line, _ := r.ReadString('\n')
	if !strings.Contains(line, "probes on 1 functions") {
		_ = wp.Process.Kill()
		t.Fatalf("wallprof latency: %q", line)
	}
	stderr.WriteString(line)
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&stderr, r); close(done) }()
	if err := target.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if err := target.Wait(); err != nil {
		t.Fatalf("target: %v", err)
	}
	<-done
	if err := wp.Wait(); err != nil {
		t.Fatalf("wallprof latency: %v\n%s", err, stderr.String())
	}
	var rep latency.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil || len(rep.Functions) != 1 {
		t.Fatalf("output: %v\n%s", err, stdout.String())
	}
	schema, err := filepath.Abs(filepath.Join(schemaDir, "wallprof.latency.v1.json"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := jsonschema.NewCompiler().Compile(schema)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(stdout.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(inst); err != nil {
		t.Errorf("the output does not match %s: %v", schema, err)
	}
	return &rep, stderr.String()
}

// The split of a call's time into running, runnable and blocked, against
// the program's own truth (doc/latency-split.md): goroutines locked to
// their threads, more of them than CPUs, call main.work (spin 1-4 ms,
// sleep 1-4 ms), and the program sums each call's thread CPU time and run
// queue wait. Every call is split, and wallprof's three shares are within
// 2 points of the program's; by Go 1.26 and 1.22, stripped.
func TestLatencySplit(t *testing.T) {
	requireRecording(t)
	for _, tc := range []string{"", "go1.22.12"} {
		name := tc
		if name == "" {
			name = "local"
		}
		t.Run(name, func(t *testing.T) {
			bin := latencyTarget(t, true, tc)
			out := filepath.Join(t.TempDir(), "truth.json")
			target := startTarget(t, bin, "-split", "-calls", "1500", "-goroutines", "4", "-out", out)
			rep, stderr := runLatencyOn(t, target, "main.work")
			var truth splitTruth
			readJSON(t, out, &truth)
			fn := rep.Functions[0]
			sp := fn.Split
			if sp == nil {
				t.Fatalf("no split in the report:\n%s", stderr)
			}
			run, runq, blocked := sp.Shares()
			w := float64(truth.WallNs)
			trun, trunq, tblocked := float64(truth.RunningNs)/w, float64(truth.RunnableNs)/w, float64(truth.BlockedNs)/w
			t.Logf("%d calls, %d split, %d moved; wallprof: running %.1f%% runnable %.1f%% blocked %.1f%% of %v; program: running %.1f%% runnable %.1f%% blocked %.1f%% of %v",
				fn.Count, sp.Calls, sp.Moved, 100*run, 100*runq, 100*blocked, time.Duration(sp.WallNs),
				100*trun, 100*trunq, 100*tblocked, time.Duration(truth.WallNs))
			if fn.Count != truth.Count || sp.Calls != truth.Count || sp.Moved != 0 {
				t.Errorf("%d calls counted, %d split, %d moved; the program made %d on locked threads: want all split", fn.Count, sp.Calls, sp.Moved, truth.Count)
			}
			for _, c := range []struct {
				name      string
				got, want float64
			}{{"running", run, trun}, {"runnable", runq, trunq}, {"blocked", blocked, tblocked}} {
				if math.Abs(c.got-c.want) > 0.02 {
					t.Errorf("%s: wallprof %.1f%%, the program %.1f%%: more than 2 points apart", c.name, 100*c.got, 100*c.want)
				}
			}
			var bucketCalls uint64
			for _, b := range sp.Buckets {
				bucketCalls += b.Calls
			}
			if bucketCalls != sp.Calls {
				t.Errorf("the split's buckets hold %d calls, the split %d", bucketCalls, sp.Calls)
			}
			// The text output shows the split per bucket and in all.
			var text bytes.Buffer
			latency.WriteText(&text, fn)
			if !strings.Contains(text.String(), "where the time went: running") || strings.Count(text.String(), "blocked") != len(sp.Buckets)+1 {
				t.Errorf("text output without the split:\n%s", text.String())
			}
		})
	}
}

// Goroutines that park in the call (main.handle sleeps, unlocked) mostly
// return on another thread: those calls are counted as moved, not split,
// and split + moved is every call timed.
func TestLatencySplitMoved(t *testing.T) {
	requireRecording(t)
	bin := latencyTarget(t, false, "")
	out := filepath.Join(t.TempDir(), "truth.json")
	target := startTarget(t, bin, "-calls", "5000", "-goroutines", "64", "-out", out)
	rep, _ := runLatencyOn(t, target, "main.handle")
	fn := rep.Functions[0]
	if fn.Split == nil {
		t.Fatal("no split in the report")
	}
	t.Logf("%d calls: %d split, %d moved", fn.Count, fn.Split.Calls, fn.Split.Moved)
	if fn.Split.Calls+fn.Split.Moved != fn.Count || fn.Split.Moved == 0 {
		t.Errorf("%d calls: %d split + %d moved; want the sum, and some moved", fn.Count, fn.Split.Calls, fn.Split.Moved)
	}
}
