package collect

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/wallprof/wallprof/internal/linux"
	"github.com/wallprof/wallprof/internal/profile"
)

// ThreadRecord is one thread's exact totals at the end of a recording.
type ThreadRecord struct {
	PID, TID uint32
	Name     string
	FirstNs  uint64 // CLOCK_MONOTONIC
	EndNs    uint64
	Exited   bool
	Time     [profile.NumStates]uint64
	// Waiting is the part of Time in the wait the thread is in now, which
	// no sample holds yet (its resumption or switch-in sends it): set by
	// Peek, for the live views.
	Waiting [profile.NumStates]uint64
}

// Remainder is time a thread spent in a state that no stack sample
// represents: less than a sampling period, left over when the thread exited or
// the recording ended.
type Remainder struct {
	PID, TID uint32
	State    profile.State
	Nanos    uint64
}

// Result is what a session recorded, before symbolization.
type Result struct {
	Remainders     []Remainder
	StartNs, EndNs uint64
	WallStart      time.Time
	PeriodNs       uint64
	Threads        []*ThreadRecord
	// ReusedThreadIDs counts the exited threads whose id an earlier
	// thread of their process had had: their times were added to that
	// id's record. FoldedThreads counts those folded into their process's
	// record of exited threads (exitTable).
	ReusedThreadIDs, FoldedThreads int
	Lost                           map[string]uint64
	// RecoveredSwitchIns counts switches to a target thread that the
	// kernel did not report (seen on some 6.18 VMs) and that were taken
	// when the thread ran, at sched_exit_tp: nothing was lost.
	RecoveredSwitchIns uint64
	// DroppedOffCPU counts off-CPU samples of a single period that came
	// due beyond the budget (Plan.OffCPURate) and were not taken: their
	// time is in the threads' totals, and Build scales each thread's thin
	// samples of a state to the time its exact ones leave.
	DroppedOffCPU uint64
	// OffCPURate is that budget, per CPU per second (0: none).
	OffCPURate int
	// Resume says the accounting ran at each thread's resumption
	// (sched_exit_tp) rather than at sched_switch.
	Resume bool
	// Walk says no program ran at a switch: the threads were walked every
	// sampling period (AccountWalk).
	Walk bool
	// WalkTimer says the walks' first pass ran from a BPF timer
	// (AccountWalkTimer).
	WalkTimer bool
	Kernel    string // uname -r of the recording machine
	Cost      profile.Cost
}

// exitPathWait bounds how long Stop waits for the exit paths of threads
// that exited just before it (awaitExitPaths).
const exitPathWait = 250 * time.Millisecond

// awaitExitPaths waits, up to max, until the kernel has freed the target
// threads that have exited and that it had not freed yet (an RCU grace
// period after their exit, when on_task_free sends the CPU time of their
// exit path). The last threads of a command that ends the recording by
// exiting are such: the teardown of a 2 GiB address space (170 ms of CPU)
// went missing from the profile before.
func (s *Session) awaitExitPaths(max time.Duration) {
	m := s.objs.core.ExitTails
	if m == nil {
		return
	}
	var keys []uint64
	var key uint64
	err := m.NextKey(nil, &key)
	// At most 512 (a system-wide recording of a machine that starts
	// threads without pause has many): each poll looks each one up.
	for err == nil && len(keys) < 512 {
		keys = append(keys, key)
		err = m.NextKey(key, &key)
	}
	value := make([]byte, m.ValueSize())
	deadline := time.Now().Add(max)
	for len(keys) > 0 && time.Now().Before(deadline) {
		left := keys[:0]
		for _, k := range keys {
			if m.Lookup(k, value) == nil {
				left = append(left, k)
			}
		}
		keys = left
		if len(keys) > 0 {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// Stop ends the recording: it takes the stacks of threads still off CPU,
// detaches every probe, drains the ring buffer (passing the last samples to
// the sink given to Run) and closes the thread accounting at the end time.
// Run must have been started.
func (s *Session) Stop() (*Result, error) {
	cpuStop := linux.CPUTime()
	var iterErr error
	walked := s.walk != nil
	var walkTimer time.Duration // the walk timer's callback: kernel time on wallprof's behalf
	timed := walked && s.walk.timer != nil
	if walked {
		iterErr = s.walk.stop()
		walkTimer = s.walk.timerTime()
	} else {
		iterErr = s.dumpOffCPU()
	}
	s.awaitExitPaths(exitPathWait)
	s.detach()
	end := linux.Monotonic()
	close(s.done)
	// Wake Run now rather than at its next poll: it reads what is left in
	// the ring, then returns.
	_ = s.wakeReader()
	<-s.finished

	res := &Result{
		StartNs:   s.startNs,
		EndNs:     end,
		WallStart: s.wallStart,
		PeriodNs:  s.plan.PeriodNs(),
		Lost:      s.lostCounts(),

		RecoveredSwitchIns: s.counter(recoveredSwitchIn),
		DroppedOffCPU:      s.counter(droppedOffCPU),
		OffCPURate:         s.offCPURate(),
		Resume:             s.resume,
		Walk:               walked,
		WalkTimer:          timed,
	}
	res.Kernel, _, _, _ = linux.KernelRelease()
	if n := s.decodeErrs.Load(); n > 0 {
		res.Lost["undecodable-record"] = n
	}
	live, err := s.readThreads()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	finals, exits := s.finals, s.exits
	s.mu.Unlock()

	for tid, st := range live {
		rec := &ThreadRecord{PID: st.PID, TID: tid, FirstNs: st.FirstTS, EndNs: end, Time: st.Time}
		if !st.Exited {
			rec.Name = linux.ThreadName(int(st.PID), int(tid))
			if walked && rec.Name == "" {
				// Gone, and not seen exiting while the programs were
				// attached: the final walk brought every thread alive
				// then up to its end, so its times stand as they are. (A
				// record that a walk entered again just after its
				// thread's exit, on_cpu, once gave a thread the whole
				// recording on CPU here.)
				st.Exited = true
				rec.Exited, rec.EndNs = true, max(st.InTS, st.OutTS)
			}
		}
		closeInterval(&st, end)
		if st.Exited && !rec.Exited {
			rec.Exited, rec.EndNs = true, st.OutTS
		}
		rec.Time = st.Time
		res.Threads = append(res.Threads, rec)
		live[tid] = st
	}
	byID := map[pidTID]*ThreadRecord{}
	for _, r := range res.Threads {
		byID[pidTID{r.PID, r.TID}] = r
	}
	for _, e := range exits.list() {
		res.addRemainders(e.PID, e.TID, &e.State, true)
		if r := byID[pidTID{e.PID, e.TID}]; r != nil {
			// A live thread with the id of threads that exited: one
			// record, as their samples are counted under one id.
			r.addTimes(e)
			continue
		}
		res.Threads = append(res.Threads, e.record())
	}
	res.ReusedThreadIDs, res.FoldedThreads = exits.reused, exits.folded
	// The end-of-recording samples carry what each thread accumulated since
	// its last sample, including the interval still open at the end.
	seen := map[uint32]bool{}
	for _, fs := range finals {
		st, ok := live[fs.TID]
		if !ok || seen[fs.TID] {
			continue
		}
		seen[fs.TID] = true
		fs.Weight = st.Acc
		fs.Weight[profile.OnCPU] = 0
		if s.sink != nil {
			s.sink(fs)
		}
	}
	for tid, st := range live {
		res.addRemainders(st.PID, tid, &st, !seen[tid])
	}
	for _, t := range res.Threads {
		res.Cost.TargetCPU += time.Duration(t.Time[profile.OnCPU])
	}
	res.Cost.ProfilerCPU = cpuStop - s.cpuStart + walkTimer
	res.Cost.StartupCPU = s.cpuStart - s.cpuOpen
	if on := s.stats.finish(); on > 0 {
		rt, n := s.bpfStats()
		res.Cost.BPFStatsShare = float64(on) / float64(time.Duration(end-s.startNs))
		if res.Cost.BPFStatsShare > 1 || s.stats.always {
			res.Cost.BPFStatsShare = 1
		}
		// Sampled: scale what was measured while the statistics were on.
		res.Cost.BPFRunTime = time.Duration(float64(rt) / res.Cost.BPFStatsShare)
		res.Cost.BPFRunCount = uint64(float64(n) / res.Cost.BPFStatsShare)
	}
	s.Close()
	if iterErr != nil {
		res.Lost["final-stacks-failed"]++
	}
	return res, nil
}

// closeInterval accounts the interval still open at end, as the BPF program
// does at a switch-in.
func closeInterval(st *ThreadState, end uint64) (waiting [profile.NumStates]uint64) {
	if st.Exited {
		return
	}
	var d [profile.NumStates]uint64
	if st.OnCPU {
		if end > st.InTS {
			d[profile.OnCPU] = end - st.InTS
		}
	} else if end > st.OutTS {
		k := st.OutState
		if k == profile.Runnable || k == profile.OnCPU || st.WakeTS == 0 {
			d[k] = end - st.OutTS
		} else {
			w := min(max(st.WakeTS, st.OutTS), end)
			d[k] = w - st.OutTS
			d[profile.Runnable] = end - w
		}
	}
	for i := range d {
		st.Time[i] += d[i]
		if i != int(profile.OnCPU) {
			st.Acc[i] += d[i]
			waiting[i] = d[i]
		}
	}
	return waiting
}

func (s *Session) readThreads() (map[uint32]ThreadState, error) {
	out := map[uint32]ThreadState{}
	var key uint32
	var val []byte
	it := s.objs.core.Threads.Iterate()
	for it.Next(&key, &val) {
		if len(val) < tstateSize {
			return nil, fmt.Errorf("thread record of %d bytes, want %d", len(val), tstateSize)
		}
		out[key] = decodeTState(val)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read thread table: %w", err)
	}
	return out, nil
}

// dumpOffCPU runs the task iterator, which emits a final sample for every
// target thread that is off CPU.
func (s *Session) dumpOffCPU() error {
	if s.objs.dump == nil {
		return fmt.Errorf("attach task iterator: program %s was not loaded", progDumpOffCPU)
	}
	it, err := link.AttachIter(link.IterOptions{Program: s.objs.dump})
	if err != nil {
		return fmt.Errorf("attach task iterator: %w", err)
	}
	defer it.Close()
	rc, err := it.Open()
	if err != nil {
		return fmt.Errorf("run task iterator: %w", err)
	}
	defer rc.Close()
	_, err = io.Copy(io.Discard, rc)
	return err
}

func (s *Session) bpfStats() (time.Duration, uint64) {
	var rt time.Duration
	var n uint64
	for _, p := range s.objs.programs() {
		if p == nil {
			continue
		}
		st, err := p.Stats()
		if err != nil {
			continue
		}
		rt += st.Runtime
		n += st.RunCount
	}
	return rt, n
}

func (s *Session) detach() {
	for _, fd := range s.perfFDs {
		_ = unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_DISABLE, 0)
		unix.Close(fd)
	}
	s.perfFDs = nil
	if s.walk != nil {
		s.walk.close()
		s.walk = nil
	}
	for _, l := range s.links {
		_ = l.Close()
	}
	s.links = nil
}

// Close releases everything the session holds. It is safe to call more than
// once.
func (s *Session) Close() {
	s.detach()
	if s.unwind != nil {
		s.unwind.close()
		<-s.unwind.done
	}
	if s.reader != nil {
		_ = s.reader.Close()
		s.reader = nil
	}
	if s.ringWait != nil {
		s.ringWait.close()
		s.ringWait = nil
	}
	// Statistics are read before the programs are closed.
	_ = s.objs.Close()
	s.stats.finish()
}

// IsPermission reports whether err is a permission error from the kernel.
func IsPermission(err error) bool {
	return errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES)
}

// addRemainders records the off-CPU time a thread accumulated past its last
// sample, when no final sample took it. (On-CPU time has no remainder: Build
// spreads each thread's exact CPU time over its timer samples.)
func (r *Result) addRemainders(pid, tid uint32, st *ThreadState, offCPU bool) {
	if !offCPU {
		return
	}
	for i := profile.Runnable; i < profile.NumStates; i++ {
		if st.Acc[i] > 0 {
			r.Remainders = append(r.Remainders, Remainder{pid, tid, i, st.Acc[i]})
		}
	}
}

// offCPURate is the off-CPU stacks of a single period a second per CPU
// that the resume accounting took at most (0: no bound, or another
// accounting).
func (s *Session) offCPURate() int {
	c := s.plan.OffCPUCostNs()
	if c == 0 || !s.resume || s.walk != nil {
		return 0
	}
	return int(uint64(time.Second) / c)
}
