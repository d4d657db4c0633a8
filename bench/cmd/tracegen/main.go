// Command tracegen writes a large Go execution trace for bench/trace.sh:
// pairs of goroutines pass a value back and forth over unbuffered
// channels (two blocks and two wake-ups per round trip), others sleep,
// lock a contended mutex and allocate, until the trace reaches -mb
// megabytes or -d passes.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/trace"
	"sync"
	"time"
)

func main() {
	out := flag.String("o", "big.trace", "trace file")
	mb := flag.Int64("mb", 300, "stop when the trace reaches this size (MB)")
	d := flag.Duration("d", 5*time.Minute, "stop after this long in any case")
	pairs := flag.Int("pairs", 64, "ping-pong goroutine pairs")
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
	done := make(chan struct{})
	var once sync.Once
	stop := func() { once.Do(func() { close(done) }) }
	start := time.Now()
	// Under this load the main goroutine's timer can be served late, so
	// the first pinger also checks the size and the time.
	full := func() bool {
		fi, err := f.Stat()
		return time.Since(start) >= *d || err == nil && fi.Size() >= *mb<<20
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := 0; i < *pairs; i++ {
		ping, pong := make(chan int), make(chan int)
		wg.Add(3)
		check := func() {}
		if i == 0 {
			check = func() {
				if full() {
					stop()
				}
			}
		}
		go pinger(&wg, done, ping, pong, check)
		go ponger(&wg, ping, pong)
		go locker(&wg, done, &mu)
	}
	for !full() {
		select {
		case <-done:
		case <-time.After(200 * time.Millisecond):
			continue
		}
		break
	}
	stop()
	wg.Wait()
	trace.Stop()
	f.Close()
	fi, _ := os.Stat(*out)
	fmt.Printf("wrote %s: %.0f MB in %.1fs\n", *out, float64(fi.Size())/(1<<20), time.Since(start).Seconds())
}

func pinger(wg *sync.WaitGroup, done <-chan struct{}, ping chan<- int, pong <-chan int, check func()) {
	defer wg.Done()
	defer close(ping)
	for i := 0; ; i++ {
		select {
		case <-done:
			return
		case ping <- i:
		}
		<-pong
		if i%64 == 0 {
			runtime.KeepAlive(make([]byte, 4096))
		}
		if i%4096 == 0 {
			check()
		}
	}
}

func ponger(wg *sync.WaitGroup, ping <-chan int, pong chan<- int) {
	defer wg.Done()
	for v := range ping {
		pong <- v
	}
}

func locker(wg *sync.WaitGroup, done <-chan struct{}, mu *sync.Mutex) {
	defer wg.Done()
	for {
		select {
		case <-done:
			return
		default:
		}
		mu.Lock()
		time.Sleep(50 * time.Microsecond)
		mu.Unlock()
		time.Sleep(time.Millisecond)
	}
}
