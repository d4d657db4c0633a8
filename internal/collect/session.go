package collect

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/wallprof/wallprof/internal/collect/bpf"
	"github.com/wallprof/wallprof/internal/linux"
	"github.com/wallprof/wallprof/internal/profile"
)

// Names of the loss counters, indexed as the BPF program's LOST_* values.
var lostNames = []string{
	"ringbuf-full",
	"kernel-stack-failed",
	"user-stack-failed",
	"stack-snapshot-failed",
	"thread-table-full",
	"offcpu-sample-overwritten",
	"thread-exit-dropped",
}

// Session is one live recording. It is not safe for concurrent use, except
// that Counts may be called while Run is running.
type Session struct {
	plan    Plan
	objs    bpf.WallprofObjects
	links   []link.Link
	perfFDs []int
	reader  *ringbuf.Reader
	stats   io.Closer

	startNs   uint64
	wallStart time.Time
	cpuStart  time.Duration

	done     chan struct{}
	finished chan struct{}
	sink     func(*RawSample)

	mu          sync.Mutex
	finals      []*RawSample
	exits       map[uint32]*ThreadExit
	samples     atomic.Uint64
	decodeErrs  atomic.Uint64
	firstDecErr error
}

// Open loads and attaches the BPF program. Recording starts now; add the
// processes to record with AddTarget.
func Open(plan Plan) (*Session, error) {
	if err := plan.Validate(); err != nil {
		return nil, err
	}
	spec, err := bpf.LoadWallprof()
	if err != nil {
		return nil, fmt.Errorf("load BPF object: %w", err)
	}
	s := &Session{
		plan:     plan,
		done:     make(chan struct{}),
		finished: make(chan struct{}),
		exits:    map[uint32]*ThreadExit{},
	}
	s.startNs = linux.Monotonic()
	s.wallStart = time.Now()
	s.cpuStart = linux.CPUTime()
	consts := map[string]any{
		"start_ns":     s.startNs,
		"period_ns":    plan.PeriodNs(),
		"follow_forks": boolByte(plan.FollowForks),
	}
	for name, v := range consts {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("configure BPF program (%s): %w", name, err)
		}
	}
	if st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME)); err == nil {
		s.stats = st // closing it restores the previous setting
	}
	if err := spec.LoadAndAssign(&s.objs, nil); err != nil {
		s.Close()
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return nil, fmt.Errorf("the kernel's BPF verifier rejected wallprof's program: %v", verr)
		}
		return nil, fmt.Errorf("load BPF program: %w", err)
	}
	if err := s.attach(); err != nil {
		s.Close()
		return nil, err
	}
	rd, err := ringbuf.NewReader(s.objs.Events)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("open BPF ring buffer: %w", err)
	}
	s.reader = rd
	return s, nil
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

func (s *Session) attach() error {
	for _, p := range []*ebpf.Program{s.objs.OnSwitch, s.objs.OnWakeup, s.objs.OnWakeupNew, s.objs.OnFork} {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			return fmt.Errorf("attach scheduler tracepoint %s: %w", p, err)
		}
		s.links = append(s.links, l)
	}
	sym, err := linux.FindKernelSymbol("finish_task_switch")
	if err != nil {
		return err
	}
	kp, err := link.Kprobe(sym, s.objs.OnSwitchIn, nil)
	if err != nil {
		return fmt.Errorf("attach kprobe %s: %w", sym, err)
	}
	s.links = append(s.links, kp)
	cpus, err := linux.OnlineCPUs()
	if err != nil {
		return err
	}
	for _, cpu := range cpus {
		fd, err := linux.OpenCPUClock(cpu, s.plan.PeriodNs())
		if err != nil {
			return err
		}
		s.perfFDs = append(s.perfFDs, fd)
		if err := linux.AttachPerfBPF(fd, s.objs.OnCpuSample.FD()); err != nil {
			return err
		}
	}
	return nil
}

// StartNs is the recording's start on CLOCK_MONOTONIC.
func (s *Session) StartNs() uint64 { return s.startNs }

// AddTarget starts recording process pid. Its existing threads are entered in
// the thread table from /proc; firstNs is when they are taken to have started
// (the recording's start for a process that was already running).
func (s *Session) AddTarget(pid int, firstNs uint64) error {
	one := uint8(1)
	if err := s.objs.Targets.Update(uint32(pid), one, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("add target %d: %w", pid, err)
	}
	tasks, err := linux.ListTasks(pid)
	if err != nil {
		return err
	}
	for _, t := range tasks {
		st := bpf.WallprofTstate{FirstTs: firstNs, Pid: uint32(pid)}
		switch t.State {
		case 'R':
			st.OnCpu, st.InTs = 1, firstNs
		case 'S':
			st.OutState, st.OutTs = uint8(profile.Sleeping), firstNs
		case 'D':
			st.OutState, st.OutTs = uint8(profile.Disk), firstNs
		default:
			st.OutState, st.OutTs = uint8(profile.Other), firstNs
		}
		err := s.objs.Threads.Update(uint32(t.TID), &st, ebpf.UpdateNoExist)
		if err != nil && !errors.Is(err, ebpf.ErrKeyExist) {
			return fmt.Errorf("enter thread %d: %w", t.TID, err)
		}
	}
	return nil
}

// Run reads samples until Stop is called, passing each to sink. Samples
// taken at the end of the recording are held back until Stop has computed
// their weights.
func (s *Session) Run(sink func(*RawSample)) {
	s.sink = sink
	defer close(s.finished)
	var rec ringbuf.Record
	for {
		s.reader.SetDeadline(time.Now().Add(100 * time.Millisecond))
		err := s.reader.ReadInto(&rec)
		switch {
		case errors.Is(err, os.ErrDeadlineExceeded):
			select {
			case <-s.done:
				return
			default:
				continue
			}
		case errors.Is(err, ringbuf.ErrClosed):
			return
		case err != nil:
			s.decodeError(err)
			continue
		}
		ev, err := Decode(rec.RawSample)
		if err != nil {
			s.decodeError(err)
			continue
		}
		switch ev := ev.(type) {
		case *RawSample:
			s.samples.Add(1)
			if ev.Final {
				s.mu.Lock()
				s.finals = append(s.finals, ev)
				s.mu.Unlock()
			} else {
				sink(ev)
			}
		case *ThreadExit:
			s.mu.Lock()
			s.exits[ev.TID] = ev
			s.mu.Unlock()
		}
	}
}

func (s *Session) decodeError(err error) {
	if s.decodeErrs.Add(1) == 1 {
		s.mu.Lock()
		s.firstDecErr = err
		s.mu.Unlock()
	}
}

// Counts reports the samples read and events lost so far (for a status line).
func (s *Session) Counts() (samples, lost uint64) {
	for _, n := range s.lostCounts() {
		lost += n
	}
	return s.samples.Load(), lost + s.decodeErrs.Load()
}

func (s *Session) lostCounts() map[string]uint64 {
	out := map[string]uint64{}
	if s.objs.Lost == nil {
		return out
	}
	for i, name := range lostNames {
		var per []uint64
		if err := s.objs.Lost.Lookup(uint32(i), &per); err != nil {
			continue
		}
		for _, v := range per {
			out[name] += v
		}
	}
	return out
}
