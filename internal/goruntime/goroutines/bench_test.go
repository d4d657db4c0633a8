package goroutines

import (
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/groundtruth"
)

// BenchmarkSnapshot measures one Snapshot of goparked with about n parked
// goroutines (with their own pprof labels in the "labeled" case), reading memory with process_vm_readv ("vm") and with pread
// on /proc/PID/mem ("pread"), with and without the stack cache. It reports
// the goroutines read and the system calls made per snapshot.
//
//	go test -run '^$' -bench Snapshot ./internal/goruntime/goroutines
func BenchmarkSnapshot(b *testing.B) {
	requireRoot(b)
	bin := groundtruth.BuildGo(b, groundtruth.WorkloadDir(b, "goparked"), true, "")
	for _, n := range []int{0, 1000, 10000, -1000} {
		args, name := []string{"-n", fmt.Sprint(n)}, fmt.Sprintf("goroutines=%d", n)
		if n < 0 { // each with its own pprof labels
			args, name = []string{"-n", fmt.Sprint(-n), "-labels"}, fmt.Sprintf("goroutines=%d,labeled", -n)
		}
		w := startWorkload(b, bin, args...)
		for _, mode := range []string{"vm", "vm-nocache", "pread-nocache"} {
			b.Run(name+"/"+mode, func(b *testing.B) {
				r, err := Open(w.cmd.Process.Pid)
				if err != nil {
					b.Fatal(err)
				}
				defer r.Close()
				if mode != "vm" {
					r.SetStackCache(0)
				}
				if mode == "pread-nocache" {
					f, err := os.Open(fmt.Sprintf("/proc/%d/mem", w.cmd.Process.Pid))
					if err != nil {
						b.Fatal(err)
					}
					r.mem = &merged{inner: &fileReader{f: f}}
				}
				var snap Snapshot
				calls0, cpu0 := r.Syscalls(), cpuTime(b)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if snap, err = r.Snapshot(); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
				b.ReportMetric(float64(len(snap.Goroutines)), "goroutines")
				b.ReportMetric(float64(r.Syscalls()-calls0)/float64(b.N), "syscalls/op")
				b.ReportMetric(float64(snap.Dropped), "dropped")
				if snap.LabelErrors != 0 {
					b.Fatalf("%d label errors", snap.LabelErrors)
				}
			})
		}
	}
}

// cpuTime returns the user and system CPU time of this process.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
