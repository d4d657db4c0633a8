// Command goparked is the workload of the goroutine-reader tests
// (internal/goruntime/goroutines). It starts goroutines that block in known
// ways, each in its own function and each started by its own creator
// function, so a test reading the goroutine table from outside can check
// the wait reason, the stack and the creation site of every one:
//
//	goroutine entry        started by          blocks in
//	main.waitOnChan        main.spawnChanRecv  channel receive
//	main.sendOnChan        main.spawnChanSend  channel send
//	main.waitInSelect      main.spawnSelect    select on two channels
//	main.sleepLong         main.spawnSleep     time.Sleep(1h)
//	main.lockMutex         main.spawnMutex     sync.Mutex.Lock (main holds it)
//	main.waitGroup         main.spawnWaitGroup sync.WaitGroup.Wait
//	main.readPipe          main.spawnPipe      read of an os.Pipe (IO wait)
//	main.acceptConn        main.spawnAccept    TCP Accept (IO wait)
//	main.deepWait          main.spawnDeep      channel receive under 40 frames of main.recurse
//	main.labeledWait       main.spawnLabeled   channel receive inside pprof.Do(worker=labeled, shard=7)
//	main.manyLabelsWait    main.spawnManyLabels channel receive inside pprof.Do(k0=v0 ... k9=v9)
//	main.spin              main.spawnSpin      nothing: computes forever
//	main.crunch            main.spawnCrunch    nothing: computes forever through calls
//	                                           to main.mix, yielding (runtime.Gosched)
//	                                           after each round
//	main.parkedMany        main.spawnMany      channel receive (-n of them, default 0;
//	                                           with -labels, each in pprof.Do(n=<i>))
//	main.churn             main.spawnChurn     nothing for long (-churn of them, default 0):
//	                                           each starts goroutines one after the
//	                                           other that grow their stack (so it is
//	                                           copied), hand back a result and exit
//
// It prints "ready" once all of them have been started and have had time
// to block, then serves stdin: for every line read it answers
// "alive woken=W spins=S children=C", where W counts blocked goroutines
// that woke up (always 0 unless something disturbed the process), S is the
// spin counter (it grows while the process runs) and C the number of
// goroutines main.churn started. It exits when stdin closes.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"
)

var (
	woken int64 // atomic
	spins int64 // atomic
	// children counts the goroutines main.churn started (atomic).
	children int64
	started  sync.WaitGroup
	never    = make(chan int) // nobody ever sends on these channels
	never2   = make(chan int) // main.sendOnChan sends on it; nobody receives
	never3   = make(chan int)
	never4   = make(chan int)
	mu       sync.Mutex
	wg       sync.WaitGroup
)

func main() {
	many := flag.Int("n", 0, "extra goroutines parked on a channel receive")
	churners := flag.Int("churn", 0, "goroutines that keep creating short-lived goroutines")
	labeled := flag.Bool("labels", false, "give each -n goroutine its own pprof label set (n=<i>)")
	flag.Parse()
	mu.Lock() // held forever: main.lockMutex blocks on it
	wg.Add(1) // never Done: main.waitGroup blocks on it

	spawnChanRecv()
	spawnChanSend()
	spawnSelect()
	spawnSleep()
	spawnMutex()
	spawnWaitGroup()
	w := spawnPipe()
	ln := spawnAccept()
	spawnDeep()
	spawnLabeled()
	spawnManyLabels()
	spawnSpin()
	spawnCrunch()
	spawnMany(*many, *labeled)
	spawnChurn(*churners)
	started.Wait()
	time.Sleep(200 * time.Millisecond) // let the last ones reach their park
	fmt.Println("ready")

	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		fmt.Printf("alive woken=%d spins=%d children=%d\n", atomic.LoadInt64(&woken), atomic.LoadInt64(&spins), atomic.LoadInt64(&children))
	}
	w.Close()
	ln.Close()
}

//go:noinline
func spawnChanRecv() { started.Add(1); go waitOnChan() }

//go:noinline
func waitOnChan() {
	started.Done()
	<-never
	atomic.AddInt64(&woken, 1)
}

//go:noinline
func spawnChanSend() { started.Add(1); go sendOnChan() }

//go:noinline
func sendOnChan() {
	started.Done()
	never2 <- 1
	atomic.AddInt64(&woken, 1)
}

//go:noinline
func spawnSelect() { started.Add(1); go waitInSelect() }

//go:noinline
func waitInSelect() {
	started.Done()
	select {
	case <-never3:
	case <-never4:
	}
	atomic.AddInt64(&woken, 1)
}

//go:noinline
func spawnSleep() { started.Add(1); go sleepLong() }

//go:noinline
func sleepLong() {
	started.Done()
	time.Sleep(time.Hour)
	atomic.AddInt64(&woken, 1)
}

//go:noinline
func spawnMutex() { started.Add(1); go lockMutex() }

//go:noinline
func lockMutex() {
	started.Done()
	mu.Lock()
	atomic.AddInt64(&woken, 1)
}

//go:noinline
func spawnWaitGroup() { started.Add(1); go waitGroup() }

//go:noinline
func waitGroup() {
	started.Done()
	wg.Wait()
	atomic.AddInt64(&woken, 1)
}

//go:noinline
func spawnPipe() *os.File {
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "goparked:", err)
		os.Exit(1)
	}
	started.Add(1)
	go readPipe(r)
	return w
}

//go:noinline
func readPipe(r *os.File) {
	started.Done()
	var b [1]byte
	r.Read(b[:])
	atomic.AddInt64(&woken, 1)
}

//go:noinline
func spawnAccept() net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "goparked:", err)
		os.Exit(1)
	}
	started.Add(1)
	go acceptConn(ln)
	return ln
}

//go:noinline
func acceptConn(ln net.Listener) {
	started.Done()
	if c, err := ln.Accept(); err == nil {
		c.Close()
		atomic.AddInt64(&woken, 1)
	}
}

//go:noinline
func spawnDeep() { started.Add(1); go deepWait() }

//go:noinline
func deepWait() {
	started.Done()
	recurse(40)
}

//go:noinline
func recurse(n int) int {
	if n == 0 {
		<-never
		atomic.AddInt64(&woken, 1)
		return 0
	}
	return recurse(n-1) + 1
}

//go:noinline
func spawnLabeled() { started.Add(1); go labeledWait() }

//go:noinline
func labeledWait() {
	pprof.Do(context.Background(), pprof.Labels("worker", "labeled", "shard", "7"), func(context.Context) {
		started.Done()
		<-never
		atomic.AddInt64(&woken, 1)
	})
}

//go:noinline
func spawnManyLabels() { started.Add(1); go manyLabelsWait() }

// manyLabelsWait has more labels than one map bucket holds (Go 1.20–1.23
// keep labels in a map).
//
//go:noinline
func manyLabelsWait() {
	var kv []string
	for i := 0; i < 10; i++ {
		kv = append(kv, fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i))
	}
	pprof.Do(context.Background(), pprof.Labels(kv...), func(context.Context) {
		started.Done()
		<-never
		atomic.AddInt64(&woken, 1)
	})
}

//go:noinline
func spawnSpin() { started.Add(1); go spin() }

//go:noinline
func spin() {
	started.Done()
	x := uint64(1)
	for {
		for i := 0; i < 1000000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		if x == 0 {
			fmt.Println(x)
		}
		atomic.AddInt64(&spins, 1)
	}
}

//go:noinline
func spawnCrunch() { started.Add(1); go crunch() }

//go:noinline
func crunch() {
	started.Done()
	x := uint64(7)
	for {
		for i := 0; i < 1000; i++ {
			x = mix(x)
		}
		if x == 0 {
			fmt.Println(x)
		}
		runtime.Gosched()
	}
}

//go:noinline
func mix(x uint64) uint64 {
	for i := 0; i < 100; i++ {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
	}
	return x
}

//go:noinline
func spawnMany(n int, labeled bool) {
	for i := 0; i < n; i++ {
		started.Add(1)
		if labeled {
			go labeledMany(i)
		} else {
			go parkedMany()
		}
	}
}

//go:noinline
func labeledMany(i int) {
	pprof.Do(context.Background(), pprof.Labels("n", fmt.Sprint(i)), func(context.Context) { parkedMany() })
}

//go:noinline
func parkedMany() {
	started.Done()
	<-never
	atomic.AddInt64(&woken, 1)
}

//go:noinline
func spawnChurn(n int) {
	for i := 0; i < n; i++ {
		started.Add(1)
		go churn()
	}
}

//go:noinline
func churn() {
	started.Done()
	for i := 0; ; i++ {
		done := make(chan int)
		atomic.AddInt64(&children, 1)
		go churnChild(done, i%60)
		<-done
		if i%16 == 0 {
			time.Sleep(time.Duration(i%7) * 10 * time.Microsecond)
		}
	}
}

//go:noinline
func churnChild(done chan int, depth int) { done <- grow(depth) }

// grow uses about 300 bytes of stack per level: 60 levels need more than
// the initial 8 KiB stack, so the runtime copies the stack.
//
//go:noinline
func grow(n int) int {
	var pad [256]byte
	pad[n%256] = byte(n)
	if n == 0 {
		return int(pad[0])
	}
	return grow(n-1) + int(pad[n%256])
}
