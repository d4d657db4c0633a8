//go:build linux && amd64

package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/agent/otelcoltest"
	"github.com/wallprof/wallprof/internal/agent/push"
	"github.com/wallprof/wallprof/internal/groundtruth"
	"github.com/wallprof/wallprof/internal/profile"
)

// TestAgentCollectorHTTP runs 'wallprof agent -p PID --period 2s' for 60 s
// on the C ground-truth workload (bursts) against a real OpenTelemetry
// Collector (otelcoltest: built with the collector builder, profiles
// enabled, OTLP receiver, file exporter), over OTLP/HTTP. The Collector is
// stopped for 20 s mid-run and started again. What its file exporter
// wrote, read back with the Collector's pdata: every window once
// (sequence numbers 1..N, none missing, none twice), each thread's wall
// time within 2% of the workload's own measure, and each phase's share of
// its thread's time (wall, on-CPU, runnable, blocked) within 2 points.
func TestAgentCollectorHTTP(t *testing.T) {
	agentCollectorRun(t, "http/protobuf", 60, 20*time.Second)
}

// TestAgentCollectorGRPC is TestAgentCollectorHTTP over OTLP/gRPC, 10 s,
// with no outage.
func TestAgentCollectorGRPC(t *testing.T) {
	agentCollectorRun(t, "grpc", 10, 0)
}

func agentCollectorRun(t *testing.T, protocol string, seconds int, outage time.Duration) {
	requireRecording(t)
	cgt := groundtruth.Build(t, "cgt")
	bin := wallprofBin(t)
	col := otelcoltest.Start(t)
	url := "http://" + col.HTTP
	if protocol == "grpc" {
		url = "http://" + col.GRPC
	}
	truthPath := filepath.Join(t.TempDir(), "truth.json")
	work := exec.Command(cgt, "--truth", truthPath, "--bursts", strconv.Itoa(seconds), "--start-delay", "1500")
	if err := work.Start(); err != nil {
		t.Fatal(err)
	}
	defer work.Process.Kill()
	var stderr bytes.Buffer
	ag := exec.Command(bin, "agent", "-p", strconv.Itoa(work.Process.Pid), "--period", "2s",
		"--otlp", url, "--otlp-protocol", protocol,
		"--metrics", "off", "--spool", t.TempDir(), "--flush-timeout", "60s")
	ag.Stderr = &stderr
	if err := ag.Start(); err != nil {
		t.Fatal(err)
	}
	defer ag.Process.Kill()
	if outage > 0 {
		// From a third of the run: down for outage, then up again.
		time.Sleep(time.Duration(seconds) * time.Second / 3)
		col.Stop()
		t.Logf("Collector stopped at %v for %v", time.Duration(seconds)*time.Second/3, outage)
		time.Sleep(outage)
		col.Restart()
	}
	if err := work.Wait(); err != nil {
		t.Fatalf("cgt: %v", err)
	}
	waitAgent(t, ag, &stderr, 90*time.Second)
	col.Stop() // its file exporter flushes
	if outage > 0 && !strings.Contains(stderr.String(), "retrying with backoff") {
		t.Error("the agent never retried: the outage did not happen during the run")
	}
	truth, err := groundtruth.ReadTruth(truthPath)
	if err != nil {
		t.Fatal(err)
	}
	windows, err := otelcoltest.ReadFile(col.Out)
	if err != nil {
		t.Fatal(err)
	}
	// Every window once.
	seen := map[int64]int{}
	for _, w := range windows {
		seq, _ := w.Attributes[push.KeySeq].(int64)
		seen[seq]++
		if pid := w.Resource[push.KeyPID]; pid != int64(work.Process.Pid) {
			t.Errorf("window %d: process.pid %v", seq, pid)
		}
		if w.SampleType != "wall/nanoseconds" {
			t.Errorf("window %d: sample type %s", seq, w.SampleType)
		}
	}
	for seq := int64(1); seq <= int64(len(windows)); seq++ {
		if seen[seq] != 1 {
			t.Errorf("window %d arrived %d times", seq, seen[seq])
		}
	}
	if min := seconds/2 - 1; len(windows) < min {
		t.Fatalf("%d windows arrived, want at least %d over %d s at 2 s", len(windows), min, seconds)
	}
	t.Logf("%s: %d windows arrived, sequence numbers 1..%d each once", protocol, len(windows), len(windows))
	// The windows as one profile, for the phase checks of 'record'.
	p := windowsProfile(windows)
	for _, tt := range truth.Threads {
		th := findThread(p, tt.TID)
		if th == nil {
			t.Errorf("thread %d (%s) is in no window", tt.TID, tt.Name)
			continue
		}
		got, want := th.Wall(), tt.Lifetime()
		diff := got - want
		t.Logf("thread %d %-12s wall %v, windows %v (%+.2f%%)", tt.TID, tt.Name, want, got, 100*float64(diff)/float64(want))
		if diff < 0 {
			diff = -diff
		}
		if float64(diff) > 0.02*float64(want) {
			t.Errorf("thread %d (%s): the windows add up to %v, the workload measured %v: off by more than 2%%",
				tt.TID, tt.Name, got, want)
		}
	}
	checkPhases(t, p, truth)
}

// windowsProfile merges the received windows into one profile: their
// samples, with stacks of function names, and each thread's time by state
// (its lifetime is the time the windows account for it).
func windowsProfile(windows []otelcoltest.Window) *profile.Profile {
	p := &profile.Profile{}
	threads := map[int]*profile.Thread{}
	locs := map[string]*profile.Location{}
	for _, w := range windows {
		for _, s := range w.Samples {
			st, ok := profile.ParseState(s.State)
			if !ok {
				st = profile.Other
			}
			smp := &profile.Sample{TID: int(s.TID), Thread: s.Thread, State: st, Value: s.Value}
			for _, fn := range s.Stack {
				l := locs[fn]
				if l == nil {
					l = &profile.Location{ID: uint64(len(locs) + 1), Frames: []profile.Frame{{Function: fn}}}
					locs[fn] = l
					p.Locs = append(p.Locs, l)
				}
				smp.Stack = append(smp.Stack, l)
			}
			p.Samples = append(p.Samples, smp)
			th := threads[smp.TID]
			if th == nil {
				th = &profile.Thread{TID: smp.TID, Name: s.Thread}
				threads[smp.TID] = th
				p.Threads = append(p.Threads, th)
			}
			th.Time[st] += time.Duration(s.Value)
			th.End += time.Duration(s.Value)
		}
	}
	return p
}
