//go:build linux && amd64

package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/agent/push"
	"github.com/wallprof/wallprof/internal/groundtruth"
)

// otlpReceiver is an OTLP/HTTP profiles receiver that can be taken down.
type otlpReceiver struct {
	down     atomic.Bool
	mu       sync.Mutex
	windows  []push.OTLPWindow
	refused  int
	badPaths []string
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != push.OTLPPath || r.Header.Get("Content-Type") != push.OTLPContentType {
		o.mu.Lock()
		o.badPaths = append(o.badPaths, r.URL.Path+" "+r.Header.Get("Content-Type"))
		o.mu.Unlock()
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	if o.down.Load() {
		o.mu.Lock()
		o.refused++
		o.mu.Unlock()
		http.Error(w, "unavailable", http.StatusServiceUnavailable)
		return
	}
	b, _ := io.ReadAll(r.Body)
	d, err := push.DecodeOTLP(b)
	var ws []push.OTLPWindow
	if err == nil {
		ws, err = push.ReadOTLP(d)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	o.windows = append(o.windows, ws...)
	o.mu.Unlock()
}

// TestAgentOTLPGroundTruth runs 'wallprof agent -p PID --period 2s' on the
// C ground-truth workload (bursts) against an OTLP receiver that answers
// 503 for 4 s in the middle: every window arrives once (sequence numbers
// 1..N, none missing, none twice), and the windows add up, per thread, to
// the thread's wall time as the workload measured it, within 2%.
func TestAgentOTLPGroundTruth(t *testing.T) {
	requireRecording(t)
	cgt := groundtruth.Build(t, "cgt")
	bin := wallprofBin(t)
	rcv := &otlpReceiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()

	truthPath := filepath.Join(t.TempDir(), "truth.json")
	work := exec.Command(cgt, "--truth", truthPath, "--bursts", "7", "--start-delay", "1500")
	if err := work.Start(); err != nil {
		t.Fatal(err)
	}
	defer work.Process.Kill()
	var stderr bytes.Buffer
	ag := exec.Command(bin, "agent", "-p", strconv.Itoa(work.Process.Pid), "--period", "2s", "--otlp", srv.URL,
		"--metrics", "127.0.0.1:0", "--spool", t.TempDir(), "--flush-timeout", "30s")
	ag.Stderr = &stderr
	if err := ag.Start(); err != nil {
		t.Fatal(err)
	}
	defer ag.Process.Kill()
	go func() {
		time.Sleep(3 * time.Second)
		rcv.down.Store(true)
		time.Sleep(4 * time.Second)
		rcv.down.Store(false)
	}()
	if err := work.Wait(); err != nil {
		t.Fatalf("cgt: %v", err)
	}
	waitAgent(t, ag, &stderr, 60*time.Second)
	truth, err := groundtruth.ReadTruth(truthPath)
	if err != nil {
		t.Fatal(err)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.badPaths) > 0 {
		t.Errorf("requests the receiver did not expect: %v", rcv.badPaths)
	}
	if rcv.refused == 0 {
		t.Error("no push was refused: the outage did not happen during the run")
	}
	// Every window once.
	seen := map[int64]int{}
	for _, w := range rcv.windows {
		seen[w.Seq]++
		if pid := w.Resource[push.KeyPID]; pid != int64(work.Process.Pid) {
			t.Errorf("window %d: process.pid %v", w.Seq, pid)
		}
	}
	for seq := int64(1); seq <= int64(len(rcv.windows)); seq++ {
		if seen[seq] != 1 {
			t.Errorf("window %d arrived %d times", seq, seen[seq])
		}
	}
	if len(rcv.windows) < 4 {
		t.Fatalf("%d windows arrived, want at least 4 over ~9 s at 2 s", len(rcv.windows))
	}
	t.Logf("%d windows, %d pushes refused during the outage", len(rcv.windows), rcv.refused)
	// Per thread: the windows' wall time against the workload's.
	for _, tt := range truth.Threads {
		var got int64
		for _, w := range rcv.windows {
			for _, v := range w.Time[int64(tt.TID)] {
				got += v
			}
		}
		want := tt.Lifetime()
		diff := time.Duration(got) - want
		t.Logf("thread %d %-12s wall %v, windows %v (%+.2f%%)", tt.TID, tt.Name, want, time.Duration(got), 100*float64(diff)/float64(want))
		if diff < 0 {
			diff = -diff
		}
		if float64(diff) > 0.02*float64(want) {
			t.Errorf("thread %d (%s): the windows add up to %v, the workload measured %v: off by more than 2%%",
				tt.TID, tt.Name, time.Duration(got), want)
		}
	}
}

// TestAgentSystemWide runs the agent with no -p: one system-wide
// recording, split by process. The ground-truth workload's windows add up
// to each of its threads' wall time within 2%, other processes' windows
// arrive too, and the agent does not record itself.
func TestAgentSystemWide(t *testing.T) {
	requireRecording(t)
	cgt := groundtruth.Build(t, "cgt")
	rcv := &otlpReceiver{}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	truthPath := filepath.Join(t.TempDir(), "truth.json")
	work := exec.Command(cgt, "--truth", truthPath, "--bursts", "5", "--start-delay", "1500")
	if err := work.Start(); err != nil {
		t.Fatal(err)
	}
	defer work.Process.Kill()
	var stderr bytes.Buffer
	ag := exec.Command(wallprofBin(t), "agent", "--period", "2s", "--otlp", srv.URL, "--metrics", "127.0.0.1:0")
	ag.Stderr = &stderr
	if err := ag.Start(); err != nil {
		t.Fatal(err)
	}
	defer ag.Process.Kill()
	if err := work.Wait(); err != nil {
		t.Fatalf("cgt: %v", err)
	}
	time.Sleep(2500 * time.Millisecond) // the window in which it exited
	ag.Process.Signal(syscall.SIGTERM)
	if err := ag.Wait(); err != nil {
		t.Fatalf("wallprof agent: %v\n%s", err, stderr.String())
	}
	truth, err := groundtruth.ReadTruth(truthPath)
	if err != nil {
		t.Fatal(err)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	pids := map[int64]int{}
	times := map[int64]int64{}
	for _, w := range rcv.windows {
		pid, _ := w.Resource[push.KeyPID].(int64)
		pids[pid]++
		if pid != int64(work.Process.Pid) {
			continue
		}
		for tid, byState := range w.Time {
			for _, v := range byState {
				times[tid] += v
			}
		}
	}
	if pids[int64(ag.Process.Pid)] > 0 {
		t.Errorf("the agent recorded itself (%d windows)", pids[int64(ag.Process.Pid)])
	}
	if len(pids) < 3 {
		t.Errorf("windows of %d processes arrived; want the machine's processes, not only the workload's", len(pids))
	}
	t.Logf("%d windows of %d processes; %d of the workload", len(rcv.windows), len(pids), pids[int64(work.Process.Pid)])
	for _, tt := range truth.Threads {
		got, want := time.Duration(times[int64(tt.TID)]), tt.Lifetime()
		diff := got - want
		t.Logf("thread %d %-12s wall %v, windows %v (%+.2f%%)", tt.TID, tt.Name, want, got, 100*float64(diff)/float64(want))
		if diff < 0 {
			diff = -diff
		}
		if float64(diff) > 0.02*float64(want) {
			t.Errorf("thread %d (%s): the windows add up to %v, the workload measured %v: off by more than 2%%", tt.TID, tt.Name, got, want)
		}
	}
}

// waitAgent waits for the agent, which stops once its processes exited,
// and logs what it said.
func waitAgent(t *testing.T, ag *exec.Cmd, stderr *bytes.Buffer, limit time.Duration) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- ag.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("wallprof agent: %v\n%s", err, stderr.String())
		}
	case <-time.After(limit):
		t.Fatalf("the agent did not stop after its process exited:\n%s", stderr.String())
	}
	t.Log(stderr.String())
}
