package collect

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/wallprof/wallprof/internal/collect/bpf"
	"github.com/wallprof/wallprof/internal/linux"
	"github.com/wallprof/wallprof/internal/symbolize"
)

// ErrNoSuchProcess is returned (wrapped) by SnapshotThreads when the process
// does not exist, or exited before any of its threads could be read.
var ErrNoSuchProcess = errors.New("no such process")

// SchedState is a thread's scheduler state at a snapshot.
type SchedState string

// The states SnapshotThreads reports, named as ps and top would.
const (
	Running  SchedState = "running"  // on a CPU
	Runnable SchedState = "runnable" // on a run queue, waiting for a CPU
	Sleeping SchedState = "sleeping" // interruptible sleep (poll, futex, sleep, pipe, socket)
	Disk     SchedState = "disk"     // uninterruptible sleep, usually disk I/O
	Idle     SchedState = "idle"     // uninterruptible sleep that is not load (a kernel thread waiting for work)
	Stopped  SchedState = "stopped"  // stopped by a signal (SIGSTOP, job control)
	Traced   SchedState = "traced"   // stopped by a debugger
	Dead     SchedState = "dead"     // exiting, or a zombie
	Unknown  SchedState = "unknown"
)

// ThreadSnapshot is one thread as the scheduler had it at a snapshot: its
// state, how long it has been in it, and its stacks, not yet symbolized.
type ThreadSnapshot struct {
	PID, TID int
	Comm     string
	State    SchedState
	// InState is how long the thread has been in State (InStateKnown:
	// whether it could be told). See timeInState for what it is measured
	// from and how accurate it is.
	InState      time.Duration
	InStateKnown bool
	// SinceRan is how long ago it last left a CPU (off CPU only; 0 when
	// unknown or running).
	SinceRan time.Duration
	CPUTime  time.Duration // its CPU time so far (se.sum_exec_runtime)
	// Voluntary and Involuntary count its context switches: it blocked, it
	// was preempted.
	Voluntary, Involuntary uint64
	CPU                    int // the CPU whose run queue it is, or was last, on
	Regs                   symbolize.Regs
	Kernel                 []uint64 // leaf first; nil for a thread on a CPU (its kernel stack cannot be read while it runs)
	User                   []uint64 // leaf first, the frame-pointer walk from its saved registers
	Snap                   []byte   // user stack memory at Regs.SP
	// StaleUser is set for a thread that was on a CPU: its saved registers
	// are those of its latest entry into the kernel (a syscall, the
	// scheduler tick, an interrupt: at most a tick old while it runs user
	// code), and its user stack was walked from them while it ran.
	StaleUser bool
	KernErr   int32 // negative errno when the kernel stack could not be read
}

// Raw scheduler timestamps of one thread (struct thread_snap).
type snapTimes struct {
	state             uint32
	onCPU, onRQ       bool
	rqClock, myClock  uint64
	rqClockTask       uint64
	execStart         uint64
	sumExec, prevExec uint64
	lastArrival       uint64
	lastQueued        uint64
}

// Task state bits (include/linux/sched.h).
const (
	taskInterruptible   = 0x1
	taskUninterruptible = 0x2
	taskStopped         = 0x4
	taskTraced          = 0x8
	exitDead            = 0x10
	exitZombie          = 0x20
	taskDead            = 0x80
	taskNoload          = 0x400
)

// schedState names a task's state from its __state and whether it is on a
// CPU or a run queue.
func schedState(state uint32, onCPU, onRQ bool) SchedState {
	switch {
	case onCPU:
		// Also a thread that has set its sleeping state and is on its way
		// into the scheduler: it still runs.
		return Running
	case state == 0 || onRQ:
		// Woken (its state is back to running) or not yet switched out
		// after a wake-up: waiting for a CPU.
		return Runnable
	case state&(taskDead|exitDead|exitZombie) != 0:
		return Dead
	case state&taskTraced != 0:
		return Traced
	case state&taskStopped != 0:
		return Stopped
	case state&taskUninterruptible != 0 && state&taskNoload != 0:
		return Idle
	case state&taskUninterruptible != 0:
		return Disk
	case state&taskInterruptible != 0:
		return Sleeping
	}
	return Unknown
}

// timeInState returns how long a thread has been in state st, and how long
// ago it last left a CPU (0 if running or unknown), from the scheduler's
// own timestamps, all on the scheduler's clock (rq->clock, sched_clock):
//
//   - "now" is the latest of the clocks of the thread's run queue and of the
//     reading CPU's, as the scheduler last updated them (at a switch, a
//     wake-up, the tick): it lags the true time by up to a tick (4 ms at
//     HZ=250) on a busy CPU, more on an idle one, so every duration here
//     may be short by that much.
//   - running: since its latest switch-in (sched_info.last_arrival).
//   - runnable: since it was queued (sched_info.last_queued: its wake-up,
//     or its preemption). A thread preempted between announcing a sleep
//     and calling the scheduler (set_current_state, then schedule: a pipe
//     write that waits for room does this) is not queued as runnable by
//     the scheduler's accounting (last_queued stays 0) yet stays on the
//     run queue, and is runnable again once woken: since it left the CPU.
//   - off CPU (sleeping, disk, stopped...): since it last left a CPU, its
//     latest switch-in plus the CPU time of that last burst
//     (sum_exec_runtime - prev_sum_exec_runtime). The burst is counted on
//     the clock less steal and IRQ time, so a thread that was interrupted
//     or lost its vCPU to the hypervisor while it last ran shows slightly
//     longer in its state than it was. Without schedstat (no
//     last_arrival), the run queue's clock_task minus se.exec_start (the
//     clock_task when its CPU time was last charged: its switch-out),
//     which misses the steal and IRQ time since.
//
// Schedstat's timestamps are those of the run queue the thread was on; on
// machines whose CPUs' clocks are not synchronised (unstable TSC) they may
// disagree by microseconds.
func timeInState(st SchedState, t snapTimes) (in time.Duration, known bool, sinceRan time.Duration) {
	now := max(t.rqClock, t.myClock)
	since := func(ts uint64) (time.Duration, bool) {
		if ts == 0 || now == 0 {
			return 0, false
		}
		if ts >= now {
			return 0, true
		}
		return time.Duration(now - ts), true
	}
	if st == Running {
		d, ok := since(t.lastArrival)
		return d, ok, 0
	}
	var left uint64
	if t.lastArrival != 0 && t.sumExec >= t.prevExec {
		left = t.lastArrival + (t.sumExec - t.prevExec)
	}
	ran, ranOK := since(left)
	if left == 0 && t.execStart != 0 && t.rqClockTask >= t.execStart {
		ran, ranOK = time.Duration(t.rqClockTask-t.execStart), true
	}
	if !ranOK {
		ran = 0
	}
	if st == Runnable {
		if t.lastQueued != 0 {
			d, ok := since(t.lastQueued)
			return d, ok, ran
		}
		return ran, ranOK, ran
	}
	return ran, ranOK, ran
}

// snapSize is the size of one struct thread_snap.
var snapSize = binary.Size(bpf.WallprofThreadSnap{})

// decodeSnapshots parses the iterator's output: whole struct thread_snap
// records, one per thread. A partial record is an error.
func decodeSnapshots(b []byte) ([]ThreadSnapshot, error) {
	if len(b)%snapSize != 0 {
		return nil, fmt.Errorf("%w: thread snapshots of %d bytes, not a multiple of %d", ErrTruncated, len(b), snapSize)
	}
	var out []ThreadSnapshot
	var r bpf.WallprofThreadSnap
	for off := 0; off < len(b); off += snapSize {
		if _, err := binary.Decode(b[off:off+snapSize], binary.LittleEndian, &r); err != nil {
			return nil, fmt.Errorf("decode thread snapshot: %w", err)
		}
		t, err := snapshotOf(&r)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func snapshotOf(r *bpf.WallprofThreadSnap) (ThreadSnapshot, error) {
	comm := make([]byte, 0, len(r.Comm))
	for _, c := range r.Comm {
		if c == 0 {
			break
		}
		comm = append(comm, byte(c))
	}
	t := ThreadSnapshot{
		PID: int(r.Pid), TID: int(r.Tid), Comm: string(comm), CPU: int(r.Cpu),
		CPUTime: time.Duration(r.SumExec), Voluntary: r.Nvcsw, Involuntary: r.Nivcsw,
		Regs: symbolize.Regs{IP: r.Ip, SP: r.Sp, BP: r.Bp},
	}
	t.State = schedState(r.State, r.OnCpu != 0, r.OnRq != 0)
	t.InState, t.InStateKnown, t.SinceRan = timeInState(t.State, snapTimes{
		state: r.State, onCPU: r.OnCpu != 0, onRQ: r.OnRq != 0,
		rqClock: r.RqClock, myClock: r.MyRqClock, rqClockTask: r.RqClockTask,
		execStart: r.ExecStart, sumExec: r.SumExec, prevExec: r.PrevSumExec,
		lastArrival: r.LastArrival, lastQueued: r.LastQueued,
	})
	switch {
	case r.Klen < 0:
		t.KernErr = r.Klen
	case r.Klen > 8*maxStack || r.Klen%8 != 0:
		return t, fmt.Errorf("kernel stack length %d out of range", r.Klen)
	case t.State != Running:
		// A running thread's kernel stack is the one it last switched
		// out in: stale.
		t.Kernel = trimZero(append([]uint64(nil), r.Kstack[:r.Klen/8]...))
	}
	if r.Ulen < 0 || r.Ulen > 8*maxStack || r.Ulen%8 != 0 {
		return t, fmt.Errorf("user stack length %d out of range", r.Ulen)
	}
	if r.Ip != 0 {
		t.User = trimZero(append([]uint64(nil), r.Ustack[:r.Ulen/8]...))
	}
	if r.SnapLen > snapBytes {
		return t, fmt.Errorf("stack snapshot length %d out of range", r.SnapLen)
	}
	t.Snap = append([]byte(nil), r.Snap[:r.SnapLen]...)
	t.StaleUser = t.State == Running
	return t, nil
}

// SnapshotThreads returns every thread of process pid as the scheduler has
// it now, with its stacks, without stopping it: it loads the task
// iterator snapshot_threads of wallprof.bpf.c alone (none of the recording
// programs, none of their maps), runs it once and reads its output. A
// process that does not exist, or exits before its threads are read, gives
// an error wrapping ErrNoSuchProcess; without the privilege to load BPF
// programs, one for which IsPermission is true.
func SnapshotThreads(pid int) ([]ThreadSnapshot, error) {
	if pid <= 0 || !linux.ProcessExists(pid) {
		return nil, fmt.Errorf("process %d: %w", pid, ErrNoSuchProcess)
	}
	prog, err := loadSnapshotProgram(uint32(pid))
	if err != nil {
		return nil, err
	}
	defer prog.Close()
	it, err := link.AttachIter(link.IterOptions{Program: prog})
	if err != nil {
		return nil, fmt.Errorf("attach task iterator: %w", err)
	}
	defer it.Close()
	rc, err := it.Open()
	if err != nil {
		return nil, fmt.Errorf("run task iterator: %w", err)
	}
	defer rc.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, rc); err != nil {
		return nil, fmt.Errorf("read task iterator: %w", err)
	}
	ts, err := decodeSnapshots(buf.Bytes())
	if err != nil {
		return nil, err
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("process %d exited: %w", pid, ErrNoSuchProcess)
	}
	return ts, nil
}

// loadSnapshotProgram loads snapshot_threads, set to snapshot tgid, with
// only the maps it uses.
func loadSnapshotProgram(tgid uint32) (*ebpf.Program, error) {
	spec, err := bpf.LoadWallprof()
	if err != nil {
		return nil, fmt.Errorf("load BPF object: %w", err)
	}
	const name = bpf.WallprofProgSnapshotThreads
	ps, ok := spec.Programs[name]
	if !ok {
		return nil, fmt.Errorf("the BPF object has no program %s (a build from mismatched sources?)", name)
	}
	v, ok := spec.Variables[bpf.WallprofVarSnapTgid]
	if !ok {
		return nil, fmt.Errorf("the BPF object has no variable %s", bpf.WallprofVarSnapTgid)
	}
	if err := v.Set(tgid); err != nil {
		return nil, fmt.Errorf("configure BPF program (%s): %w", bpf.WallprofVarSnapTgid, err)
	}
	maps := map[string]*ebpf.MapSpec{}
	for _, ins := range ps.Instructions {
		if ref := ins.Reference(); ref != "" {
			if m, ok := spec.Maps[ref]; ok {
				maps[ref] = m
			}
		}
	}
	// The variables of those maps (snap_tgid's .rodata): their values
	// are written into the maps at load.
	vars := map[string]*ebpf.VariableSpec{}
	for n, v := range spec.Variables {
		if _, ok := maps[v.SectionName]; ok {
			vars[n] = v
		}
	}
	coll, err := ebpf.NewCollection(&ebpf.CollectionSpec{
		Maps:      maps,
		Programs:  map[string]*ebpf.ProgramSpec{name: ps},
		Variables: vars,
		Types:     spec.Types,
	})
	if err != nil {
		var verr *ebpf.VerifierError
		if errors.As(err, &verr) {
			return nil, fmt.Errorf("the kernel's BPF verifier rejected wallprof's snapshot program: %v", verr)
		}
		return nil, fmt.Errorf("load BPF program %s: %w", name, err)
	}
	p := coll.DetachProgram(name)
	coll.Close()
	return p, nil
}
