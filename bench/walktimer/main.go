// Command walktimer is the probe of doc/walk-timer.md: it loads
// walktimer.bpf.o (run.sh builds it), starts a BPF timer that walks the
// threads of process PID every 1.26 ms, and after 4 s prints how often it
// fired, the threads it visited per firing and its mean time.
//
// Usage: walktimer OBJECT PID
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/cilium/ebpf"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: walktimer OBJECT PID")
		os.Exit(2)
	}
	pid, err := strconv.Atoi(os.Args[2])
	if err != nil {
		fmt.Fprintf(os.Stderr, "walktimer: %q is not a PID\n", os.Args[2])
		os.Exit(2)
	}
	if err := run(os.Args[1], pid); err != nil {
		fmt.Fprintln(os.Stderr, "walktimer:", err)
		os.Exit(1)
	}
}

func run(object string, pid int) error {
	spec, err := ebpf.LoadCollectionSpec(object)
	if err != nil {
		return err
	}
	if err := spec.Variables["target_pid"].Set(uint32(pid)); err != nil {
		return err
	}
	var objs struct {
		Start  *ebpf.Program  `ebpf:"start"`
		Timers *ebpf.Map      `ebpf:"timers"` // held: a timer's map must be (else bpf_timer_init: EPERM)
		Visits *ebpf.Variable `ebpf:"visits"`
		Fires  *ebpf.Variable `ebpf:"fires"`
		NS     *ebpf.Variable `ebpf:"ns_sum"`
		RI     *ebpf.Variable `ebpf:"r_init"`
		RC     *ebpf.Variable `ebpf:"r_cb"`
		RS     *ebpf.Variable `ebpf:"r_start"`
	}
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return fmt.Errorf("load: %w", err)
	}
	if _, err := objs.Start.Run(&ebpf.RunOptions{}); err != nil {
		return fmt.Errorf("run the starter: %w", err)
	}
	var ri, rc, rs int64
	objs.RI.Get(&ri)
	objs.RC.Get(&rc)
	objs.RS.Get(&rs)
	if ri != 0 || rc != 0 || rs != 0 {
		return fmt.Errorf("bpf_timer_init %d, bpf_timer_set_callback %d, bpf_timer_start %d", ri, rc, rs)
	}
	time.Sleep(4 * time.Second)
	var v, f, ns uint64
	objs.Visits.Get(&v)
	objs.Fires.Get(&f)
	objs.NS.Get(&ns)
	if f == 0 {
		return fmt.Errorf("the timer never fired")
	}
	fmt.Printf("fired %d times in 4 s, %.1f threads a firing, callback %.2f µs on average (%.0f ns a thread)\n",
		f, float64(v)/float64(f), float64(ns)/float64(f)/1e3, float64(ns)/float64(max(v, 1)))
	return nil
}
