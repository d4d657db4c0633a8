// Command server is the workload of bench/goroutines: a small HTTP service
// with N parked background goroutines, as a real service has (connection
// readers blocked on channels, tickers, workers waiting on a condition or a
// lock). Built with -tags fgprof it also runs fgprof (see fgprof.go).
//
//	server --addr 127.0.0.1:0 --goroutines 10000
//
// It prints "listening ADDR" and then "ready goroutines=G" on stdout once the
// background goroutines are parked, and stops on SIGTERM or SIGINT.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/metrics"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// startHooks run after the listener is up and the goroutines are parked;
// fgprof.go adds one. stopHooks run on SIGTERM, before exit.
var (
	startHooks []func()
	stopHooks  []func()
)

type order struct {
	ID       int64             `json:"id"`
	Customer string            `json:"customer"`
	Items    []item            `json:"items"`
	Tags     map[string]string `json:"tags"`
	Total    float64           `json:"total"`
	Digest   string            `json:"digest"`
}

type item struct {
	SKU   string  `json:"sku"`
	Qty   int     `json:"qty"`
	Price float64 `json:"price"`
}

type job struct {
	data  []byte
	reply chan [32]byte
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	n := flag.Int("goroutines", 100, "number of parked background goroutines")
	hashRounds := flag.Int("hash-rounds", 40, "SHA-256 rounds per request (the per-request CPU work)")
	workers := flag.Int("workers", 4, "worker-pool goroutines that hash for the handler")
	flag.Parse()

	jobs := make(chan job)
	for i := 0; i < *workers; i++ {
		go worker(jobs, *hashRounds)
	}

	stop := make(chan struct{})
	parked := startBackground(*n, stop)

	var reqs int64
	var reqMu sync.Mutex
	// The handler's own time per request, from its first line to the
	// response written: the server-side latency, which a load generator
	// sharing a CPU with the profiler cannot blur (/stats).
	var took []time.Duration
	mux := http.NewServeMux()
	mux.HandleFunc("/order", func(w http.ResponseWriter, r *http.Request) {
		t0 := time.Now()
		defer func() {
			d := time.Since(t0)
			reqMu.Lock()
			took = append(took, d)
			reqMu.Unlock()
		}()
		id, _ := strconv.ParseInt(r.URL.Query().Get("id"), 10, 64)
		reqMu.Lock()
		reqs++
		id += reqs
		reqMu.Unlock()
		o := order{
			ID:       id,
			Customer: "customer-" + strconv.FormatInt(id%1000, 10),
			Tags:     map[string]string{"region": "eu-west", "channel": "web", "tier": "gold"},
		}
		for i := 0; i < 8; i++ {
			it := item{SKU: fmt.Sprintf("sku-%04d", (id+int64(i))%9973), Qty: 1 + i%3, Price: 9.99 + float64(i)}
			o.Items = append(o.Items, it)
			o.Total += float64(it.Qty) * it.Price
		}
		body, _ := json.Marshal(o)
		// A round trip through the worker pool: hand the bytes to a worker
		// goroutine and wait for its digest.
		rep := make(chan [32]byte, 1)
		jobs <- job{data: body, reply: rep}
		sum := <-rep
		o.Digest = hex.EncodeToString(sum[:])
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(o)
	})
	// /stats: the handler times since the last /stats?reset=1 (count,
	// p50, p90, p99, max in ns) and the process's CPU time so far (user
	// and system, ns), as JSON.
	mux.HandleFunc("/stats", func(w http.ResponseWriter, r *http.Request) {
		reqMu.Lock()
		ds := append([]time.Duration(nil), took...)
		if r.URL.Query().Get("reset") == "1" {
			took = took[:0]
		}
		reqMu.Unlock()
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		q := func(p float64) int64 {
			if len(ds) == 0 {
				return 0
			}
			return int64(ds[min(len(ds)-1, int(p*float64(len(ds))))])
		}
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"count":%d,"p50_ns":%d,"p90_ns":%d,"p99_ns":%d,"max_ns":%d,"cpu_ns":%d}`+"\n",
			len(ds), q(0.50), q(0.90), q(0.99), q(1), int64(cpu))
	})
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "ok goroutines=%d\n", runtime.NumGoroutine())
	})

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	fmt.Printf("listening %s\n", ln.Addr())

	parked.Wait()
	for _, h := range startHooks {
		h()
	}
	fmt.Printf("ready goroutines=%d\n", runtime.NumGoroutine())

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	srv.Shutdown(ctx)
	cancel()
	close(stop)
	for _, h := range stopHooks {
		h()
	}
	printPauses()
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	reqMu.Lock()
	fmt.Printf("cpu: user=%.3fs sys=%.3fs requests=%d\n",
		time.Duration(ru.Utime.Nano()).Seconds(), time.Duration(ru.Stime.Nano()).Seconds(), reqs)
	reqMu.Unlock()
}

// printPauses prints the runtime's stop-the-world pauses over the process's
// life (runtime/metrics, Go 1.22+): "other" are those not for the GC, such as
// runtime.GoroutineProfile's. Quantiles and the max are bucket upper bounds.
func printPauses() {
	for _, kind := range []string{"other", "gc"} {
		s := []metrics.Sample{{Name: "/sched/pauses/total/" + kind + ":seconds"}}
		metrics.Read(s)
		if s[0].Value.Kind() != metrics.KindFloat64Histogram {
			continue
		}
		h := s[0].Value.Float64Histogram()
		var n, total uint64
		var sum float64
		for i, c := range h.Counts {
			n += c
			if c > 0 {
				sum += float64(c) * h.Buckets[i] // lower bound: an underestimate
			}
		}
		q := func(f float64) float64 {
			want := uint64(f*float64(n) + 0.5)
			if want == 0 {
				want = 1
			}
			total = 0
			for i, c := range h.Counts {
				total += c
				if total >= want {
					return h.Buckets[i+1]
				}
			}
			return 0
		}
		if n == 0 {
			fmt.Printf("stw-pauses %s: count=0\n", kind)
			continue
		}
		fmt.Printf("stw-pauses %s: count=%d p50<=%.3fms p99<=%.3fms max<=%.3fms total>=%.1fms\n",
			kind, n, q(0.5)*1e3, q(0.99)*1e3, q(1)*1e3, sum*1e3)
	}
}

func worker(jobs <-chan job, rounds int) {
	for j := range jobs {
		sum := sha256.Sum256(j.data)
		for i := 1; i < rounds; i++ {
			sum = sha256.Sum256(append(sum[:], j.data[:64]...))
		}
		j.reply <- sum
	}
}

// startBackground starts n goroutines parked the way a service's are:
//   - 85% block on a channel receive (40%) or a select on a channel and
//     stop (45%) (idle connections, subscribers, queue consumers);
//   - 5% loop in time.Sleep of 10-100 ms (pollers, tickers);
//   - 5% wait on a sync.Cond that is broadcast once a second;
//   - 5% wait for a mutex that one goroutine holds, releasing it briefly
//     every 50 ms, then sleep 50-100 ms.
//
// The returned WaitGroup is done when every goroutine has started.
func startBackground(n int, stop <-chan struct{}) *sync.WaitGroup {
	var started sync.WaitGroup
	started.Add(n)
	rng := rand.New(rand.NewSource(1))

	var mu sync.Mutex
	cond := sync.NewCond(&mu)
	var lock sync.Mutex
	var generation int
	go func() { // wakes the condition waiters once a second
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				mu.Lock()
				generation = -1
				cond.Broadcast()
				mu.Unlock()
				return
			case <-t.C:
				mu.Lock()
				generation++
				cond.Broadcast()
				mu.Unlock()
			}
		}
	}()
	lock.Lock()
	go func() { // holds the contended lock, letting it go briefly
		held := true
		for {
			select {
			case <-stop:
				if held {
					lock.Unlock()
				}
				return
			case <-time.After(50 * time.Millisecond):
				lock.Unlock()
				time.Sleep(100 * time.Microsecond)
				lock.Lock()
			}
		}
	}()

	conns := make([]chan []byte, 0, n)
	for i := 0; i < n; i++ {
		switch p := i % 20; {
		case p < 8: // channel receive
			c := make(chan []byte)
			conns = append(conns, c)
			go func() {
				started.Done()
				for b := range c {
					_ = b
				}
			}()
		case p < 17: // select on a channel and stop
			c := make(chan []byte)
			conns = append(conns, c)
			go func() {
				started.Done()
				for {
					select {
					case <-c:
					case <-stop:
						return
					}
				}
			}()
		case p < 18: // sleep loop, 10-100 ms
			d := time.Duration(10+rng.Intn(91)) * time.Millisecond
			go func() {
				started.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					time.Sleep(d)
				}
			}()
		case p < 19: // sync.Cond
			go func() {
				started.Done()
				mu.Lock()
				for generation >= 0 {
					cond.Wait()
				}
				mu.Unlock()
			}()
		default: // contended mutex
			go func() {
				started.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					lock.Lock()
					lock.Unlock()
					time.Sleep(time.Duration(50+rng2()) * time.Millisecond)
				}
			}()
		}
	}
	go func() { // close the connection channels on stop
		<-stop
		for _, c := range conns {
			close(c)
		}
	}()
	return &started
}

var rngMu sync.Mutex
var rngShared = rand.New(rand.NewSource(2))

func rng2() int {
	rngMu.Lock()
	defer rngMu.Unlock()
	return rngShared.Intn(50)
}
