// Command gogt is the Go ground-truth workload for wallprof's accuracy
// tests. It runs groups of goroutines, each group in one function whose
// name is the phase name in the truth file, so a test can look it up in
// profile stacks:
//
//	main.compute        computes (on-CPU)                  2 goroutines
//	main.sleeper        time.Sleep(1ms) in a loop          2 goroutines
//	main.chanWaiter     receives from a channel            2 goroutines
//	                    (with the pprof label group=chanWaiter)
//	main.chanFeeder     sends to it every 50 ms            1 goroutine
//	main.pipeReader     reads a pipe (netpoller IO wait)   1 goroutine
//	main.pipeWriter     writes one byte every 50 ms        1 goroutine
//	main.mutexContender locks a shared sync.Mutex and      3 goroutines
//	                    holds it for 1 ms (time.Sleep)
//
// With --bursts it runs other groups instead, whose phases are all
// shorter than a sampling period (bursts.go).
//
// Every group runs for --duration (default 1s) times --scale. The truth
// (format in internal/groundtruth/doc.go) lists per group the goroutine
// count and the summed wall time of the phase; main.mutexContender also
// reports the time spent in Mutex.Lock. OS thread ids and per-thread CPU
// are not meaningful for goroutines, so CPU and run delay are given for
// the whole process only.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// phase is the truth of one phase, summed over a group's goroutines.
type phase struct {
	WallNS     int64 `json:"wall_ns"`
	CPUNS      int64 `json:"cpu_ns,omitempty"` // --bursts compute phases only
	LockWaitNS int64 `json:"lock_wait_ns,omitempty"`
}

type group struct {
	Name     string           `json:"name"`
	Function string           `json:"function"`
	Count    int              `json:"count"`
	WallNS   int64            `json:"wall_ns"`
	Phases   map[string]phase `json:"phases"`

	mu sync.Mutex
}

// add records one goroutine's phase.
func (g *group) add(wall, lockWait time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	p := g.Phases[g.Function]
	p.WallNS += int64(wall)
	p.LockWaitNS += int64(lockWait)
	g.Phases[g.Function] = p
	g.WallNS += int64(wall)
}

// addPhases records one goroutine's time, wall, made of phases ps.
func (g *group) addPhases(wall time.Duration, ps phases) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for name, q := range ps {
		p := g.Phases[name]
		p.WallNS += q.WallNS
		p.CPUNS += q.CPUNS
		g.Phases[name] = p
	}
	g.WallNS += int64(wall)
}

type processTruth struct {
	WallNS     int64 `json:"wall_ns"`
	CPUNS      int64 `json:"cpu_ns"`
	RunDelayNS int64 `json:"run_delay_ns"`
}

type truth struct {
	Workload string       `json:"workload"`
	Mode     string       `json:"mode,omitempty"` // "bursts" with --bursts
	PID      int          `json:"pid"`
	Scale    float64      `json:"scale"`
	NProc    int          `json:"nproc"`
	StartNS  int64        `json:"start_ns"`
	EndNS    int64        `json:"end_ns"`
	Process  processTruth `json:"process"`
	Groups   []*group     `json:"groups"`
}

var sink atomic.Uint64 // keeps compute's loop from being optimised out

func compute(deadline time.Time) {
	x := uint64(88172645463325252)
	for time.Now().Before(deadline) {
		for i := 0; i < 100000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	sink.Add(x)
}

func sleeper(deadline time.Time) {
	for time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

func chanWaiter(ch <-chan int) {
	for range ch {
	}
}

func chanFeeder(ch chan<- int, deadline time.Time) {
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		ch <- 1
	}
	close(ch)
}

func pipeReader(r *os.File) {
	buf := make([]byte, 64)
	for {
		if _, err := r.Read(buf); err != nil {
			return
		}
	}
}

func pipeWriter(w *os.File, deadline time.Time) {
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		if _, err := w.Write([]byte{'x'}); err != nil {
			break
		}
	}
	w.Close()
}

// mutexContender returns the time it spent waiting in Lock.
func mutexContender(mu *sync.Mutex, deadline time.Time) time.Duration {
	var wait time.Duration
	for {
		t := time.Now()
		if !t.Before(deadline) {
			return wait
		}
		mu.Lock()
		wait += time.Since(t)
		time.Sleep(time.Millisecond)
		mu.Unlock()
	}
}

func main() {
	os.Exit(run())
}

func run() int {
	truthPath := flag.String("truth", os.Getenv("WALLPROF_TRUTH"), "write the truth JSON to this `file`")
	scale := flag.Float64("scale", 1, "multiply all durations by this factor")
	duration := flag.Duration("duration", time.Second, "how long each group runs (before --scale)")
	bursts := flag.Bool("bursts", false, "run goroutines whose phases are shorter than a sampling period instead (bursts.go)")
	flag.Parse()
	if *scale <= 0 || *duration <= 0 {
		fmt.Fprintln(os.Stderr, "gogt: --scale and --duration must be positive")
		return 2
	}
	d := time.Duration(float64(*duration) * *scale)
	t := truth{Workload: "gogt", PID: os.Getpid(), Scale: *scale, NProc: runtime.NumCPU(), StartNS: monoNS()}
	start := time.Now()
	groupsOf := runGroups
	if *bursts {
		t.Mode, groupsOf = "bursts", runBursts
	}
	groups, err := groupsOf(d)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gogt:", err)
		return 1
	}
	t.Groups = groups
	t.EndNS = monoNS()
	t.Process = processTruth{WallNS: int64(time.Since(start)), CPUNS: processCPU(), RunDelayNS: processRunDelay()}
	if *truthPath != "" {
		if err := writeJSON(*truthPath, &t); err != nil {
			fmt.Fprintln(os.Stderr, "gogt:", err)
			return 1
		}
	}
	return 0
}

// runGroups starts every group at once and waits for all of them. Each
// group's goroutines are created by a function of their own (startCompute,
// ...), so that a goroutine profile can group them by creation site.
func runGroups(d time.Duration) ([]*group, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("create pipe: %w", err)
	}
	defer r.Close()
	s := &spawner{deadline: time.Now().Add(d), ch: make(chan int), r: r, w: w}
	startCompute(s, 2)
	startSleeper(s, 2)
	startChanWaiter(s, 2)
	startChanFeeder(s, 1)
	startPipeReader(s, 1)
	startPipeWriter(s, 1)
	startMutexContender(s, 3)
	s.wg.Wait()
	return s.groups, nil
}

// spawner holds what the groups share.
type spawner struct {
	deadline time.Time
	ch       chan int
	r, w     *os.File
	mu       sync.Mutex
	wg       sync.WaitGroup
	groups   []*group
}

func (s *spawner) group(fn string, count int) *group {
	g := &group{Name: strings.TrimPrefix(fn, "main."), Function: fn, Count: count, Phases: map[string]phase{}}
	s.groups = append(s.groups, g)
	s.wg.Add(count)
	return g
}

// run runs one goroutine's body and records its time.
func (s *spawner) run(g *group, body func() time.Duration) {
	defer s.wg.Done()
	t := time.Now()
	lockWait := body()
	g.add(time.Since(t), lockWait)
}

func startCompute(s *spawner, n int) {
	g := s.group("main.compute", n)
	for i := 0; i < n; i++ {
		go s.run(g, func() time.Duration { compute(s.deadline); return 0 })
	}
}

func startSleeper(s *spawner, n int) {
	g := s.group("main.sleeper", n)
	for i := 0; i < n; i++ {
		go s.run(g, func() time.Duration { sleeper(s.deadline); return 0 })
	}
}

func startChanWaiter(s *spawner, n int) {
	g := s.group("main.chanWaiter", n)
	for i := 0; i < n; i++ {
		// With pprof labels, which a goroutine profile reads back.
		go s.run(g, func() time.Duration {
			pprof.Do(context.Background(), pprof.Labels("group", "chanWaiter"), func(context.Context) { chanWaiter(s.ch) })
			return 0
		})
	}
}

func startChanFeeder(s *spawner, n int) {
	g := s.group("main.chanFeeder", n)
	for i := 0; i < n; i++ {
		go s.run(g, func() time.Duration { chanFeeder(s.ch, s.deadline); return 0 })
	}
}

func startPipeReader(s *spawner, n int) {
	g := s.group("main.pipeReader", n)
	for i := 0; i < n; i++ {
		go s.run(g, func() time.Duration { pipeReader(s.r); return 0 })
	}
}

func startPipeWriter(s *spawner, n int) {
	g := s.group("main.pipeWriter", n)
	for i := 0; i < n; i++ {
		go s.run(g, func() time.Duration { pipeWriter(s.w, s.deadline); return 0 })
	}
}

func startMutexContender(s *spawner, n int) {
	g := s.group("main.mutexContender", n)
	for i := 0; i < n; i++ {
		go s.run(g, func() time.Duration { return mutexContender(&s.mu, s.deadline) })
	}
}

func monoNS() int64 {
	var ts syscall.Timespec
	// CLOCK_MONOTONIC = 1; the same clock the C workloads and the profiler use.
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0
	}
	return ts.Nano()
}

func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// processRunDelay sums the run-queue wait (2nd field of schedstat) of the
// threads alive now; threads that already exited are not counted.
func processRunDelay() int64 {
	paths, _ := filepath.Glob("/proc/self/task/*/schedstat")
	var sum int64
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) >= 2 {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			sum += v
		}
	}
	return sum
}

func writeJSON(path string, t *truth) error {
	b, err := json.MarshalIndent(t, "", " ")
	if err != nil {
		return fmt.Errorf("encode truth: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write truth: %w", err)
	}
	return os.Rename(tmp, path)
}
