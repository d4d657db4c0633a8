package agent

import (
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/wallprof/wallprof/internal/profile"
	"github.com/wallprof/wallprof/internal/record"
)

// SystemWide is every user process of the machine (not kernel threads,
// not the agent itself), recorded by one system-wide recording
// (record.StartAll) that all the processes' recorders share: the BPF
// programs are loaded once, each period is one bucket of it, and each
// process's window is its part of that bucket (Recording.WindowOf).
type SystemWide struct {
	o      record.Options
	period time.Duration
	// Proc is the proc file system ("/proc" if empty).
	Proc string

	mu     sync.Mutex
	rec    *record.Recording
	users  int
	ticked time.Time
	err    error
}

// NewSystemWide records with o (Options.Live is set to 1), closing a
// bucket at most once per period whichever process's recorder asks.
func NewSystemWide(o record.Options, period time.Duration) *SystemWide {
	o = agentOptions(o)
	return &SystemWide{o: o, period: period}
}

// Fixed implements Resolver: processes come and go.
func (s *SystemWide) Fixed() bool { return false }

// Resolve implements Resolver: the processes that run a program (kernel
// threads have no executable), but the agent.
func (s *SystemWide) Resolve() ([]int, error) {
	proc := s.Proc
	if proc == "" {
		proc = "/proc"
	}
	ents, err := os.ReadDir(proc)
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		if _, err := os.Readlink(proc + "/" + e.Name() + "/exe"); err != nil {
			continue // a kernel thread, or gone
		}
		out = append(out, pid)
	}
	return out, nil
}

// Start implements StartFunc: a recorder of pid's part of the shared
// recording, which starts with the first one.
func (s *SystemWide) Start(pid int) (Recorder, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rec == nil {
		rec, err := record.StartAll(s.o)
		if err != nil {
			return nil, err
		}
		s.rec, s.ticked = rec, time.Now()
	}
	s.users++
	return &sharedRecorder{s: s, pid: pid}, nil
}

// tick closes the shared recording's bucket, once per period: the first
// process's recorder to ask does it, the others share it.
func (s *SystemWide) tick() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rec == nil {
		return nil
	}
	if time.Since(s.ticked) < s.period/2 {
		return s.err
	}
	s.ticked = time.Now()
	s.err = s.rec.Tick()
	return s.err
}

func (s *SystemWide) window(pid int) *profile.Profile {
	s.mu.Lock()
	rec := s.rec
	s.mu.Unlock()
	if rec == nil {
		return nil
	}
	return rec.WindowOf(1, pid)
}

func (s *SystemWide) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.users--; s.users == 0 && s.rec != nil {
		s.rec.Close()
		s.rec = nil
	}
}

// sharedRecorder is one process's view of a SystemWide recording.
type sharedRecorder struct {
	s      *SystemWide
	pid    int
	closed bool
}

func (r *sharedRecorder) Tick() error                   { return r.s.tick() }
func (r *sharedRecorder) Window(n int) *profile.Profile { return r.s.window(r.pid) }
func (r *sharedRecorder) Close() {
	if !r.closed {
		r.closed = true
		r.s.release()
	}
}
