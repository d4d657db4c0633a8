package agent

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/wallprof/wallprof/internal/agent/push"
	"github.com/wallprof/wallprof/internal/collect"
	"github.com/wallprof/wallprof/internal/profile"
	"github.com/wallprof/wallprof/internal/record"
)

func req(i int, size int) push.Request {
	return push.Request{Path: push.OTLPPath, ContentType: push.OTLPContentType,
		Body: append([]byte(fmt.Sprintf("%06d", i)), make([]byte, size)...)}
}

func drainSpool(t *testing.T, s *Spool) []string {
	t.Helper()
	var out []string
	for {
		id, r, ok := s.Next()
		if !ok {
			return out
		}
		out = append(out, string(r.Body[:6]))
		s.Done(id)
	}
}

// The spool is bounded: the oldest requests are dropped and counted, never
// the one in flight; on disk, what is left is replayed once by the next
// spool opened on the directory.
func TestAgentSpool(t *testing.T) {
	for _, dir := range []string{"", t.TempDir()} {
		s, err := OpenSpool(dir, 10_000)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if n, err := s.Add(req(i, 1000)); err != nil || n != 0 {
				t.Fatalf("Add %d: %d dropped, %v", i, n, err)
			}
		}
		id, _, _ := s.Next() // request 0 is being sent
		dropped := 0
		for i := 5; i < 12; i++ {
			n, err := s.Add(req(i, 1000))
			if err != nil {
				t.Fatal(err)
			}
			dropped += n
		}
		if s.Bytes() > 10_000 {
			t.Errorf("spool holds %d bytes, bound 10000", s.Bytes())
		}
		if uint64(dropped) != s.Dropped() || dropped == 0 {
			t.Errorf("dropped %d, counted %d", dropped, s.Dropped())
		}
		s.Release(id)
		got := drainSpool(t, s)
		if got[0] != "000000" {
			t.Errorf("the request in flight was dropped: %v", got)
		}
		if got[len(got)-1] != "000011" || len(got)+dropped != 12 {
			t.Errorf("left %v after dropping %d", got, dropped)
		}
		if n, _ := s.Add(req(99, 20_000)); n != 1 {
			t.Errorf("a request larger than the bound: %d dropped, want itself", n)
		}
		if dir == "" {
			continue
		}
		// Replay: what is not sent is sent by the next agent, once.
		for i := range 3 {
			s.Add(req(20+i, 100))
		}
		id, _, _ = s.Next()
		s.Done(id) // 20 was sent
		os.WriteFile(filepath.Join(dir, ".7.123.tmp"), []byte("half"), 0o600)
		s2, err := OpenSpool(dir, 10_000)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(drainSpool(t, s2), ","); got != "000021,000022" {
			t.Errorf("replayed %s, want 000021,000022", got)
		}
		s3, _ := OpenSpool(dir, 10_000)
		if s3.Len() != 0 {
			t.Errorf("%d requests replayed twice", s3.Len())
		}
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			t.Errorf("files left: %v", ents)
		}
	}
}

func TestAgentCheckFile(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "agent.yaml")
	os.WriteFile(f, []byte("otlp: http://127.0.0.1:4318\nprocesses: [api]\nperiod: 5s\nmetrics: \"off\"\n"), 0o600)
	c, err := LoadConfig(f)
	if err != nil {
		t.Fatal(err)
	}
	if c.OTLP != "http://127.0.0.1:4318" || c.Processes[0] != "api" || c.Period != 5*time.Second || *c.Metrics != "off" {
		t.Errorf("config %+v", c)
	}
	os.Chmod(f, 0o646)
	if _, err := LoadConfig(f); err == nil || !strings.Contains(err.Error(), "writable by every user") {
		t.Errorf("world-writable config: %v", err)
	}
	os.Chmod(f, 0o644)
	if err := CheckFile(f, false); err != nil {
		t.Errorf("a world-readable config: %v", err)
	}
	if _, err := ReadSecret(f); err == nil || !strings.Contains(err.Error(), "readable by every user") {
		t.Errorf("world-readable secret: %v", err)
	}
	if os.Geteuid() == 0 {
		os.Chown(f, 12345, 12345)
		if _, err := LoadConfig(f); err == nil || !strings.Contains(err.Error(), "owned by user 12345") {
			t.Errorf("config owned by another user: %v", err)
		}
	}
	os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("otlp: x\nunknown_key: 1\n"), 0o600)
	if _, err := LoadConfig(filepath.Join(dir, "bad.yaml")); err == nil {
		t.Error("an unknown key was accepted")
	}
}

func TestAgentParseCgroup(t *testing.T) {
	id := strings.Repeat("0123456789abcdef", 4)
	for _, tc := range []struct{ in, path, id string }{
		{"0::/system.slice/docker-" + id + ".scope\n", "/system.slice/docker-" + id + ".scope", id},
		{"0::/kubepods.slice/kubepods-pod1.slice/cri-containerd-" + id + ".scope\n", "/kubepods.slice/kubepods-pod1.slice/cri-containerd-" + id + ".scope", id},
		{"12:memory:/docker/" + id + "\n0::/\n", "/", ""},
		{"0::/user.slice/user-0.slice/session-3.scope\n", "/user.slice/user-0.slice/session-3.scope", ""},
	} {
		p, i := parseCgroup(tc.in)
		if p != tc.path || i != tc.id {
			t.Errorf("%q: %q %q, want %q %q", tc.in, p, i, tc.path, tc.id)
		}
	}
}

// fakeRec is a recording whose every window holds one thread's second.
type fakeRec struct {
	mu    sync.Mutex
	ticks int
}

func (f *fakeRec) Tick() error { f.mu.Lock(); f.ticks++; f.mu.Unlock(); return nil }
func (f *fakeRec) Close()      {}
func (f *fakeRec) Window(int) *profile.Profile {
	loc := &profile.Location{ID: 1, Frames: []profile.Frame{{Function: "main"}}}
	return &profile.Profile{Duration: time.Second, Period: 1e7, Locs: []*profile.Location{loc},
		Samples: []*profile.Sample{{Stack: []*profile.Location{loc}, PID: os.Getpid(), TID: 1, Thread: "t", Value: 1e9}},
		Threads: []*profile.Thread{{PID: os.Getpid(), TID: 1, Time: [profile.NumStates]time.Duration{time.Second}}}}
}

type fixedTargets []int

func (f fixedTargets) Resolve() ([]int, error) { return f, nil }
func (f fixedTargets) Fixed() bool             { return true }

// The loop against a receiver that fails for a while: every window
// arrives once, in order; the retries and the spool are counted; SIGTERM
// (ctx) pushes the last window; the token never reaches the log.
func TestAgentRunThroughOutage(t *testing.T) {
	var mu sync.Mutex
	var seqs []int64
	var down atomic.Bool
	var auth atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		if down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		b, _ := io.ReadAll(r.Body)
		d, err := push.DecodeOTLP(b)
		if err != nil {
			t.Error(err)
			return
		}
		ws, err := push.ReadOTLP(d)
		if err != nil || len(ws) != 1 {
			t.Errorf("%d windows, %v", len(ws), err)
			return
		}
		mu.Lock()
		seqs = append(seqs, ws[0].Seq)
		mu.Unlock()
	}))
	defer srv.Close()
	ep, _ := push.NewEndpoint("otlp", srv.URL, "", push.Auth{Token: "super-secret-token"}, time.Second)
	sp, _ := OpenSpool(t.TempDir(), 1<<20)
	var logs bytes.Buffer
	var logMu sync.Mutex
	m := NewMetrics()
	ctx, cancel := context.WithCancel(context.Background())
	c := Config{Targets: fixedTargets{os.Getpid()}, Start: func(int) (Recorder, error) { return &fakeRec{}, nil },
		Period: 100 * time.Millisecond, Host: "h", Sinks: []Sink{{Endpoint: ep, Spool: sp}},
		Backoff: push.Backoff{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond}, FlushTimeout: 5 * time.Second,
		Metrics: m, Log: log.New(lockedWriter{&logMu, &logs}, "", 0)}
	go func() {
		time.Sleep(250 * time.Millisecond)
		down.Store(true)
		time.Sleep(500 * time.Millisecond)
		down.Store(false)
		time.Sleep(400 * time.Millisecond)
		cancel()
	}()
	if err := Run(ctx, c); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seqs) < 8 {
		t.Fatalf("%d windows arrived: %v", len(seqs), seqs)
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("windows arrived as %v, want 1..%d once each", seqs, len(seqs))
		}
	}
	if n := testutil.ToFloat64(m.Windows); int(n) != len(seqs) {
		t.Errorf("%v windows made, %d arrived", n, len(seqs))
	}
	if testutil.ToFloat64(m.Retries.WithLabelValues("otlp")) == 0 || testutil.ToFloat64(m.Spooled.WithLabelValues("otlp")) == 0 {
		t.Error("no retry or spooled profile counted")
	}
	if n := testutil.ToFloat64(m.Pushed.WithLabelValues("otlp")); int(n) != len(seqs) {
		t.Errorf("pushed counts %v, %d arrived", n, len(seqs))
	}
	if a, _ := auth.Load().(string); a != "Bearer super-secret-token" {
		t.Errorf("Authorization %q", a)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if strings.Contains(logs.String(), "super-secret") || !strings.Contains(logs.String(), "503") {
		t.Errorf("log:\n%s", logs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// TestSystemWideForgetsExited: the system-wide recording forgets the
// processes that exited (record.Options.ForgetExited): without it, a
// day's recording of a machine holds every process that ever ran, with
// its files and root directory open (185 after three minutes of a build).
func TestSystemWideForgetsExited(t *testing.T) {
	s := NewSystemWide(record.Options{}, time.Second)
	if !s.o.ForgetExited || s.o.Live != 1 {
		t.Errorf("system-wide options %+v: want one live bucket and ForgetExited", s.o)
	}
	var p collect.Plan
	s.o.Plan(&p)
	if p.RingBytes != AgentRingBytes {
		t.Errorf("ring of %d bytes, want the agent's %d", p.RingBytes, AgentRingBytes)
	}
}

// An agent given PIDs none of which runs says which: those Resolve leaves
// out (not running) and those that exit as they are attached.
func TestAgentRunNoTargetRunning(t *testing.T) {
	proc := t.TempDir() // no process in it
	for _, c := range []struct {
		targets Resolver
		start   func(int) (Recorder, error)
		want    string
	}{
		{Selector{PIDs: []int{999999}, Proc: proc}, nil, "no process with PID 999999 is running"},
		{Selector{PIDs: []int{999999, 999998}, Proc: proc}, nil, "none of the processes with PIDs 999999, 999998 is running"},
		{fixedTargets{41, 42}, func(int) (Recorder, error) { return nil, record.ErrExited }, "none of the processes with PIDs 41, 42 is running"},
	} {
		cfg := Config{Targets: c.targets, Start: c.start, Period: time.Second, FlushTimeout: time.Second,
			Metrics: NewMetrics(), Log: log.New(io.Discard, "", 0)}
		err := Run(context.Background(), cfg)
		if err == nil || err.Error() != c.want {
			t.Errorf("%v: %v, want %q", c.targets, err, c.want)
		}
	}
}
