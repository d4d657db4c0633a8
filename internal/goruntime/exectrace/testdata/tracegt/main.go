// Command tracegt is the ground truth for the exectrace tests: it writes a
// Go execution trace of a workload whose timing it measures itself, and
// prints those measurements as JSON on stdout.
//
// While tracing it runs, for -d:
//   - gcLoop: runtime.GC() every -gc-period (a periodic stop-the-world),
//     inside a user region "forced-gc" of a task "gc";
//   - allocator: a steady allocation load (background GC cycles, assists);
//   - mutexHolder / mutexWaiter: a sync.Mutex held for -hold at a time,
//     each measuring its own time in Lock;
//   - producer / consumer: an unbuffered channel fed every -chan-every,
//     each measuring its own time in send and receive;
//   - sleeper: time.Sleep(-sleep) in a loop, measuring its own sleeps.
//
// Every goroutine stops before the trace does, so each measured wait is
// inside the trace.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/trace"
	"sync"
	"sync/atomic"
	"time"
)

type truth struct {
	GCPeriodMs float64 `json:"gc_period_ms"`
	ForcedGCs  int     `json:"forced_gcs"`
	// Waits measured by the program itself, in milliseconds.
	MutexWaitMs float64 `json:"mutex_wait_ms"` // time in Lock, holder and waiter
	ChanWaitMs  float64 `json:"chan_wait_ms"`  // time in send and receive, producer and consumer
	SleepMs     float64 `json:"sleep_ms"`      // time in Sleep, sleeper only
	Sleeps      int     `json:"sleeps"`
}

func main() {
	out := flag.String("o", "trace.out", "trace file")
	d := flag.Duration("d", 3*time.Second, "how long to run")
	gcPeriod := flag.Duration("gc-period", 200*time.Millisecond, "interval between runtime.GC calls")
	hold := flag.Duration("hold", 20*time.Millisecond, "how long the holder keeps the mutex")
	chanEvery := flag.Duration("chan-every", 15*time.Millisecond, "interval between channel sends")
	sleep := flag.Duration("sleep", 7*time.Millisecond, "the sleeper's sleep")
	allocMB := flag.Int("alloc-mb", 40, "allocation rate, MB/s")
	goroutines := flag.Int("churn", 200, "short-lived goroutines started per second")
	flag.Parse()

	f, err := os.Create(*out)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := trace.Start(f); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	var (
		t    truth
		done = make(chan struct{})
		wg   sync.WaitGroup
		mu   sync.Mutex
		acc  accum
	)
	t.GCPeriodMs = float64(*gcPeriod) / 1e6
	stopped := func() bool {
		select {
		case <-done:
			return true
		default:
			return false
		}
	}
	// Each goroutine starts in its own function, which names its group.
	wg.Add(8)
	go gcLoop(&wg, done, *gcPeriod, &t.ForcedGCs)
	go allocator(&wg, done, *allocMB)
	go mutexHolder(&wg, stopped, &mu, *hold, &acc.mutex)
	go mutexWaiter(&wg, stopped, &mu, &acc.mutex)
	ch := make(chan int)
	go producer(&wg, stopped, ch, *chanEvery, &acc.chans)
	go consumer(&wg, ch, &acc.chans)
	go sleeper(&wg, stopped, *sleep, &acc.sleep, &t.Sleeps)
	go churn(&wg, done, *goroutines)

	time.Sleep(*d)
	close(done)
	wg.Wait()
	trace.Stop()
	if err := f.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	t.MutexWaitMs = float64(acc.mutex.Load()) / 1e6
	t.ChanWaitMs = float64(acc.chans.Load()) / 1e6
	t.SleepMs = float64(acc.sleep.Load()) / 1e6
	json.NewEncoder(os.Stdout).Encode(t)
}

type accum struct{ mutex, chans, sleep atomic.Int64 }

func gcLoop(wg *sync.WaitGroup, done <-chan struct{}, period time.Duration, n *int) {
	defer wg.Done()
	ctx, task := trace.NewTask(context.Background(), "gc")
	defer task.End()
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-tick.C:
			trace.WithRegion(ctx, "forced-gc", runtime.GC)
			*n++
		}
	}
}

func allocator(wg *sync.WaitGroup, done <-chan struct{}, mbPerSec int) {
	defer wg.Done()
	const chunk = 32 << 10
	ring := make([][]byte, 128) // 4 MB live
	perMs := mbPerSec << 20 / 1000 / chunk
	for i := 0; ; i++ {
		select {
		case <-done:
			runtime.KeepAlive(ring)
			return
		default:
		}
		for j := 0; j < perMs; j++ {
			ring[(i*perMs+j)%len(ring)] = make([]byte, chunk)
		}
		time.Sleep(time.Millisecond)
	}
}

func mutexHolder(wg *sync.WaitGroup, stopped func() bool, mu *sync.Mutex, hold time.Duration, wait *atomic.Int64) {
	defer wg.Done()
	for !stopped() {
		t0 := time.Now()
		mu.Lock()
		wait.Add(int64(time.Since(t0)))
		time.Sleep(hold)
		mu.Unlock()
		time.Sleep(hold / 2)
	}
}

func mutexWaiter(wg *sync.WaitGroup, stopped func() bool, mu *sync.Mutex, wait *atomic.Int64) {
	defer wg.Done()
	for !stopped() {
		time.Sleep(3 * time.Millisecond)
		t0 := time.Now()
		mu.Lock()
		wait.Add(int64(time.Since(t0)))
		mu.Unlock()
	}
}

func producer(wg *sync.WaitGroup, stopped func() bool, ch chan<- int, every time.Duration, wait *atomic.Int64) {
	defer wg.Done()
	defer close(ch)
	for i := 0; !stopped(); i++ {
		time.Sleep(every)
		t0 := time.Now()
		ch <- i
		wait.Add(int64(time.Since(t0)))
	}
}

func consumer(wg *sync.WaitGroup, ch <-chan int, wait *atomic.Int64) {
	defer wg.Done()
	for {
		t0 := time.Now()
		_, ok := <-ch
		wait.Add(int64(time.Since(t0)))
		if !ok {
			return
		}
	}
}

func sleeper(wg *sync.WaitGroup, stopped func() bool, d time.Duration, slept *atomic.Int64, n *int) {
	defer wg.Done()
	for ; !stopped(); *n++ {
		t0 := time.Now()
		time.Sleep(d)
		slept.Add(int64(time.Since(t0)))
	}
}

// churn starts short-lived goroutines at a steady rate.
func churn(outer *sync.WaitGroup, done <-chan struct{}, perSec int) {
	defer outer.Done()
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(max(perSec, 1)))
	defer tick.Stop()
	for {
		select {
		case <-done:
			wg.Wait()
			return
		case <-tick.C:
			wg.Add(1)
			go func() { defer wg.Done(); runtime.KeepAlive(make([]byte, 64)) }()
		}
	}
}
