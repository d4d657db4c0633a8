// Package agent is continuous profiling: it records chosen processes
// through internal/record, one live recording per process, and every
// period closes a window (Recording.Tick, then Window(1)) and pushes each
// process's window to the configured stores (internal/agent/push).
//
// Contract:
//   - one profile per process per window, numbered from 1 per recording
//     (push.Meta.Seq), with the window's wall-clock bounds; a recording
//     starts when its process appears (Resolver) and ends, after a last
//     window, when it goes;
//   - nothing is lost silently and nothing is unbounded: each sink's
//     requests wait in a Spool (on disk with a directory) bounded in
//     bytes, oldest dropped and counted when full; failed pushes are
//     retried with exponential backoff and jitter; requests an endpoint
//     refuses (4xx other than 408 and 429) are dropped and counted;
//   - Run returns when ctx ends (SIGTERM): the current window is closed
//     and pushed or spooled, the spools are flushed for up to
//     FlushTimeout, and what is still unsent stays in the spool directory
//     for the next start;
//   - secrets (tokens, passwords) never reach the log.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wallprof/wallprof/internal/agent/push"
	"github.com/wallprof/wallprof/internal/collect"
	"github.com/wallprof/wallprof/internal/profile"
	"github.com/wallprof/wallprof/internal/record"
)

// Recorder is what the agent needs of a record.Recording.
type Recorder interface {
	Tick() error
	Window(n int) *profile.Profile
	Close()
}

// StartFunc starts a live recording of pid (record.Start with
// Options.Live = 1 by default).
type StartFunc func(pid int) (Recorder, error)

// RecordStart starts recordings with record.Start and options o, with one
// live bucket kept (Options.Live = 1): each window is one bucket.
func RecordStart(o record.Options) StartFunc {
	o = agentOptions(o)
	return func(pid int) (Recorder, error) {
		r, err := record.Start(pid, o)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
}

// AgentRingBytes is the agent's ring buffer (collect.Plan.RingBytes): half
// of record's, as the agent's memory counts on every host (the ring is
// mapped twice: 4 MB of resident memory rather than 8); its reader is
// woken at 512 KiB, several hundred samples.
const AgentRingBytes = 2 << 20

// agentOptions are the recording options of the agent: one live bucket (a
// window), processes forgotten once they exited, a smaller ring.
func agentOptions(o record.Options) record.Options {
	o.Live, o.ForgetExited = 1, true
	plan := o.Plan
	o.Plan = func(p *collect.Plan) {
		p.RingBytes = AgentRingBytes
		if plan != nil {
			plan(p)
		}
	}
	return o
}

// Sink is one store to push to.
type Sink struct {
	Endpoint *push.Endpoint
	Spool    *Spool
}

// Config is what the agent does.
type Config struct {
	Targets Resolver
	Start   StartFunc
	Period  time.Duration
	Host    string
	// Service names the processes (default: each process's name).
	Service      string
	Sinks        []Sink
	Limits       push.Limits // Pyroscope's
	Backoff      push.Backoff
	FlushTimeout time.Duration
	Metrics      *Metrics
	Log          *log.Logger
}

// proc is one process being recorded.
type proc struct {
	rec  Recorder
	meta push.Meta
	last time.Time // the end of its previous window
}

// Run records and pushes until ctx ends, or until the processes of a
// Fixed resolver are all gone. It returns an error only when nothing can
// be recorded at all.
func Run(ctx context.Context, c Config) error {
	if c.Metrics == nil {
		c.Metrics = NewMetrics()
	}
	if c.Log == nil {
		c.Log = log.New(discard{}, "", 0)
	}
	if c.Period <= 0 {
		c.Period = 10 * time.Second
	}
	if c.FlushTimeout <= 0 {
		c.FlushTimeout = 10 * time.Second
	}
	if c.Backoff.Initial <= 0 {
		c.Backoff = push.Backoff{Initial: 500 * time.Millisecond, Max: 30 * time.Second}
	}
	sendCtx, cancelSend := context.WithCancel(context.Background())
	defer cancelSend()
	var wg sync.WaitGroup
	senders := make([]*sender, len(c.Sinks))
	for i, s := range c.Sinks {
		senders[i] = &sender{Sink: s, c: &c, wake: make(chan struct{}, 1), drain: make(chan struct{})}
		wg.Add(1)
		go func() { defer wg.Done(); senders[i].run(sendCtx) }()
	}
	procs := map[int]*proc{}
	err := c.record(ctx, procs, senders)
	for _, s := range senders {
		close(s.drain)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(c.FlushTimeout):
		cancelSend()
		<-done
	}
	for _, s := range senders {
		if n := s.Spool.Len(); n > 0 {
			if s.Spool.dir != "" {
				c.Log.Printf("%s: %d profiles not sent yet stay in %s, to be sent at the next start", s.Endpoint, n, s.Spool.dir)
			} else {
				c.Metrics.Dropped.WithLabelValues(s.Endpoint.Kind, "shutdown").Add(float64(n))
				c.Log.Printf("%s: %d profiles could not be sent before the agent stopped (no --spool directory)", s.Endpoint, n)
			}
		}
	}
	return err
}

// record is the recording loop.
func (c *Config) record(ctx context.Context, procs map[int]*proc, senders []*sender) error {
	defer func() {
		for _, p := range procs {
			p.rec.Close()
		}
		c.Metrics.Recordings.Set(0)
	}()
	gone, err := c.resolve(procs)
	if err != nil {
		return err
	}
	if len(procs) == 0 && c.Targets.Fixed() {
		// Fixed targets are PIDs: those not running are left out by
		// Resolve, those that exited as they were attached by resolve.
		switch t := c.Targets.(type) {
		case Selector:
			gone = t.PIDs
		case *Selector:
			gone = t.PIDs
		}
		return notRunning(gone)
	}
	tick := time.NewTicker(c.Period)
	defer tick.Stop()
	for {
		final := false
		select {
		case <-ctx.Done():
			final = true
		case <-tick.C:
		}
		for pid, p := range procs {
			c.window(p, senders)
			if final || !alive(pid) {
				p.rec.Close()
				delete(procs, pid)
				if !final && c.chatty() {
					c.Log.Printf("process %d (%s) is gone: its recording ended after %d windows", pid, p.meta.Comm, p.meta.Seq)
				}
			}
		}
		c.Metrics.Recordings.Set(float64(len(procs)))
		if final {
			return nil
		}
		if _, err := c.resolve(procs); err != nil {
			c.Log.Printf("cannot list the processes to record: %v", err)
		}
		if len(procs) == 0 && c.Targets.Fixed() {
			c.Log.Printf("every process given is gone: stopping")
			return nil
		}
	}
}

// resolve starts recording the processes that appeared.
func (c *Config) resolve(procs map[int]*proc) (gone []int, err error) {
	pids, err := c.Targets.Resolve()
	if err != nil {
		return nil, err
	}
	for _, pid := range pids {
		if _, ok := procs[pid]; ok {
			continue
		}
		meta := describe(pid, c.Host, c.Service)
		rec, err := c.Start(pid)
		if err != nil {
			c.Metrics.RecordErrs.Inc()
			if errors.Is(err, record.ErrExited) {
				gone = append(gone, pid)
				continue
			}
			if c.Targets.Fixed() {
				return gone, fmt.Errorf("process %d: %w", pid, err)
			}
			c.Log.Printf("cannot record process %d (%s): %v", pid, meta.Comm, err)
			continue
		}
		meta.Started = time.Now()
		procs[pid] = &proc{rec: rec, meta: meta, last: meta.Started}
		if c.chatty() {
			c.Log.Printf("recording process %d (%s)", pid, meta.Comm)
		}
	}
	c.Metrics.Recordings.Set(float64(len(procs)))
	return gone, nil
}

// notRunning is the error of an agent given processes of which none is
// running (they exited, or never were).
func notRunning(pids []int) error {
	switch len(pids) {
	case 0:
		return errors.New("none of the processes could be recorded")
	case 1:
		return fmt.Errorf("no process with PID %d is running", pids[0])
	}
	s := make([]string, len(pids))
	for i, p := range pids {
		s[i] = strconv.Itoa(p)
	}
	return fmt.Errorf("none of the processes with PIDs %s is running", strings.Join(s, ", "))
}

// chatty says whether each process's start and end are logged: not
// system-wide, where every command anyone runs is one (the count is the
// recordings metric).
func (c *Config) chatty() bool {
	_, all := c.Targets.(*SystemWide)
	return !all
}

// window closes p's window and queues it for every sink.
func (c *Config) window(p *proc, senders []*sender) {
	if err := p.rec.Tick(); err != nil {
		c.Metrics.RecordErrs.Inc()
		c.Log.Printf("process %d: %v", p.meta.PID, err)
		return
	}
	now := time.Now()
	prof := p.rec.Window(1)
	if prof == nil {
		return
	}
	p.meta.Seq++
	w := &push.Window{Meta: p.meta, Profile: prof}
	w.Meta.Start, w.Meta.End = p.last, now
	p.last = now
	c.Metrics.Windows.Inc()
	for _, s := range senders {
		s.add(w)
	}
}

// alive reports whether pid still runs.
var alive = func(pid int) bool { return processExists(pid) }

type discard struct{}

func (discard) Write(b []byte) (int, error) { return len(b), nil }
