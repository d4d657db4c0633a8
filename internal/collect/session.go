package collect

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

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
	"", // a due off-CPU sample deferred to a later switch-in: not a loss
	"thread-exit-dropped",
	"preempted-stack-failed",
	"unreported-switch-in",
	"unreported-switch-out",
	"", // recoveredSwitchIn: not a loss (see Result.RecoveredSwitchIns)
	"sample-buffer-busy",
	"stale-thread-record",
	"", // droppedOffCPU: not a loss (see Result.DroppedOffCPU)
	"thread-exit-path-dropped",
}

// recoveredSwitchIn is the counter of switch-ins that the kernel did not
// report and sched_exit_tp took, exactly, in the thread's own context.
const recoveredSwitchIn = 10

// droppedOffCPU is the counter of off-CPU samples that came due beyond the
// CPU's budget (Plan.OffCPURate) and were not taken.
const droppedOffCPU = 13

// Session is one live recording. It is not safe for concurrent use, except
// that Counts may be called while Run is running.
type Session struct {
	plan    Plan
	spec    *ebpf.CollectionSpec
	objs    objects
	links   []link.Link
	perfFDs []int
	reader  *ringbuf.Reader
	// ringWait parks Run between reads in the runtime's poller, nil: Run
	// waits in the reader's epoll_wait.
	ringWait *ringWait
	stats    statsSwitch
	unwind   *unwindTables // nil with Plan.FramePointersOnly

	startNs   uint64
	wallStart time.Time
	poll      atomic.Int64 // ring-buffer read interval (time.Duration)
	onExec    func(pid uint32)
	onFold    func(pid, tid, into uint32)
	resume    bool          // accounting at each thread's resumption (Attachment.Resume)
	walk      *walker       // accounting by walking the threads (Attachment.Walk), nil otherwise
	cpuOpen   time.Duration // CPU time when Open began
	cpuStart  time.Duration // CPU time when recording began (probes attached)

	done     chan struct{}
	finished chan struct{}
	sink     func(*RawSample)

	mu     sync.Mutex
	finals []*RawSample
	// drainWaiters are the callers of Drain waiting for Run to read what
	// was pending.
	names        map[uint32]string // thread names Peek read, by thread id
	drainMu      sync.Mutex
	drainWaiters []chan struct{}
	exits        exitTable
	samples      atomic.Uint64
	decodeErrs   atomic.Uint64
	firstDecErr  error
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
		spec:     spec,
		plan:     plan,
		done:     make(chan struct{}),
		finished: make(chan struct{}),
		exits:    newExitTable(MaxExitRecords),
	}
	s.cpuOpen = linux.CPUTime()
	if err := s.load(); err != nil {
		s.Close()
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return nil, fmt.Errorf("the kernel's BPF verifier rejected wallprof's program: %v", verr)
		}
		return nil, fmt.Errorf("load BPF program: %w", err)
	}
	// A plan that walks loads the walker now (before the recording
	// starts: the time is not the recording's); if the kernel refuses it,
	// it will not walk, and gets the end-of-recording iterator instead.
	if s.plan.mayWalk() {
		if err := s.loadEnd(true); err != nil {
			if err := s.loadEnd(false); err != nil {
				s.Close()
				return nil, fmt.Errorf("load BPF program: %w", err)
			}
		}
	} else {
		// The programs its accounting attaches, now too; if the kernel
		// refuses them, attach falls back or says why.
		_, _ = s.ensure(s.plan.Attachment(s.features()).Tracing)
	}
	// The targets are known before any probe is attached, so that every
	// thread they create from now on is seen being created.
	var set bpf.WallprofTgidSet
	for i, pid := range plan.PIDs {
		if err := s.objs.core.Targets.Update(uint32(pid), uint8(1), ebpf.UpdateAny); err != nil {
			s.Close()
			return nil, fmt.Errorf("add target %d: %w", pid, err)
		}
		if i < len(set.Tgid) {
			set.Tgid[i] = uint32(pid)
		}
	}
	// The same in an array that the programs scan rather than look the map
	// up for every task of the machine (more than fit: the map).
	set.N = uint32(min(len(plan.PIDs), len(set.Tgid)+1))
	if err := s.objs.core.Tgids.Update(uint32(0), &set, ebpf.UpdateAny); err != nil {
		s.Close()
		return nil, fmt.Errorf("add targets: %w", err)
	}
	// The recording starts now: threads that existed before are accounted
	// from here.
	s.startNs = linux.Monotonic()
	s.wallStart = time.Now()
	if err := s.objs.core.StartNs.Set(s.startNs); err != nil {
		s.Close()
		return nil, fmt.Errorf("configure BPF program (start_ns): %w", err)
	}
	// The statistics cover the same time as the recording, attaching
	// included: the share of it they were on is what scales their totals.
	if plan.Stats != StatsOff {
		s.stats.start(plan.Stats)
	}
	if err := s.attach(); err != nil {
		s.Close()
		return nil, err
	}
	rd, err := ringbuf.NewReader(s.objs.core.Events)
	if err != nil {
		s.Close()
		return nil, fmt.Errorf("open BPF ring buffer: %w", err)
	}
	s.reader = rd
	s.ringWait = newRingWait(s.objs.core.Events)
	if !plan.FramePointersOnly {
		c := &s.objs.core
		s.unwind = newUnwindTables(c.UnwRows, c.UnwFiles, c.UnwProcs, c.UnwMaps, plan.unwindRows())
		go s.unwind.run()
	}
	s.poll.Store(int64(ReadInterval))
	s.cpuStart = linux.CPUTime()
	return s, nil
}

// load sets the program's constants and loads it into the kernel.
func (s *Session) load() error {
	consts := map[string]any{
		"period_ns":     s.plan.PeriodNs(),
		"off_period_ns": s.plan.OffCPUPeriodNs(),
		"off_cost_ns":   s.plan.OffCPUCostNs(),
		"follow_forks":  boolByte(s.plan.FollowForks),
		"all_targets":   boolByte(s.plan.All),
		"self_tgid":     uint32(os.Getpid()),
		"unwind_tables": boolByte(!s.plan.FramePointersOnly),
		"ring_wake":     uint64(s.plan.ringBytes() / 4),
		"bench_cut":     uint8(s.plan.BenchCut),
	}
	if ms, ok := s.spec.Maps["events"]; ok {
		ms.MaxEntries = s.plan.ringBytes()
	}
	if ms, ok := s.spec.Maps["unw_rows"]; ok {
		ms.MaxEntries = s.plan.unwindRows()
		if s.plan.FramePointersOnly {
			ms.MaxEntries = 1
		}
	}
	if ms, ok := s.spec.Maps["unw_maps"]; ok && s.plan.FramePointersOnly {
		ms.MaxEntries = 1
	}
	for name, v := range consts {
		spec, ok := s.spec.Variables[name]
		if !ok {
			return fmt.Errorf("configure BPF program: it has no variable %s (a build from mismatched sources?)", name)
		}
		if err := spec.Set(v); err != nil {
			return fmt.Errorf("configure BPF program (%s): %w", name, err)
		}
	}
	// The task iterator of the end of a recording is loaded with the core
	// unless the plan walks (loadEnd loads the walker's instead): the
	// verifier takes tens of milliseconds over each (they carry the
	// unwinder). The programs that only some accountings attach are
	// loaded when an attachment needs them (ensure): the verifier spends
	// 0.3-0.4 s of CPU on those a walk does not use.
	if s.plan.mayWalk() {
		return s.spec.LoadAndAssign(&s.objs.core, nil)
	}
	var o struct {
		coreObjects
		endObjects
	}
	err := s.spec.LoadAndAssign(&o, nil)
	s.objs.core, s.objs.dump = o.coreObjects, o.Dump
	return err
}

// lazyPrograms are the tracepoint programs that not every accounting
// attaches, loaded by ensure when one does.
var lazyPrograms = map[string]bool{
	progSwitch: true, progSysExit: true, progSchedExit: true, progResume: true, progTaskExit: true, progTaskFree: true,
}

// ensure loads those of names (programs an attachment needs) that are
// lazyPrograms not loaded yet, in one collection, and more along with
// them (the walker's, which are not lazyPrograms).
func (s *Session) ensure(names []string, more ...string) ([]*ebpf.Program, error) {
	var missing []string
	for _, n := range names {
		if lazyPrograms[n] && s.objs.tracing[n] == nil && !slices.Contains(missing, n) {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 && len(more) == 0 {
		return nil, nil
	}
	progs, err := s.loadOptionals(append(more, missing...)...)
	if err != nil {
		return nil, err
	}
	if s.objs.tracing == nil {
		s.objs.tracing = map[string]*ebpf.Program{}
	}
	for i, n := range missing {
		s.objs.tracing[n] = progs[len(more)+i]
	}
	return progs[:len(more)], nil
}

// endObjects is the task iterator that takes the stacks of threads still
// off CPU at the end of a recording that does not walk.
type endObjects struct {
	Dump *ebpf.Program `ebpf:"dump_offcpu"`
}

// loadEnd loads the task iterators of walk mode (walk), or the one that
// takes the stacks of threads still off CPU at the end (loaded with the
// core, unless the plan walks).
func (s *Session) loadEnd(walk bool) error {
	if walk {
		// With the tracepoint programs its attachment needs.
		a := s.plan.Attachment(s.features())
		progs, err := s.ensure(a.Tracing, progWalkStates, progWalkStacks)
		if err != nil {
			return fmt.Errorf("load thread walker: %w", err)
		}
		s.objs.walk = [2]*ebpf.Program{progs[0], progs[1]}
		// The first pass from a BPF timer, where the kernel loads it
		// (else from the walker's thread).
		if s.plan.WalkTimer {
			if progs, err := s.loadOptionals(progWalkTimerStart, progWalkTimerStop); err == nil {
				s.objs.walkTimer = [2]*ebpf.Program{progs[0], progs[1]}
			}
		}
		return nil
	}
	p, err := s.loadOptional(progDumpOffCPU)
	if err != nil {
		return fmt.Errorf("load task iterator: %w", err)
	}
	s.objs.dump = p
	return nil
}

// hasExitTP reports whether the kernel has the sched_exit_tp tracepoint
// (Linux 6.16+) that the walk and the resumption accounting need, from
// its BTF (which the programs are loaded against anyway).
func hasExitTP() bool {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return false
	}
	_, err = spec.AnyTypeByName("btf_trace_sched_exit_tp")
	return err == nil
}

// hasSchedstat reports whether the kernel keeps schedstat's run-queue wait
// (CONFIG_SCHED_INFO), which /proc/PID/schedstat shows.
func hasSchedstat() bool {
	_, err := os.Stat("/proc/self/schedstat")
	return err == nil
}

func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// attach carries out what the plan decides to attach on this kernel
// (Plan.Attachment), falling back as the decision says when a program the
// kernel loaded will not attach, then opens the on-CPU timer.
func (s *Session) attach() error {
	a := s.plan.Attachment(s.features())
	for {
		err := s.attachTable(a)
		if err == nil {
			if s.plan.FollowForks {
				s.attachExec()
			}
			return s.attachCPUClock()
		}
		if a.Fallback == nil {
			return err
		}
		s.detach()
		a = *a.Fallback
	}
}

// features probes what the kernel offers (Features).
func (s *Session) features() Features {
	return Features{
		ExitTP:    !s.plan.NoExitTP && hasExitTP(),
		Schedstat: hasSchedstat(),
		Kprobes:   linux.HasKprobes(),
	}
}

// program returns the loaded program of a C name (nil if not loaded).
func (s *Session) program(name string) *ebpf.Program {
	switch name {
	case progWakeup:
		return s.objs.core.OnWakeup
	case progWakeupNew:
		return s.objs.core.OnWakeupNew
	case progFork:
		return s.objs.core.OnFork
	}
	return s.objs.tracing[name]
}

// attachTable sets the program up for a and attaches its programs.
func (s *Session) attachTable(a Attachment) error {
	if err := s.objs.core.ResumeMode.Set(boolByte(a.Resume)); err != nil {
		return fmt.Errorf("configure BPF program (resume_mode): %w", err)
	}
	if err := s.objs.core.UseRd.Set(boolByte(a.UseRunDelay)); err != nil {
		return fmt.Errorf("configure BPF program (use_rd): %w", err)
	}
	if err := s.objs.core.WalkMode.Set(boolByte(a.Walk)); err != nil {
		return fmt.Errorf("configure BPF program (walk_mode): %w", err)
	}
	s.resume = a.Resume
	if !a.Walk && s.objs.dump == nil {
		// A walk was planned but will not attach: loaded now.
		if err := s.loadEnd(false); err != nil {
			return err
		}
	}
	if _, err := s.ensure(a.Tracing); err != nil {
		return fmt.Errorf("load scheduler tracepoint programs: %w", err)
	}
	if a.Walk {
		if s.objs.walk[0] == nil {
			return fmt.Errorf("attach thread walker: its programs were not loaded")
		}
		c := &s.objs.core
		objs := walkerObjects{states: s.objs.walk[0], stacks: s.objs.walk[1], pending: c.WalkPending, forks: c.TargetForks, threads: c.WalkThreads}
		if s.objs.walkTimer[0] != nil {
			objs.timer = &walkTimerObjects{start: s.objs.walkTimer[0], stop: s.objs.walkTimer[1], wake: c.WalkWake,
				procs: c.WalkProcs, every: c.WalkEveryNs, max: c.WalkMaxNs, full: c.WalkFull, gaps: c.WalkGaps, startErr: c.WalkStartErr, tickNs: c.WalkTickNs}
		}
		w, err := newWalker(objs, s.walkTgids(), c.Targets, time.Duration(s.plan.WalkPeriodNs()), time.Duration(s.plan.PeriodNs()))
		if err != nil {
			return err
		}
		s.walk = w
	}
	for _, name := range a.Tracing {
		p := s.program(name)
		if p == nil {
			return fmt.Errorf("attach scheduler tracepoint: program %s was not loaded", name)
		}
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			return fmt.Errorf("attach scheduler tracepoint %s: %w", p, err)
		}
		s.links = append(s.links, l)
	}
	if a.KprobeSwitchIn {
		s.attachSwitchIn()
	}
	return nil
}

// walkTgids is the map of target processes the walker visits one by one,
// nil when it visits every task (system-wide).
func (s *Session) walkTgids() *ebpf.Map {
	if s.plan.All {
		return nil
	}
	return s.objs.core.Tgids
}

// attachExec attaches on_exec, whose events have Run call the OnExec
// callback as soon as a target process has exec'ed (optional: without it,
// a process's mappings are read when its first samples are).
func (s *Session) attachExec() {
	p, err := s.loadOptional(progExec)
	if err != nil {
		return
	}
	l, err := link.AttachTracing(link.TracingOptions{Program: p})
	if err != nil {
		p.Close()
		return
	}
	s.links = append(s.links, l)
	s.objs.optional = append(s.objs.optional, p)
}

// OnFold sets the function Run calls, on its goroutine, when an exited
// thread's record is folded into its process's record of exited threads
// (past MaxExitRecords): the samples of thread tid of process pid are to
// be counted under thread into from then on.
func (s *Session) OnFold(f func(pid, tid, into uint32)) { s.onFold = f }

// Forget drops the records of the exited threads of the processes in pids,
// which have exited, once the views that take the time threads gained
// (Live) have taken their last: a long system-wide recording would
// otherwise hold a record for every thread that ever ran (up to
// MaxExitRecords, then one per process and name).
func (s *Session) Forget(pids map[uint32]bool) {
	if len(pids) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tid := range s.exits.forget(pids) {
		delete(s.names, tid)
	}
}

// OnExec sets the function Run calls, on its goroutine, with each target
// process that exec'ed a program (when following forks), before the
// program's samples are passed to the sink. Call it before Run.
func (s *Session) OnExec(f func(pid uint32)) { s.onExec = f }

// attachSwitchIn attaches on_switch_in to finish_task_switch where the
// kernel lets it (optional: without it, stacks wait for sys_exit).
func (s *Session) attachSwitchIn() {
	sym, err := linux.FindKernelSymbol("finish_task_switch")
	if err != nil {
		return
	}
	p, err := s.loadOptional(progSwitchIn)
	if err != nil {
		return
	}
	kp, err := link.Kprobe(sym, p, nil)
	if err != nil {
		p.Close()
		return
	}
	s.links = append(s.links, kp)
	s.objs.optional = append(s.objs.optional, p)
}

// attachCPUClock opens the on-CPU sampling timer on every CPU.
func (s *Session) attachCPUClock() error {
	cpus, err := linux.OnlineCPUs()
	if err != nil {
		return err
	}
	fds, err := linux.OpenCPUClocks(cpus, s.plan.PeriodNs(), s.objs.core.OnCpuSample.FD(), !s.plan.NoStagger)
	s.perfFDs = append(s.perfFDs, fds...)
	if err != nil {
		return err
	}
	return nil
}

// StartNs is the recording's start on CLOCK_MONOTONIC.
func (s *Session) StartNs() uint64 { return s.startNs }

// SeedThreads enters the threads that a target had when the recording
// started in the thread table, in the state /proc shows, so that a thread
// blocked for the whole recording is accounted too. Threads already entered
// by their own scheduler events are left alone.
func (s *Session) SeedThreads(pid int) error {
	tasks, err := linux.ListTasks(pid)
	if err != nil {
		return err
	}
	first := s.startNs
	for _, t := range tasks {
		st := bpf.WallprofTstate{FirstTs: first, Pid: uint32(pid)}
		if s.resume {
			// Resume mode: where its counters stand now, as at a
			// switch-in. A thread off CPU now has its block already
			// counted: one voluntary switch fewer, so that its next
			// resumption closes the interval as a block.
			c, err := linux.ReadTaskCounters(pid, t.TID)
			if err != nil {
				continue // exited meanwhile
			}
			st.OnCpu, st.InTs, st.Based = 1, first, 1
			st.LastExec, st.RdOut, st.Nvcsw, st.Nivcsw = c.ExecNs, c.RunDelayNs, c.Voluntary, c.Involunt
			if t.State != 'R' && st.Nvcsw > 0 {
				st.Nvcsw--
			}
		} else {
			switch t.State {
			case 'R':
				st.OnCpu, st.InTs = 1, first
			case 'S':
				st.OutState, st.OutTs = uint8(profile.Sleeping), first
			case 'D':
				st.OutState, st.OutTs = uint8(profile.Disk), first
			default:
				st.OutState, st.OutTs = uint8(profile.Other), first
			}
		}
		err := s.objs.core.Threads.Update(uint32(t.TID), &st, ebpf.UpdateNoExist)
		if err != nil && !errors.Is(err, ebpf.ErrKeyExist) {
			return fmt.Errorf("enter thread %d: %w", t.TID, err)
		}
	}
	return nil
}

// SeedAll seeds the threads of every process but wallprof's own, for a
// system-wide recording: a process that exits meanwhile is skipped.
func (s *Session) SeedAll() error {
	pids, err := linux.ListPIDs()
	if err != nil {
		return err
	}
	self := os.Getpid()
	for _, pid := range pids {
		if pid == self {
			continue
		}
		if err := s.SeedThreads(pid); err != nil && linux.ProcessExists(pid) {
			return err
		}
	}
	return nil
}

// ReadInterval is how often Run reads the ring buffer by default. The
// programs submit without waking the reader until the ring is a quarter full
// (Plan.RingBytes: a quarter of 4 MiB by default, over a thousand samples), and Stop flushes it, so this only bounds how
// long samples wait in the ring. Each wake-up of a Go program costs it tens
// of context switches (the runtime's sysmon polls every 20 µs for a
// millisecond after any activity), which a target sharing its CPU pays for:
// once a second rather than ten times cut wallprof's CPU while recording an
// unpinned ping-pong from ~1.5% of the target's to ~0.3%.
const ReadInterval = time.Second

// TrackUnwind loads the unwind tables of pid's files and keeps them
// current (exec, dlopen) while the recording runs; samples of pid taken
// before it returns are walked by frame pointer. It does nothing with
// Plan.FramePointersOnly.
func (s *Session) TrackUnwind(pid uint32, src UnwindSource) {
	if s.unwind != nil {
		s.unwind.track(pid, src)
	}
}

// TrackUnwindLater is TrackUnwind in the background, for the processes met
// while recording: it never blocks.
func (s *Session) TrackUnwindLater(pid uint32, src UnwindSource) {
	if s.unwind != nil {
		s.unwind.trackLater(pid, src)
	}
}

// UnwindStats says what the unwind tables held; false with
// Plan.FramePointersOnly.
func (s *Session) UnwindStats() (UnwindStats, bool) {
	if s.unwind == nil {
		return UnwindStats{}, false
	}
	return s.unwind.snapshot(), true
}

// SetReadInterval changes how often Run reads the ring buffer, from the next
// read on. A consumer that needs samples soon after they are taken (the
// goroutine view tags them with the goroutine its latest snapshot saw on the
// thread) asks for a shorter interval.
func (s *Session) SetReadInterval(d time.Duration) {
	s.poll.Store(int64(d))
	_ = s.wakeReader()
}

// Run reads samples until Stop is called, passing each to sink. Samples
// taken at the end of the recording are held back until Stop has computed
// their weights.
func (s *Session) Run(sink func(*RawSample)) {
	s.sink = sink
	defer close(s.finished)
	var rec ringbuf.Record
	wakeBytes := int(s.plan.ringBytes() / 4) // ring_wake
	full := func() bool { return s.reader.AvailableBytes() > wakeBytes }
	for {
		deadline := time.Now().Add(time.Duration(s.poll.Load()))
		if s.ringWait != nil {
			s.ringWait.wait(deadline, full)
			deadline = time.Now() // read what the ring holds, then wait again
		}
		// The callers of Drain so far: this read ends once the ring is
		// empty, after they called.
		waiters := s.takeDrainWaiters()
		s.reader.SetDeadline(deadline)
		for {
			err := s.reader.ReadInto(&rec)
			if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, ringbuf.ErrFlushed) {
				break
			}
			if errors.Is(err, ringbuf.ErrClosed) {
				s.drained(waiters)
				return
			}
			if err != nil {
				s.decodeError(err)
				continue
			}
			s.handle(rec.RawSample, sink)
		}
		s.drained(waiters)
		select {
		case <-s.done:
			return
		default:
		}
	}
}

// handle decodes one record of the ring and passes it on.
func (s *Session) handle(raw []byte, sink func(*RawSample)) {
	ev, err := Decode(raw)
	if err != nil {
		s.decodeError(err)
		return
	}
	switch ev := ev.(type) {
	case *RawSample:
		if !ev.Carry {
			s.samples.Add(1)
		}
		if s.unwind != nil && len(ev.User) > 0 && (ev.Unwind&UnwindDone == 0 || ev.Unwind&UnwindNoMap != 0) {
			s.unwind.nudge(ev.PID)
		}
		if ev.Final {
			s.mu.Lock()
			s.finals = append(s.finals, ev)
			s.mu.Unlock()
		} else {
			sink(ev)
		}
	case *ThreadExit:
		s.mu.Lock()
		into, folded := s.exits.add(ev, s.onFold != nil)
		s.mu.Unlock()
		if folded {
			s.onFold(ev.PID, ev.TID, into)
		}
	case *ThreadTail:
		s.mu.Lock()
		tid, ok := s.exits.addTail(ev)
		s.mu.Unlock()
		if ok {
			w := [profile.NumStates]uint64{}
			w[profile.OnCPU] = ev.Nanos
			sink(&RawSample{PID: ev.PID, TID: tid, Comm: ev.Comm, TS: ev.TS, Exact: true,
				Weight: w, Kernel: []uint64{ExitPathPC}})
		}
	case ProcessExec:
		if s.onExec != nil {
			s.onExec(uint32(ev))
		}
	}
}

// wakeReader makes Run read the ring now rather than at its next poll.
func (s *Session) wakeReader() error {
	if s.ringWait != nil {
		s.ringWait.wake()
		return nil
	}
	if err := s.reader.Flush(); err != nil {
		s.reader.SetDeadline(time.Now())
		return err
	}
	return nil
}

// Drain returns once Run has passed to its sink every sample the ring
// buffer held when Drain was called (or after a second, if Run is not
// reading): a view that compares the samples with the thread table
// (Peek) reads the table after the samples.
func (s *Session) Drain() {
	ch := make(chan struct{})
	s.drainMu.Lock()
	s.drainWaiters = append(s.drainWaiters, ch)
	s.drainMu.Unlock()
	if err := s.wakeReader(); err != nil {
		return
	}
	select {
	case <-ch:
	case <-s.done:
	case <-time.After(time.Second):
	}
}

// takeDrainWaiters returns the callers of Drain so far.
func (s *Session) takeDrainWaiters() []chan struct{} {
	s.drainMu.Lock()
	defer s.drainMu.Unlock()
	w := s.drainWaiters
	s.drainWaiters = nil
	return w
}

// drained wakes the callers of Drain in waiters: Run has read what was
// pending when they called.
func (s *Session) drained(waiters []chan struct{}) {
	for _, ch := range waiters {
		close(ch)
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

// counter is the total of one per-CPU counter of the lost array.
func (s *Session) counter(i int) uint64 {
	var per []uint64
	if s.objs.core.Lost == nil || s.objs.core.Lost.Lookup(uint32(i), &per) != nil {
		return 0
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n
}

func (s *Session) lostCounts() map[string]uint64 {
	out := map[string]uint64{}
	if s.objs.core.Lost == nil {
		return out
	}
	for i, name := range lostNames {
		if name == "" {
			continue
		}
		var per []uint64
		if err := s.objs.core.Lost.Lookup(uint32(i), &per); err != nil {
			continue
		}
		for _, v := range per {
			out[name] += v
		}
	}
	return out
}

// objects are the programs and maps that every recording needs, plus the
// optional programs that could be loaded on this kernel.
type objects struct {
	core coreObjects
	// tracing are the lazyPrograms loaded, by C name: on_switch and
	// on_sys_exit (switch-time accounting), on_sched_exit (its user stacks
	// at sched_exit_tp, Linux 6.16+), on_resume and on_task_exit (the
	// resumption accounting; on_task_exit the walk's too), on_task_free
	// (with on_task_exit).
	tracing map[string]*ebpf.Program
	// dump takes the stacks of threads still off CPU at the end (not in
	// walk mode), walk are walk_states and walk_stacks (walk mode): one or
	// the other is loaded (Session.loadEnd).
	dump *ebpf.Program
	walk [2]*ebpf.Program
	// walkTimer are walk_timer_start and walk_timer_stop, where the
	// kernel loads them (walk mode; nil: the walks run from a thread).
	walkTimer [2]*ebpf.Program
	optional  []*ebpf.Program
}

// coreObjects are the programs and maps that every recording needs.
type coreObjects struct {
	OnWakeup    *ebpf.Program  `ebpf:"on_wakeup"`
	OnWakeupNew *ebpf.Program  `ebpf:"on_wakeup_new"`
	OnFork      *ebpf.Program  `ebpf:"on_fork"`
	OnCpuSample *ebpf.Program  `ebpf:"on_cpu_sample"`
	Events      *ebpf.Map      `ebpf:"events"`
	Lost        *ebpf.Map      `ebpf:"lost"`
	Pendings    *ebpf.Map      `ebpf:"pendings"`
	Targets     *ebpf.Map      `ebpf:"targets"`
	Tgids       *ebpf.Map      `ebpf:"tgids"`
	Threads     *ebpf.Map      `ebpf:"threads"`
	Stash       *ebpf.Map      `ebpf:"stash"`
	Scratch     *ebpf.Map      `ebpf:"scratch"`
	CPUIn       *ebpf.Map      `ebpf:"cpu_in"`
	BSS         *ebpf.Map      `ebpf:".bss"`  // start_ns and the clock offset, shared with optional programs
	Data        *ebpf.Map      `ebpf:".data"` // walk_full, shared with the walk timer's programs
	UnwRows     *ebpf.Map      `ebpf:"unw_rows"`
	UnwFiles    *ebpf.Map      `ebpf:"unw_files"`
	UnwProcs    *ebpf.Map      `ebpf:"unw_procs"`
	UnwMaps     *ebpf.Map      `ebpf:"unw_maps"`
	UnwFrames   *ebpf.Map      `ebpf:"unw_frames"`
	UnwIterFr   *ebpf.Map      `ebpf:"unw_iter_frames"`
	ExitTails   *ebpf.Map      `ebpf:"exit_tails"` // threads that exited, until the kernel frees them (on_task_free)
	StartNs     *ebpf.Variable `ebpf:"start_ns"`
	UseRd       *ebpf.Variable `ebpf:"use_rd"`
	ResumeMode  *ebpf.Variable `ebpf:"resume_mode"`
	WalkMode    *ebpf.Variable `ebpf:"walk_mode"`
	WalkPending *ebpf.Variable `ebpf:"walk_pending"`
	TargetForks *ebpf.Variable `ebpf:"target_forks"`
	WalkThreads *ebpf.Variable `ebpf:"walk_threads"`
	// The walk timer's (walktimer.go): its maps are held from the start
	// (a timer's map must be held by user space).
	WalkTimers   *ebpf.Map      `ebpf:"walk_timers"`
	WalkWake     *ebpf.Map      `ebpf:"walk_wake"`
	WalkKbufs    *ebpf.Map      `ebpf:"walk_kbufs"`
	WalkProcs    *ebpf.Variable `ebpf:"walk_procs"`
	WalkEveryNs  *ebpf.Variable `ebpf:"walk_every_ns"`
	WalkMaxNs    *ebpf.Variable `ebpf:"walk_max_ns"`
	WalkFull     *ebpf.Variable `ebpf:"walk_full"`
	WalkGaps     *ebpf.Variable `ebpf:"walk_gaps"`
	WalkStartErr *ebpf.Variable `ebpf:"walk_start_err"`
	WalkTickNs   *ebpf.Variable `ebpf:"walk_tick_ns"`
	WalkFires    *ebpf.Variable `ebpf:"walk_fires"`
}

func (o *objects) programs() []*ebpf.Program {
	c := &o.core
	ps := append([]*ebpf.Program{c.OnWakeup, c.OnWakeupNew, c.OnFork,
		c.OnCpuSample, o.dump, o.walk[0], o.walk[1], o.walkTimer[0], o.walkTimer[1]}, o.optional...)
	for _, p := range o.tracing {
		ps = append(ps, p)
	}
	return ps
}

func (o *objects) Close() error {
	for _, p := range o.programs() {
		if p != nil {
			p.Close()
		}
	}
	o.optional, o.tracing, o.dump, o.walk, o.walkTimer = nil, nil, nil, [2]*ebpf.Program{}, [2]*ebpf.Program{}
	c := &o.core
	for _, m := range []*ebpf.Map{c.Events, c.Lost, c.Pendings, c.Targets, c.Tgids, c.Threads, c.Stash, c.Scratch, c.CPUIn, c.BSS,
		c.Data,
		c.UnwRows, c.UnwFiles, c.UnwProcs, c.UnwMaps, c.UnwFrames, c.UnwIterFr, c.WalkTimers, c.WalkWake, c.WalkKbufs} {
		if m != nil {
			m.Close()
		}
	}
	return nil
}

// loadOptional loads one program that the kernel may refuse, sharing the
// maps of the core objects.
func (s *Session) loadOptional(name string) (*ebpf.Program, error) {
	ps, err := s.loadOptionals(name)
	if err != nil {
		return nil, err
	}
	return ps[0], nil
}

// loadOptionals loads programs that the kernel may refuse, in one
// collection (its BTF processed once), sharing the maps of the core
// objects.
func (s *Session) loadOptionals(names ...string) ([]*ebpf.Program, error) {
	spec := s.spec.Copy()
	progs := map[string]*ebpf.ProgramSpec{}
	for _, name := range names {
		ps, ok := spec.Programs[name]
		if !ok {
			return nil, fmt.Errorf("no program %s", name)
		}
		progs[name] = ps
	}
	coll, err := ebpf.NewCollectionWithOptions(&ebpf.CollectionSpec{
		Maps:      spec.Maps,
		Programs:  progs,
		Variables: spec.Variables,
		Types:     spec.Types,
	}, ebpf.CollectionOptions{MapReplacements: map[string]*ebpf.Map{
		"events": s.objs.core.Events, "lost": s.objs.core.Lost, "pendings": s.objs.core.Pendings,
		"targets": s.objs.core.Targets, "tgids": s.objs.core.Tgids, "threads": s.objs.core.Threads,
		"stash": s.objs.core.Stash, "scratch": s.objs.core.Scratch,
		"cpu_in": s.objs.core.CPUIn, ".bss": s.objs.core.BSS, ".data": s.objs.core.Data,
		"unw_rows": s.objs.core.UnwRows, "unw_files": s.objs.core.UnwFiles,
		"unw_procs": s.objs.core.UnwProcs, "unw_frames": s.objs.core.UnwFrames,
		"unw_maps": s.objs.core.UnwMaps, "unw_iter_frames": s.objs.core.UnwIterFr, "exit_tails": s.objs.core.ExitTails,
		"walk_timers": s.objs.core.WalkTimers, "walk_wake": s.objs.core.WalkWake, "walk_kbufs": s.objs.core.WalkKbufs,
	}})
	if err != nil {
		return nil, err
	}
	out := make([]*ebpf.Program, len(names))
	for i, name := range names {
		out[i] = coll.DetachProgram(name)
	}
	coll.Close()
	return out, nil
}
