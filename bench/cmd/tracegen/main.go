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
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := 0; i < *pairs; i++ {
		ping, pong := make(chan int), make(chan int)
		wg.Add(3)
		go pinger(&wg, done, ping, pong)
		go ponger(&wg, ping, pong)
		go locker(&wg, done, &mu)
	}
	start := time.Now()
	for time.Since(start) < *d {
		time.Sleep(200 * time.Millisecond)
		if fi, err := f.Stat(); err == nil && fi.Size() >= *mb<<20 {
			break
		}
	}
	close(done)
	wg.Wait()
	trace.Stop()
	f.Close()
	fi, _ := os.Stat(*out)
	fmt.Printf("wrote %s: %.0f MB in %.1fs\n", *out, float64(fi.Size())/(1<<20), time.Since(start).Seconds())
}

func pinger(wg *sync.WaitGroup, done <-chan struct{}, ping chan<- int, pong <-chan int) {
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
