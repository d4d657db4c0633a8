//go:build linux && amd64

package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/wallprof/wallprof/internal/collect"
	"github.com/wallprof/wallprof/internal/dump"
	"github.com/wallprof/wallprof/internal/linux"
)

func init() {
	commands["dump"] = command{order: 16, run: runDump,
		usage: "  wallprof dump [flags] -p PID              every thread's (and goroutine's) stack now, with its state and how long it has been in it\n"}
}

const dumpUsage = `Usage: wallprof dump [flags] -p PID

Prints every thread of a running process as it is now: its user and kernel
stack, its state (running, runnable, sleeping, disk, stopped...) and how
long it has been in that state, from the scheduler's own timestamps. For a
Go program, also every goroutine: its state, wait reason, how long it has
waited (where the runtime knows it: after a garbage collection found it
waiting), its stack and the go statement that created it, grouped by what
they are doing, largest groups first (--all: each one on its own).

The process is not stopped, traced or signalled: threads are read by a BPF
task iterator, goroutines through the process's memory. A thread on a CPU
has no kernel stack and an approximate user stack (it keeps running while
it is read). Needs root (or CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE).

Flags:
`

func runDump(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("dump", dumpUsage, stdout, stderr)
	var pid int
	fs.IntVar(&pid, "p", 0, "dump the running process `PID`")
	fs.IntVar(&pid, "pid", 0, "same as -p")
	asJSON := fs.Bool("json", false, "write the dump as JSON (schema "+dump.Format+")")
	all := fs.Bool("all", false, "list every goroutine on its own rather than grouped")
	if code, done := fs.parse(args); done {
		return code
	}
	switch {
	case fs.NArg() > 0:
		return fs.usageError("unexpected argument %q: give the process with -p PID.", fs.Arg(0))
	case pid == 0:
		return fs.usageError("say which process to dump: -p PID.")
	case pid < 0:
		return fs.usageError("-p %d is not a process ID.", pid)
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "wallprof dump: "+format+"\n", a...)
		return exitError
	}
	if !linux.ProcessExists(pid) {
		return fail("no process with PID %d is running.", pid)
	}
	if msg := dumpPreflight(); msg != "" {
		return fail("%s", msg)
	}
	d, err := dump.Take(pid, dump.Options{All: *all})
	switch {
	case errors.Is(err, dump.ErrNoSuchProcess):
		return fail("process %d exited during the dump.", pid)
	case err != nil && collect.IsPermission(err):
		return fail("the kernel refused to load the dump's BPF program (%v): run it as root.", err)
	case err != nil:
		return fail("%v.", err)
	}
	if *asJSON {
		err = dump.WriteJSON(stdout, d)
	} else {
		err = dump.WriteText(stdout, d, *all)
	}
	if err != nil {
		return fail("%v.", err)
	}
	return exitOK
}

// dumpPreflight returns a one-sentence explanation of why a dump cannot
// work here, or "".
func dumpPreflight() string {
	if err := linux.CheckPrivileges(); err != nil {
		if errors.Is(err, linux.ErrNoPrivileges) {
			return "a dump needs root, or the CAP_BPF, CAP_PERFMON and CAP_SYS_PTRACE capabilities: run it with sudo."
		}
		return err.Error()
	}
	if err := linux.CheckBTF(); err != nil {
		return "this kernel does not expose its BTF type information (/sys/kernel/btf/vmlinux is missing): use a kernel built with CONFIG_DEBUG_INFO_BTF=y."
	}
	return ""
}
