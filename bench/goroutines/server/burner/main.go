// Command burner keeps a CPU busy for a given share of the time, in short
// bursts: the stand-in for a profiler's work on the load generator's CPU,
// without anything that touches the server (bench/goroutines/pinned.sh).
package main

import (
	"flag"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	share := flag.Float64("share", 0.02, "the fraction of one CPU to take")
	burst := flag.Duration("burst", 500*time.Microsecond, "each burst's length")
	flag.Parse()
	period := time.Duration(float64(*burst) / *share)
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(period)
	defer tick.Stop()
	x := uint64(1)
	for {
		select {
		case <-stop:
			if x == 0 {
				println(x)
			}
			return
		case <-tick.C:
		}
		for end := time.Now().Add(*burst); time.Now().Before(end); {
			for i := 0; i < 1000; i++ {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
			}
		}
	}
}
