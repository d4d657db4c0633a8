// Command timerfloor runs a command while the sampling timers that wallprof
// uses fire on every CPU, and does nothing else: it measures the floor that
// any sampler of the same frequency pays on this machine, the cost of the
// timer interrupts themselves.
//
//	timerfloor -F 999 [-bpf] [-hooks LIST] -- COMMAND [ARG...]
//
// It opens a cpu-clock software perf event on every online CPU for all tasks
// (as wallprof record does), firing every 1/F seconds, and enables it. With
// -bpf an empty BPF program (return 0) is attached to each event, which adds
// the dispatch of a perf_event program to every interrupt; without it the
// kernel's overflow handler finds no ring buffer and drops the sample. It
// then runs the command and exits with its status. Run as root.
//
// With -hooks, an empty BPF program (return 0) is also attached to each of
// the scheduler tracepoints listed (tp_btf, as wallprof attaches its own):
// the hook floor, what any program on those tracepoints costs before it
// does anything. The default list is the tracepoints of wallprof's default
// mode (accounting at each thread's resumption).
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/wallprof/wallprof/internal/linux"
)

func main() {
	freq := flag.Int("F", 999, "timer frequency in Hz on every CPU")
	withBPF := flag.Bool("bpf", false, "attach an empty BPF program to every timer")
	cpuList := flag.String("cpus", "", "CPUs to open the timer on, as in /sys/devices/system/cpu/online (default: all online CPUs)")
	hooks := flag.String("hooks", "", "also attach an empty program to these tracepoints (comma-separated; \"default\": "+defaultHooks+")")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: timerfloor [-F HZ] [-bpf] -- COMMAND [ARG...]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 || *freq < 1 {
		flag.Usage()
		os.Exit(2)
	}
	list := *hooks
	if list == "default" {
		list = defaultHooks
	}
	closeHooks, err := attachHooks(list)
	if err != nil {
		fmt.Fprintf(os.Stderr, "timerfloor: %v\n", err)
		os.Exit(1)
	}
	code, err := run(*freq, *withBPF, *cpuList, flag.Args())
	closeHooks()
	if err != nil {
		fmt.Fprintf(os.Stderr, "timerfloor: %v\n", err)
		os.Exit(1)
	}
	os.Exit(code)
}

// defaultHooks are the tracepoints of wallprof's default mode (see
// internal/collect/attach.go): the thread's resumption, new threads, forks,
// exits and the tasks' release (a thread's exit path).
const defaultHooks = "sched_exit_tp,sched_wakeup_new,sched_process_fork,sched_process_exit,sched_process_free"

// attachHooks attaches an empty tp_btf program to each tracepoint in list
// and returns what detaches them.
func attachHooks(list string) (func(), error) {
	var closers []func() error
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	for _, tp := range strings.Split(list, ",") {
		if tp = strings.TrimSpace(tp); tp == "" {
			continue
		}
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
			Name:         "hookfloor",
			Type:         ebpf.Tracing,
			AttachType:   ebpf.AttachTraceRawTp,
			AttachTo:     tp,
			License:      "GPL",
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
		})
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("load an empty program for %s: %w", tp, err)
		}
		l, err := link.AttachTracing(link.TracingOptions{Program: prog})
		if err != nil {
			prog.Close()
			closeAll()
			return nil, fmt.Errorf("attach an empty program to %s: %w", tp, err)
		}
		closers = append(closers, l.Close, prog.Close)
	}
	return closeAll, nil
}

func run(freq int, withBPF bool, cpuList string, argv []string) (int, error) {
	var prog *ebpf.Program
	if withBPF {
		var err error
		prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{
			Name:         "timerfloor",
			Type:         ebpf.PerfEvent,
			License:      "GPL",
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
		})
		if err != nil {
			return 0, fmt.Errorf("load the empty BPF program: %w", err)
		}
		defer prog.Close()
	}
	cpus, err := linux.OnlineCPUs()
	if cpuList != "" {
		cpus, err = linux.ParseCPUList(cpuList)
	}
	if err != nil {
		return 0, err
	}
	period := uint64(1e9) / uint64(freq)
	// Started period/CPUs apart, as wallprof's (linux.OpenCPUClocks).
	gap := linux.StaggerGap(time.Duration(period), len(cpus))
	for i, cpu := range cpus {
		if i > 0 {
			time.Sleep(gap)
		}
		fd, err := linux.OpenCPUClock(cpu, period)
		if err != nil {
			return 0, err
		}
		defer unix.Close(fd)
		if prog != nil {
			err = linux.AttachPerfBPF(fd, prog.FD())
		} else if err = unix.IoctlSetInt(fd, unix.PERF_EVENT_IOC_ENABLE, 0); err != nil {
			err = fmt.Errorf("enable perf event: %w", err)
		}
		if err != nil {
			return 0, err
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	if err != nil {
		return 0, err
	}
	return 0, nil
}
