//go:build !(linux && amd64)

package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
)

// Recording needs Linux on x86-64 (eBPF, and a BPF object built for it):
// elsewhere the commands that record say so, and the offline commands
// (report, flame, diff, view, convert, gctrace, escapes, trace, load) work
// as anywhere.
func init() {
	for _, c := range []struct {
		name, usage string
		order       int
	}{
		{"record", "  wallprof record [flags] -p PID            record a running process (Linux on x86-64 only)\n", 10},
		{"top", "  wallprof top [flags] -p PID               live view of a process (Linux on x86-64 only)\n", 15},
		{"dump", "  wallprof dump [flags] -p PID              every thread's stack now (Linux on x86-64 only)\n", 16},
		{"latency", "  wallprof latency [flags] -p PID FUNC...   call durations of a function, safely (Linux on x86-64 only)\n", 18},
		{"agent", "  wallprof agent [flags]                    continuous profiling, pushed to OTLP or Pyroscope (Linux on x86-64 only)\n", 17},
		{"run", "  wallprof run [flags] -- SERVER [ARGS]     the whole investigation of a Go server (Linux on x86-64 only)\n", 85},
	} {
		commands[c.name] = command{order: c.order, usage: c.usage, run: func(_ context.Context, args []string, stdout, stderr io.Writer) int {
			return needsLinux(c.name, args, stdout, stderr)
		}}
	}
}

// needsLinux is what a recording command does where it cannot record.
func needsLinux(name string, args []string, stdout, stderr io.Writer) int {
	msg := fmt.Sprintf("recording needs Linux on x86-64; this wallprof is built for %s/%s. The offline commands (report, flame, diff, view, convert, gctrace, escapes, trace, load) work here.", runtime.GOOS, runtime.GOARCH)
	if len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
		fmt.Fprintf(stdout, "Usage: wallprof %s [flags]\n\n%s\n\nFlags:\n", name, msg)
		return exitOK
	}
	fmt.Fprintf(stderr, "wallprof %s: %s\n", name, msg)
	return exitError
}
