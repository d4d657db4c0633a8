// Command timeit runs a program that does not report its own time (Debian's
// stockfish) and prints, on stderr, the report line the bench workloads
// print at exit, for bench/cmd/overhead:
//
//	NAME: iters=1 elapsed_ns=.. user_ns=.. sys_ns=.. start_mono_ns=.. end_mono_ns=..
//
// Usage: timeit NAME -- COMMAND [ARG...]. Its exit status is the command's.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

func mono() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

func main() {
	if len(os.Args) < 4 || os.Args[2] != "--" {
		fmt.Fprintln(os.Stderr, "usage: timeit NAME -- COMMAND [ARG...]")
		os.Exit(2)
	}
	name, argv := os.Args[1], os.Args[3:]
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	start := mono()
	err := cmd.Run()
	end := mono()
	if cmd.ProcessState == nil {
		fmt.Fprintf(os.Stderr, "timeit: %v\n", err)
		os.Exit(1)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	fmt.Fprintf(os.Stderr, "%s: iters=1 elapsed_ns=%d user_ns=%d sys_ns=%d start_mono_ns=%d end_mono_ns=%d\n",
		name, end-start, ru.Utime.Nano(), ru.Stime.Nano(), start, end)
	os.Exit(cmd.ProcessState.ExitCode())
}
