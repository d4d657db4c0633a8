// Command target is the ground truth of wallprof latency's tests: many
// goroutines call main.handle, which sleeps a known mix of durations,
// recurses through big frames in some calls (so the runtime copies the
// stack mid-call) and panics in a few (the call after a panic is made from
// a deeper frame); the program times each call itself
// and writes the durations' count and percentiles as JSON at exit.
//
// It waits for SIGUSR1 (or -nowait) before the first call, so that the
// probes are attached before it starts.
//
//	target -calls 100000 -goroutines 256 -out truth.json
//	target -bench 20000000   # ns per call of main.trivial in a tight loop
//	target -split -calls 2000 -goroutines 4 -out truth.json
//	target -waits -calls 1000 -goroutines 2 -out truth.json
//
// With -split, each goroutine is locked to its thread (so that its thread's
// time is its own) and calls main.work, which spins for 1 to 4 ms and then
// sleeps for 1 to 4 ms; GOMAXPROCS is raised above the goroutines so that
// none waits for a P, and with more goroutines than CPUs they wait for a
// CPU. Around each call the program reads its thread's CPU time and run
// queue wait (/proc/thread-self/schedstat) and writes the sums of the
// calls' wall, running, runnable and blocked time: the truth of the split
// (doc/latency-split.md).
//
// With -waits, goroutines that are not locked to a thread (GOMAXPROCS above
// their number, so that none waits for a P) call main.wait, which spins for
// 2 to 6 ms, receives from a timer's channel after 2 to 5 ms and sleeps for
// 1 to 4 ms; the program sums the wall time of each part over the calls:
// the truth of the goroutine states wallprof samples during them.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// sleeps is the mix, in 11 slots: 1 ms 5 times, 2 ms 3 times, 5 ms twice,
// 10 ms once, so that p50, p90 and p99 fall inside a class, not between.
var sleeps = []time.Duration{1, 1, 1, 1, 1, 2, 2, 2, 5, 5, 10}

// handle is the function measured. Every 7th call recurses 8 levels deep
// through 8 KiB frames before sleeping; every 1000th panics after sleeping.
//
//go:noinline
func handle(i int, depth int) int {
	if depth > 0 {
		var frame [8192]byte
		frame[i%len(frame)] = byte(depth)
		return handle(i, depth-1) + int(frame[(i+1)%len(frame)])
	}
	time.Sleep(sleeps[(i*7+i/3)%len(sleeps)] * time.Millisecond)
	if i%1000 == 999 {
		panic("planned")
	}
	return i
}

// double is inlined everywhere it is called.
func double(x int) int { return 2*x + 1 }

//go:noinline
func trivial(x int) int { return x + 1 }

// deeper calls call from a deeper frame: after a panic, the next call of
// handle is made deeper in the stack than the one the panic unwound, over
// stack memory that frame used.
//
//go:noinline
func deeper(i int) (time.Duration, bool) {
	var pad [512]byte
	pad[i%len(pad)] = 1
	d, ok := call(i)
	return d + time.Duration(pad[(i+1)%len(pad)]), ok
}

// call times one call of handle; ok is false if it panicked.
func call(i int) (d time.Duration, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	depth := 0
	if i%7 == 3 {
		depth = 8
	}
	start := time.Now()
	handle(i, depth)
	return time.Since(start), true
}

type truth struct {
	Count   int     `json:"count"`
	Panics  int64   `json:"panics"`
	P50Ns   int64   `json:"p50_ns"`
	P90Ns   int64   `json:"p90_ns"`
	P99Ns   int64   `json:"p99_ns"`
	MaxNs   int64   `json:"max_ns"`
	BenchNs float64 `json:"bench_ns_per_call,omitempty"`
	// -split: sums over the calls of main.work.
	WallNs     int64 `json:"wall_ns,omitempty"`
	RunningNs  int64 `json:"running_ns,omitempty"`
	RunnableNs int64 `json:"runnable_ns,omitempty"`
	BlockedNs  int64 `json:"blocked_ns,omitempty"`
	// -waits: sums over the calls of main.wait.
	SpinNs   int64 `json:"spin_ns,omitempty"`
	ChanNs   int64 `json:"chan_ns,omitempty"`
	SleepNs  int64 `json:"sleep_ns,omitempty"`
	Double   int   `json:"double"`
	Recursed int   `json:"recursed"`
}

func main() {
	calls := flag.Int("calls", 100000, "calls of main.handle")
	gs := flag.Int("goroutines", 256, "goroutines calling it")
	out := flag.String("out", "", "write the JSON here (default stdout)")
	bench := flag.Int("bench", 0, "call main.trivial this many times in a tight loop instead, and report ns per call")
	nowait := flag.Bool("nowait", false, "start without waiting for SIGUSR1")
	split := flag.Bool("split", false, "call main.work on goroutines locked to their threads instead, and write where its time went")
	flag.BoolVar(&noNap, "nonap", false, "with -split: main.work only spins")
	waits := flag.Bool("waits", false, "call main.wait on goroutines that are not locked to threads instead, and write how long its spin, channel receive and sleep took")
	flag.Parse()
	if !*nowait {
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGUSR1)
		fmt.Fprintln(os.Stderr, "ready")
		<-c
	}
	var t truth
	t.Double = double(*calls)
	if *bench > 0 {
		start := time.Now()
		x := 0
		for range *bench {
			x = trivial(x)
		}
		t.BenchNs = float64(time.Since(start).Nanoseconds()) / float64(*bench)
		t.Count = x
	} else if *split {
		t = runSplit(*calls, *gs)
	} else if *waits {
		t = runWaits(*calls, *gs)
	} else {
		t = run(*calls, *gs)
	}
	b, _ := json.Marshal(t)
	if *out == "" {
		fmt.Println(string(b))
		return
	}
	if err := os.WriteFile(*out, append(b, '\n'), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(calls, gs int) truth {
	var next, panics atomic.Int64
	durs := make([][]time.Duration, gs)
	var wg sync.WaitGroup
	for g := range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			panicked := false
			for {
				i := int(next.Add(1)) - 1
				if i >= calls {
					return
				}
				d, ok := time.Duration(0), false
				if panicked {
					d, ok = deeper(i)
				} else {
					d, ok = call(i)
				}
				panicked = !ok
				if ok {
					durs[g] = append(durs[g], d)
				} else {
					panics.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	var all []time.Duration
	for _, d := range durs {
		all = append(all, d...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	q := func(p float64) int64 {
		r := int(p*float64(len(all)) + 0.999999)
		return int64(all[max(r, 1)-1])
	}
	return truth{Count: len(all), Panics: panics.Load(), P50Ns: q(0.5), P90Ns: q(0.9), P99Ns: q(0.99), MaxNs: int64(all[len(all)-1]), Recursed: calls / 7}
}

// spins and naps are main.work's mix, indexed differently so that they
// combine.
var (
	spins = []time.Duration{1, 2, 4}
	naps  = []time.Duration{1, 1, 2, 4}
)

// noNap makes main.work only spin (-nonap).
var noNap bool

// work spins for 1 to 4 ms and then sleeps for 1 to 4 ms.
//
//go:noinline
func work(i int) int {
	end := time.Now().Add(spins[i%len(spins)] * time.Millisecond)
	x := 0
	for time.Now().Before(end) {
		x++
	}
	if !noNap {
		time.Sleep(naps[(i/3)%len(naps)] * time.Millisecond)
	}
	return x
}

// threadCPU is the calling thread's CPU time.
func threadCPU() time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTimeID = 3
	if _, _, e := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		panic(e)
	}
	return time.Duration(ts.Nano())
}

// runDelay is the calling thread's time waiting on a run queue.
func runDelay() time.Duration {
	b, err := os.ReadFile("/proc/thread-self/schedstat")
	if err != nil {
		panic(err)
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		panic("schedstat: " + string(b))
	}
	n, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		panic(err)
	}
	return time.Duration(n)
}

func runSplit(calls, gs int) truth {
	runtime.GOMAXPROCS(gs + 2)
	var next atomic.Int64
	var mu sync.Mutex
	var t truth
	var wg sync.WaitGroup
	for range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var wall, running, runnable time.Duration
			n := 0
			for {
				i := int(next.Add(1)) - 1
				if i >= calls {
					break
				}
				// The wall clock brackets the counters' reads, so that
				// a wait for a CPU around a read is inside both; the
				// run delay brackets the CPU clock, whose reads are
				// cheap, and not the other way round: the CPU of
				// reading /proc/thread-self/schedstat (20-45 µs a call,
				// twice that on a loaded host) was counted as the
				// call's running time, 2.4% more than work's own.
				start := time.Now()
				rd0 := runDelay()
				cpu0 := threadCPU()
				work(i)
				cpu := threadCPU() - cpu0
				rd := runDelay() - rd0
				d := time.Since(start)
				wall += d
				running += cpu
				runnable += rd
				n++
			}
			mu.Lock()
			t.Count += n
			t.WallNs += int64(wall)
			t.RunningNs += int64(running)
			t.RunnableNs += int64(runnable)
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.BlockedNs = t.WallNs - t.RunningNs - t.RunnableNs
	return t
}

// wait's parts, indexed differently so that they combine.
var (
	waitSpins = []time.Duration{2, 4, 6}
	waitChans = []time.Duration{2, 3, 5, 4}
	waitNaps  = []time.Duration{1, 4, 2, 3, 1}
)

// wait spins, waits for a timer's channel and sleeps, and returns how long
// each took.
//
//go:noinline
func wait(i int) (spin, ch, nap time.Duration) {
	t0 := time.Now()
	x := spinUntil(t0.Add(waitSpins[i%len(waitSpins)] * time.Millisecond))
	t1 := time.Now()
	<-time.After(waitChans[i%len(waitChans)] * time.Millisecond)
	t2 := time.Now()
	time.Sleep(waitNaps[i%len(waitNaps)] * time.Millisecond)
	t3 := time.Now()
	if x < 0 {
		panic("never")
	}
	return t1.Sub(t0), t2.Sub(t1), t3.Sub(t2)
}

// spinUntil computes until end, in a function of its own: the slow calls'
// profile must find it on a CPU.
//
//go:noinline
func spinUntil(end time.Time) int {
	x := 0
	for time.Now().Before(end) {
		x++
	}
	return x
}

func runWaits(calls, gs int) truth {
	runtime.GOMAXPROCS(gs + 2)
	var next atomic.Int64
	var mu sync.Mutex
	var t truth
	var wg sync.WaitGroup
	for range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var wall, spin, ch, nap time.Duration
			n := 0
			for {
				i := int(next.Add(1)) - 1
				if i >= calls {
					break
				}
				start := time.Now()
				s, c, z := wait(i)
				wall += time.Since(start)
				spin += s
				ch += c
				nap += z
				n++
			}
			mu.Lock()
			t.Count += n
			t.WallNs += int64(wall)
			t.SpinNs += int64(spin)
			t.ChanNs += int64(ch)
			t.SleepNs += int64(nap)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return t
}
