// godump parks goroutines in known ways for wallprof dump's tests and
// benchmark, and serves a trivial HTTP handler:
//
//	-chan N    goroutines blocked receiving from a channel (main.waitChan)
//	-sleep N   goroutines in time.Sleep (main.sleepLong)
//	-mutex N   goroutines blocked on a locked sync.Mutex (main.lockMutex)
//	-addr A    serve "ok" on http://A/ (default 127.0.0.1:0)
//
// It prints "ready ADDR" once every goroutine has parked (the runtime shows
// them waiting) and the server listens, then runs until killed. A GC is
// forced after parking, so that the runtime records when each waited since.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"
	"time"
)

//go:noinline
func waitChan(c chan int) { <-c }

//go:noinline
func sleepLong() { time.Sleep(time.Hour) }

//go:noinline
func lockMutex(mu *sync.Mutex) { mu.Lock() }

func spawnChan(n int, c chan int, started *sync.WaitGroup) {
	for i := 0; i < n; i++ {
		started.Add(1)
		go func() { started.Done(); waitChan(c) }()
	}
}

func spawnSleep(n int, started *sync.WaitGroup) {
	for i := 0; i < n; i++ {
		started.Add(1)
		go func() { started.Done(); sleepLong() }()
	}
}

func spawnMutex(n int, mu *sync.Mutex, started *sync.WaitGroup) {
	for i := 0; i < n; i++ {
		started.Add(1)
		go func() { started.Done(); lockMutex(mu) }()
	}
}

func main() {
	nChan := flag.Int("chan", 5000, "goroutines blocked on a channel receive")
	nSleep := flag.Int("sleep", 3000, "goroutines in time.Sleep")
	nMutex := flag.Int("mutex", 2000, "goroutines blocked on a sync.Mutex")
	addr := flag.String("addr", "127.0.0.1:0", "HTTP listen address")
	flag.Parse()

	var started sync.WaitGroup
	c := make(chan int)
	var mu sync.Mutex
	mu.Lock()
	spawnChan(*nChan, c, &started)
	spawnSleep(*nSleep, &started)
	spawnMutex(*nMutex, &mu, &started)
	started.Wait()
	// Every goroutine has started; wait until they have all parked: the
	// number of goroutines running user code settles at those of main and
	// the runtime.
	want := *nChan + *nSleep + *nMutex
	for runtime.NumGoroutine() < want {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	runtime.GC()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	fmt.Printf("ready %s\n", ln.Addr())
	if err := http.Serve(ln, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
