package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// The --bursts mode: goroutines whose phases are all shorter than the
// default sampling period (10.1 ms at 99 Hz), as in a request handler, and
// more of them runnable than there are CPUs:
//
//	main.burstHandler   loops over 4 phases:                 3 goroutines
//	  main.burstCompute   computes for about 3 ms of CPU time
//	  main.burstSleep     time.Sleep(5ms)
//	  main.burstChan      receives from a channel that its feeder sends to
//	                      2 ms after it asked
//	  main.burstPipe      reads a pipe (netpoller IO wait) that its writer
//	                      writes to 2 ms after it asked
//	main.burstFeeder    per handler: waits for a request,    3 goroutines
//	                    sleeps 2 ms, sends
//	main.burstWriter    per handler: the same, writes the    3 goroutines
//	                    pipe
//	main.crowd          loops over 2 phases:                 4 goroutines
//	  main.crowdCompute   computes for about 2 ms of CPU time
//	  main.crowdSleep     time.Sleep(1ms)
//
// Each phase's wall time is summed per group and phase; the compute phases
// also report the CPU time they used (cpu_ns), measured on the thread's
// CPU clock (see burner). No phase makes a system call of its own but to
// wait: a profiler that leaves out time in system calls the runtime does
// not see (raw ones) would otherwise lose time the workload counts.
const (
	burstComputeCPU = 3 * time.Millisecond
	burstSleepTime  = 5 * time.Millisecond
	burstReplyAfter = 2 * time.Millisecond
	crowdComputeCPU = 2 * time.Millisecond
	crowdSleepTime  = time.Millisecond
)

// phases accumulates one goroutine's phases.
type phases map[string]phase

func (ps phases) add(name string, wall, cpu time.Duration) {
	p := ps[name]
	p.WallNS += int64(wall)
	p.CPUNS += int64(cpu)
	ps[name] = p
}

// runPhases runs one goroutine's body, which fills in its phases, and
// records its time.
func (s *spawner) runPhases(g *group, body func(phases)) {
	defer s.wg.Done()
	ps := phases{}
	t := time.Now()
	body(ps)
	g.addPhases(time.Since(t), ps)
}

// runBursts starts the --bursts groups and waits for all of them.
func runBursts(d time.Duration) ([]*group, error) {
	s := &spawner{deadline: time.Now().Add(d)}
	const handlers = 3
	peers := make([]*burstPeer, handlers)
	for i := range peers {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, fmt.Errorf("create pipe: %w", err)
		}
		peers[i] = &burstPeer{chanReq: make(chan struct{}, 1), chanResp: make(chan int),
			pipeReq: make(chan struct{}, 1), r: r, w: w}
	}
	startBurstHandler(s, peers)
	startBurstFeeder(s, peers)
	startBurstWriter(s, peers)
	startCrowd(s, 4)
	s.wg.Wait()
	for _, p := range peers {
		p.r.Close()
	}
	return s.groups, nil
}

// burstPeer is what a handler shares with its feeder and its writer.
type burstPeer struct {
	chanReq  chan struct{} // handler -> feeder: send to chanResp in 2 ms
	chanResp chan int
	pipeReq  chan struct{} // handler -> writer: write to w in 2 ms
	r, w     *os.File
}

func startBurstHandler(s *spawner, peers []*burstPeer) {
	g := s.group("main.burstHandler", len(peers))
	for _, p := range peers {
		go s.runPhases(g, func(ps phases) { burstHandler(p, s.deadline, ps) })
	}
}

func startBurstFeeder(s *spawner, peers []*burstPeer) {
	g := s.group("main.burstFeeder", len(peers))
	for _, p := range peers {
		go s.runPhases(g, func(ps phases) {
			t := time.Now()
			burstFeeder(p)
			ps.add("main.burstFeeder", time.Since(t), 0)
		})
	}
}

func startBurstWriter(s *spawner, peers []*burstPeer) {
	g := s.group("main.burstWriter", len(peers))
	for _, p := range peers {
		go s.runPhases(g, func(ps phases) {
			t := time.Now()
			burstWriter(p)
			ps.add("main.burstWriter", time.Since(t), 0)
		})
	}
}

func startCrowd(s *spawner, n int) {
	g := s.group("main.crowd", n)
	for i := 0; i < n; i++ {
		go s.runPhases(g, func(ps phases) { crowd(s.deadline, ps) })
	}
}

// burstHandler runs its four phases until the deadline, then tells its
// feeder and writer to stop.
//
// A phase begins when the clock is read right before its function is
// called and ends when that function reads the clock as its last act, so
// a goroutine held up at either boundary (preempted in the call to
// time.Now, say) is in the phase by the workload's clock exactly when its
// stack has the phase's function; the bookkeeping between phases is in
// none.
//
//go:noinline
func burstHandler(p *burstPeer, deadline time.Time, ps phases) {
	defer close(p.pipeReq)
	defer close(p.chanReq)
	buf := make([]byte, 1)
	b := newBurner(burstComputeCPU)
	for time.Now().Before(deadline) {
		b.run(ps, "main.burstCompute", burstCompute)
		t := time.Now()
		end := burstSleep()
		ps.add("main.burstSleep", end.Sub(t), 0)
		t = time.Now()
		end = burstChan(p)
		ps.add("main.burstChan", end.Sub(t), 0)
		t = time.Now()
		end = burstPipe(p, buf)
		ps.add("main.burstPipe", end.Sub(t), 0)
	}
}

//go:noinline
func burstCompute(n int) time.Time {
	spin(n)
	return time.Now()
}

//go:noinline
func burstSleep() time.Time {
	time.Sleep(burstSleepTime)
	return time.Now()
}

//go:noinline
func burstChan(p *burstPeer) time.Time {
	p.chanReq <- struct{}{}
	<-p.chanResp
	return time.Now()
}

//go:noinline
func burstPipe(p *burstPeer, buf []byte) time.Time {
	p.pipeReq <- struct{}{}
	if _, err := io.ReadFull(p.r, buf); err != nil {
		panic(err)
	}
	return time.Now()
}

//go:noinline
func burstFeeder(p *burstPeer) {
	for range p.chanReq {
		time.Sleep(burstReplyAfter)
		p.chanResp <- 1
	}
}

//go:noinline
func burstWriter(p *burstPeer) {
	defer p.w.Close()
	for range p.pipeReq {
		time.Sleep(burstReplyAfter)
		if _, err := p.w.Write([]byte{'x'}); err != nil {
			panic(err)
		}
	}
}

// crowd runs its two phases until the deadline (boundaries as in
// burstHandler).
//
//go:noinline
func crowd(deadline time.Time, ps phases) {
	b := newBurner(crowdComputeCPU)
	for time.Now().Before(deadline) {
		b.run(ps, "main.crowdCompute", crowdCompute)
		t := time.Now()
		end := crowdSleep()
		ps.add("main.crowdSleep", end.Sub(t), 0)
	}
}

//go:noinline
func crowdCompute(n int) time.Time {
	spin(n)
	return time.Now()
}

//go:noinline
func crowdSleep() time.Time {
	time.Sleep(crowdSleepTime)
	return time.Now()
}

// threadCPU reads the CPU clock of the calling thread.
func threadCPU() time.Duration {
	var ts syscall.Timespec
	// CLOCK_THREAD_CPUTIME_ID = 3.
	if _, _, e := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, 3, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		panic(e)
	}
	return time.Duration(ts.Nano())
}

// spin computes for n iterations.
//
//go:noinline
func spin(n int) {
	x := uint64(88172645463325252)
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	sink.Add(x)
}

// burner runs a compute phase of one goroutine: n iterations of spin,
// adjusted after each phase towards want of CPU time.
type burner struct {
	want time.Duration
	n    int
}

// newBurner measures how many iterations take want of CPU time.
func newBurner(want time.Duration) *burner {
	b := &burner{want: want, n: 10000}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for {
		c0 := threadCPU()
		spin(b.n)
		if cpu := threadCPU() - c0; cpu >= want/4 {
			b.n = int(float64(b.n) * float64(want) / float64(cpu))
			return b
		}
		b.n *= 2
	}
}

// run runs the compute phase fn(n) and records it as name: from the clock
// read before fn to the clock fn reads last, and the CPU time the thread
// used meanwhile. The goroutine is locked to its thread from before the
// first reading of the CPU clock to after the second, so that the thread's
// clock is the goroutine's (it stays on the thread, and nothing else runs
// there even if the runtime preempts it); the two readings, system calls,
// are outside the phase, so the phase makes none.
func (b *burner) run(ps phases, name string, fn func(n int) time.Time) {
	runtime.LockOSThread()
	c0 := threadCPU()
	t := time.Now()
	end := fn(b.n)
	cpu := threadCPU() - c0
	runtime.UnlockOSThread()
	ps.add(name, end.Sub(t), cpu)
	if cpu > 0 {
		// Halfway towards want: one phase's CPU time is noisy.
		f := (1 + float64(b.want)/float64(cpu)) / 2
		b.n = max(int(float64(b.n)*min(max(f, 0.5), 2)), 1)
	}
}
