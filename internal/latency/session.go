package latency

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/wallprof/wallprof/internal/latency/bpf"
	"github.com/wallprof/wallprof/internal/linux"
)

// MaxOpenCalls is the size of the kernel's table of open calls (an LRU
// hash): beyond it the least recently entered are lost, and their returns
// are counted as unmatched.
const MaxOpenCalls = 65536

// Counters are a function's event counts, summed over CPUs.
type Counters struct {
	Count       uint64        // calls timed
	Sum         time.Duration // their total duration
	Max         time.Duration // the longest
	Nested      uint64        // recursive calls inside a timed call (not timed)
	Abandoned   uint64        // calls that never returned (a panic unwound them)
	Reused      uint64        // open calls of goroutines that exited, whose g was reused
	Unmatched   uint64        // RETs without an entry: begun before the probes, or evicted
	ReadErrs    uint64        // probe hits where g could not be read
	Hits        uint64        // probe hits (entries and RETs)
	Moved       uint64        // timed calls that returned on another thread than they entered (or whose thread's record was evicted): not split
	LostStopped uint64        // stopped calls the WaitSampler did not get: the ring was full
}

// NLog2 is the number of power-of-two buckets of the split: bucket k
// holds the calls that took [2^k, 2^(k+1)) ns.
const NLog2 = 64

// Split is where the time of some calls went, on their thread
// (doc/latency-split.md): blocked is Wall - Running - Runnable.
type Split struct {
	Calls    uint64
	Wall     time.Duration
	Running  time.Duration
	Runnable time.Duration
}

// Snapshot is one function's histogram and counters at one time.
type Snapshot struct {
	Func     string
	Counters Counters
	Hist     Hist
	// Splits[kind][k] is the split of the calls that took [2^k, 2^(k+1))
	// ns: kind 0 the calls whose goroutine ran throughout (or native
	// calls: exact), kind 1 those whose goroutine stopped running on the
	// way (parked, preempted; before Go 1.26 also a system call) and came
	// back on the same thread, which may have run other goroutines
	// meanwhile, or all Go calls when g.trackingSeq's offset is not known.
	Splits [2][NLog2]Split
	// SeqKnown is false for a Go function when the offset of g.trackingSeq
	// is not known: kind 1 then holds every call split.
	SeqKnown bool
}

// Session is the probes on one process.
type Session struct {
	bin   *Binary
	objs  bpf.LatencyObjects
	links []link.Link
	// uprobes0 is the index in links of the first uprobe (before it: the
	// sched_switch program).
	uprobes0 int
	// perfFDs are the cpu-clock events of the on-CPU samples (CPUPeriod).
	perfFDs   []int
	cpuPeriod time.Duration // of the on-CPU samples; 0: none
}

// Options change what a Session does.
type Options struct {
	// Waits makes the RET probes send the calls whose goroutine stopped
	// running on the way, for a WaitSampler (StartWaits).
	Waits bool
	// Slow makes them send the calls that took at least Slow too, for
	// the WaitSampler's profile of the slow calls (0: none).
	Slow time.Duration
	// CPUPeriod, when positive, samples the stacks of the goroutines with
	// an open call every CPUPeriod of CPU time (a cpu-clock event on every
	// CPU), for the WaitSampler's profile of the slow calls.
	CPUPeriod time.Duration
}

// Start loads the BPF programs and attaches them to the functions of bin in
// process pid (exe is the path to open the executable through, such as
// /proc/PID/exe).
func Start(bin *Binary, exe string, pid int) (*Session, error) {
	return StartWith(bin, exe, pid, Options{})
}

// StartWith is Start with options.
func StartWith(bin *Binary, exe string, pid int, opts Options) (*Session, error) {
	if len(bin.Funcs) > MaxFuncs {
		return nil, fmt.Errorf("at most %d functions at once", MaxFuncs)
	}
	spec, err := bpf.LoadLatency()
	if err != nil {
		return nil, fmt.Errorf("load BPF spec: %w", err)
	}
	if err := spec.Variables["goid_off"].Set(bin.GoidOff); err != nil {
		return nil, err
	}
	if err := spec.Variables["stack_hi_off"].Set(bin.StackHiOff); err != nil {
		return nil, err
	}
	if err := spec.Variables["target_tgid"].Set(uint32(pid)); err != nil {
		return nil, err
	}
	if err := spec.Variables["seq_off"].Set(bin.SeqOff); err != nil {
		return nil, err
	}
	var waits uint8
	if opts.Waits {
		waits = 1
	}
	if err := spec.Variables["send_stopped"].Set(waits); err != nil {
		return nil, err
	}
	if err := spec.Variables["slow_ns"].Set(uint64(max(opts.Slow, 0))); err != nil {
		return nil, err
	}
	for name, v := range map[string]uint32{"gm_off": bin.GMOff, "mcurg_off": bin.MCurgOff, "nfuncs": uint32(len(bin.Funcs))} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, err
		}
	}
	s := &Session{bin: bin}
	if err := spec.LoadAndAssign(&s.objs, nil); err != nil {
		return nil, fmt.Errorf("load BPF programs: %w", err)
	}
	// Each thread's time on a CPU, for the split of the calls' time.
	sw, err := link.AttachTracing(link.TracingOptions{Program: s.objs.LatSwitch})
	if err != nil {
		s.Stop()
		return nil, fmt.Errorf("attach to sched_switch: %w", err)
	}
	s.links = append(s.links, sw)
	s.uprobes0 = len(s.links)
	if opts.CPUPeriod > 0 && bin.GoVersion != "" {
		if err := s.attachCPUClock(opts.CPUPeriod); err != nil {
			s.Stop()
			return nil, fmt.Errorf("sample on-CPU stacks: %w", err)
		}
	}
	var ex *link.Executable
	if bin.GoVersion != "" {
		if ex, err = link.OpenExecutable(exe); err != nil {
			s.Stop()
			return nil, fmt.Errorf("open %s: %w", exe, err)
		}
	}
	for i, fn := range bin.Funcs {
		if fn.Lib != "" {
			if err := s.attachNative(fn, i, pid); err != nil {
				s.Stop()
				return nil, err
			}
			continue
		}
		// RETs first: a call that starts while attaching then finds its RET
		// probed (at worst it is not timed, never mismatched).
		for _, off := range fn.RetOffs {
			if err := s.attach(ex, s.objs.LatRet, off, i, pid); err != nil {
				s.Stop()
				return nil, fmt.Errorf("attach to a RET of %s at %#x: %w", fn.Name, off, err)
			}
		}
		if err := s.attach(ex, s.objs.LatEntry, fn.EntryOff, i, pid); err != nil {
			s.Stop()
			return nil, fmt.Errorf("attach to the entry of %s: %w", fn.Name, err)
		}
	}
	return s, nil
}

func (s *Session) attach(ex *link.Executable, prog *ebpf.Program, off uint64, fn, pid int) error {
	l, err := ex.Uprobe("", prog, &link.UprobeOptions{Address: off, PID: pid, Cookie: uint64(fn)})
	if err != nil {
		return err
	}
	s.links = append(s.links, l)
	return nil
}

// attachCPUClock runs lat_cpu every period of CPU time on every CPU.
func (s *Session) attachCPUClock(period time.Duration) error {
	cpus, err := linux.OnlineCPUs()
	if err != nil {
		return err
	}
	fds, err := linux.OpenCPUClocks(cpus, uint64(period), s.objs.LatCpu.FD(), true)
	s.perfFDs = append(s.perfFDs, fds...)
	if err != nil {
		return err
	}
	s.cpuPeriod = period
	return nil
}

// LostCPUSamples returns how many on-CPU samples the ring could not take.
func (s *Session) LostCPUSamples() uint64 {
	var per []uint64
	if err := s.objs.LostCpu.Lookup(uint32(0), &per); err != nil {
		return 0
	}
	var n uint64
	for _, v := range per {
		n += v
	}
	return n
}

// attachNative puts a uprobe and a uretprobe on a native function.
func (s *Session) attachNative(fn Func, i, pid int) error {
	ex, err := link.OpenExecutable(fn.Lib)
	if err != nil {
		return fmt.Errorf("open %s: %w", fn.Lib, err)
	}
	opts := &link.UprobeOptions{PID: pid, Cookie: uint64(i)}
	ret, err := ex.Uretprobe(fn.Symbol, s.objs.NatRet, opts)
	if err != nil {
		return fmt.Errorf("attach to the return of %s: %w", fn.Name, err)
	}
	s.links = append(s.links, ret)
	entry, err := ex.Uprobe(fn.Symbol, s.objs.NatEntry, opts)
	if err != nil {
		return fmt.Errorf("attach to the entry of %s: %w", fn.Name, err)
	}
	s.links = append(s.links, entry)
	return nil
}

// Probes returns how many uprobes are attached.
func (s *Session) Probes() int { return len(s.links) - s.uprobes0 }

// Snapshot reads every function's histogram and counters.
func (s *Session) Snapshot() ([]Snapshot, error) {
	out := make([]Snapshot, len(s.bin.Funcs))
	for i, fn := range s.bin.Funcs {
		out[i].Func = fn.Name
		var per []bpf.LatencyFstat
		if err := s.objs.Stats.Lookup(uint32(i), &per); err != nil {
			return nil, fmt.Errorf("read counters: %w", err)
		}
		c := &out[i].Counters
		for _, p := range per {
			c.Count += p.Count
			c.Sum += time.Duration(p.SumNs)
			c.Max = max(c.Max, time.Duration(p.MaxNs))
			c.Nested += p.Nested
			c.Abandoned += p.Abandoned
			c.Reused += p.Reused
			c.Unmatched += p.Unmatched
			c.ReadErrs += p.ReadErrs
			c.Hits += p.Entries + p.Rets
			c.Moved += p.Moved
			c.LostStopped += p.LostStopped
		}
		out[i].SeqKnown = fn.Lib != "" || s.bin.SeqOff != 0
		for kind := range 2 {
			for k := range NLog2 {
				var sp bpf.LatencySplit
				if err := s.objs.Splits.Lookup(uint32((i*2+kind)*NLog2+k), &sp); err != nil {
					return nil, fmt.Errorf("read the split: %w", err)
				}
				out[i].Splits[kind][k] = Split{Calls: sp.Calls, Wall: time.Duration(sp.WallNs),
					Running: time.Duration(sp.RunningNs), Runnable: time.Duration(sp.RunnableNs)}
			}
		}
	}
	// The histogram map is memory-mapped: one read, no system call per
	// bucket.
	mem, err := s.objs.Hist.Memory()
	if err != nil {
		return nil, fmt.Errorf("map the histograms: %w", err)
	}
	buf := make([]byte, len(s.bin.Funcs)*NBuckets*8)
	if _, err := mem.ReadAt(buf, 0); err != nil {
		return nil, fmt.Errorf("read the histograms: %w", err)
	}
	for i := range out {
		for b := range NBuckets {
			out[i].Hist[b] = binary.LittleEndian.Uint64(buf[(i*NBuckets+b)*8:])
		}
	}
	return out, nil
}

// Open returns how many calls are open (entered, not yet returned) now.
func (s *Session) Open() int {
	n := 0
	var k bpf.LatencyGkey
	var v bpf.LatencyGentry
	for it := s.objs.Calls.Iterate(); it.Next(&k, &v); {
		n++
	}
	var nk, nv [16]byte
	for it := s.objs.Ncalls.Iterate(); it.Next(&nk, &nv); {
		n++
	}
	return n
}

// ProgramStats returns the kernel's run time and run count of the two
// programs, when BPF statistics are on (kernel.bpf_stats_enabled).
func (s *Session) ProgramStats() (run time.Duration, runs uint64, ok bool) {
	for _, p := range []*ebpf.Program{s.objs.LatEntry, s.objs.LatRet, s.objs.NatEntry, s.objs.NatRet} {
		st, err := p.Stats()
		if err != nil {
			return 0, 0, false
		}
		run += st.Runtime
		runs += st.RunCount
	}
	return run, runs, runs > 0
}

// Stop detaches every probe and frees the BPF objects. It may be called
// more than once.
func (s *Session) Stop() {
	for _, fd := range s.perfFDs {
		linux.ClosePerfEvent(fd)
	}
	s.perfFDs = nil
	for _, l := range s.links {
		l.Close()
	}
	s.links, s.uprobes0 = nil, 0
	s.objs.Close()
}
