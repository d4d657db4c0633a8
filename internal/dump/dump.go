// Package dump takes a snapshot of a running process without stopping it:
// every thread's user and kernel stack, its scheduler state and how long it
// has been in it, and for a Go program every goroutine's stack, state, wait
// reason and creator, grouped by what they are doing.
//
// Contract:
//   - Take never stops, ptraces or signals the target. Threads come from a
//     BPF task iterator (collect.SnapshotThreads), goroutines from the
//     goroutine table read through the target's memory
//     (internal/goruntime/goroutines). The two are read one after the
//     other, not atomically: a goroutine or thread that moves meanwhile
//     may be seen in two places or in neither state.
//   - A thread on a CPU has no kernel stack, and its user stack is walked
//     from the registers it saved at its latest entry into the kernel while
//     it runs: marked approximate (Thread.StackApproximate).
//   - Frames are named by internal/symbolize through collect's
//     StackSymbolizer, as a recording's are; unknown addresses are kept as
//     "module+0xoffset", never dropped.
//   - Groups of goroutines (same state, wait reason, stack, creator and
//     labels) are ordered largest first, then by state, wait reason and
//     first function: the output is deterministic for a given target state.
//   - The JSON form's schema is doc/schemas/wallprof.dump.v1.json (Format).
package dump

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/wallprof/wallprof/internal/collect"
	"github.com/wallprof/wallprof/internal/goruntime/goroutines"
	"github.com/wallprof/wallprof/internal/linux"
	"github.com/wallprof/wallprof/internal/profile"
	"github.com/wallprof/wallprof/internal/symbolize"
)

// Format is the schema id of the JSON form.
const Format = "wallprof.dump/v1"

// ErrNoSuchProcess is wrapped by Take's error when the process does not
// exist or exited during the dump.
var ErrNoSuchProcess = collect.ErrNoSuchProcess

// Dump is one snapshot of a process.
type Dump struct {
	Format  string    `json:"format"`
	PID     int       `json:"pid"`
	Command string    `json:"command"`
	Time    time.Time `json:"time"`
	// ElapsedNs is how long the dump took to read, symbolization included.
	ElapsedNs int64    `json:"elapsed_ns"`
	Threads   []Thread `json:"threads"`
	Go        *Go      `json:"go,omitempty"`
	Warnings  []string `json:"warnings,omitempty"`

	goVersion string
}

// Thread is one thread at the snapshot.
type Thread struct {
	TID   int    `json:"tid"`
	Name  string `json:"name"`
	State string `json:"state"`
	// InStateNs is how long it has been in State, from the scheduler's
	// timestamps (collect.ThreadSnapshot); absent when unknown.
	InStateNs *int64 `json:"in_state_ns,omitempty"`
	// SinceRanNs is how long ago it last left a CPU (off CPU only).
	SinceRanNs  int64  `json:"since_ran_ns,omitempty"`
	CPUNs       int64  `json:"cpu_ns"`
	Voluntary   uint64 `json:"voluntary_switches"`
	Involuntary uint64 `json:"involuntary_switches"`
	// Goroutine is the goroutine the Go runtime has on this thread
	// (running or in a system call), 0 if none or not Go.
	Goroutine uint64 `json:"goroutine,omitempty"`
	// StackApproximate: the thread was on a CPU; see the package doc.
	StackApproximate bool    `json:"stack_approximate,omitempty"`
	Frames           []Frame `json:"frames"`
}

// Frame is one function in a stack, innermost first; an inlined call is a
// frame of its own.
type Frame struct {
	Function string `json:"function"`
	File     string `json:"file,omitempty"`
	Line     int    `json:"line,omitempty"`
	Kernel   bool   `json:"kernel,omitempty"`
}

// Go is the goroutine part of a Go program's dump.
type Go struct {
	Version string `json:"go_version"`
	// Goroutines counts the goroutines listed; System those of the
	// runtime itself, which are not listed (as runtime.Stack hides them).
	Goroutines int `json:"goroutines"`
	System     int `json:"system_goroutines"`
	// Dropped counts goroutines that changed on every read (see
	// goroutines.Snapshot.Dropped): not listed.
	Dropped int     `json:"inconsistent_reads_dropped"`
	Groups  []Group `json:"groups"`
}

// Group is goroutines in the same state, wait reason, stack and creator
// (with --all: one goroutine).
type Group struct {
	Count      int    `json:"count"`
	State      string `json:"state"`
	WaitReason string `json:"wait_reason,omitempty"`
	// WaitMinNs and WaitMaxNs bound how long the group's goroutines have
	// waited, where the runtime knows it (its waitsince, set by the first
	// garbage collection that finds a goroutine blocked: a lower bound).
	WaitMinNs *int64   `json:"wait_min_ns,omitempty"`
	WaitMaxNs *int64   `json:"wait_max_ns,omitempty"`
	IDs       []uint64 `json:"ids"`
	// Threads are the threads its goroutines are on (running, in a
	// system call).
	Threads []int `json:"threads,omitempty"`
	// StackFromThread: the goroutine was running, and its stack is its
	// thread's (approximate, see Thread.StackApproximate).
	StackFromThread bool              `json:"stack_from_thread,omitempty"`
	Frames          []Frame           `json:"frames"`
	CreatedBy       *Creator          `json:"created_by,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
}

// Creator is where a goroutine was created: the go statement.
type Creator struct {
	Function string `json:"function"`
	File     string `json:"file,omitempty"`
	Line     int    `json:"line,omitempty"`
	// Goroutine is the creating goroutine (Go 1.21+; 0 when unknown).
	Goroutine uint64 `json:"goroutine,omitempty"`
}

// Options are what Take does beyond the default.
type Options struct {
	// All lists every goroutine on its own rather than grouped.
	All bool
}

// Take dumps process pid. What takes long (the goroutine reader's look at
// the executable, the kernel's symbols) is done first, so that the threads
// and the goroutines are read as close together as they can be.
func Take(pid int, opts Options) (*Dump, error) {
	start := time.Now()
	if !linux.ProcessExists(pid) {
		return nil, fmt.Errorf("process %d: %w", pid, ErrNoSuchProcess)
	}
	d := &Dump{Format: Format, PID: pid, Time: start}
	d.Command, _ = linux.CommandLine(pid)
	gr, err := goroutines.Open(pid)
	if err != nil {
		if !linux.ProcessExists(pid) {
			return nil, fmt.Errorf("process %d exited during the dump: %w", pid, ErrNoSuchProcess)
		}
		if !errors.Is(err, goroutines.ErrNotGo) {
			d.Warnings = append(d.Warnings, fmt.Sprintf("goroutines not read: %v", err))
		}
		gr = nil
	} else {
		defer gr.Close()
	}
	cache := symbolize.NewCache()
	defer cache.Close()
	newResolver := func(pid int) (collect.ProcessResolver, error) { return cache.NewProcess(pid) }
	var kernel collect.KernelResolver
	if k, err := symbolize.LoadKernel(); err == nil {
		kernel = k
	} else {
		d.Warnings = append(d.Warnings, fmt.Sprintf("kernel frames not named: %v", err))
	}
	sym := collect.NewStackSymbolizer(newResolver, kernel)
	// The process's mappings, while it certainly exists.
	sym.Resolver(pid)

	threads, err := collect.SnapshotThreads(pid)
	if err != nil {
		return nil, err
	}
	var snap *goroutines.Snapshot
	var snapMono uint64 // CLOCK_MONOTONIC when the goroutines were read
	if gr != nil {
		snapMono = linux.Monotonic()
		s, err := gr.Snapshot()
		switch {
		case errors.Is(err, goroutines.ErrProcessGone):
			return nil, fmt.Errorf("process %d exited during the dump: %w", pid, ErrNoSuchProcess)
		case err != nil:
			d.Warnings = append(d.Warnings, fmt.Sprintf("goroutines not read: %v", err))
		default:
			snap = &s
		}
		d.goVersion = gr.GoVersion()
	}
	d.Threads = buildThreads(threads, sym, snap)
	if snap != nil {
		d.Go = buildGo(pid, d.goVersion, snap, threads, sym, opts, snapMono)
	}
	d.ElapsedNs = int64(time.Since(start))
	return d, nil
}

// framesOf turns locations into frames, innermost first.
func framesOf(locs []*profile.Location, kernel bool) []Frame {
	var out []Frame
	for _, l := range locs {
		for _, f := range l.Frames {
			out = append(out, Frame{Function: f.Function, File: f.File, Line: f.Line, Kernel: kernel})
		}
	}
	return out
}

// buildThreads symbolizes the threads, sorted by TID.
func buildThreads(ts []collect.ThreadSnapshot, sym symbolizer, snap *goroutines.Snapshot) []Thread {
	onThread := map[int]uint64{}
	if snap != nil {
		for _, g := range snap.Goroutines {
			if g.TID != 0 && (g.Status == goroutines.Running || g.Status == goroutines.Syscall) {
				onThread[g.TID] = g.ID
			}
		}
	}
	out := make([]Thread, 0, len(ts))
	for i := range ts {
		t := &ts[i]
		k, u := sym.Stack(t)
		th := Thread{TID: t.TID, Name: t.Comm, State: string(t.State), SinceRanNs: int64(t.SinceRan),
			CPUNs: int64(t.CPUTime), Voluntary: t.Voluntary, Involuntary: t.Involuntary,
			Goroutine: onThread[t.TID], StackApproximate: t.StaleUser}
		if t.InStateKnown {
			v := int64(t.InState)
			th.InStateNs = &v
		}
		th.Frames = append(framesOf(k, true), framesOf(u, false)...)
		if th.Frames == nil {
			th.Frames = []Frame{}
		}
		out = append(out, th)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TID < out[j].TID })
	return out
}
