// Command wallprof records and reports wall-clock profiles of Linux
// processes: on-CPU, waiting for a CPU and blocked time, per thread, with
// stacks. See README.md.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command failed
	exitUsage = 2 // bad flags or arguments
)

const usage = `wallprof: where does the time go? A wall-clock profiler for Linux.

Usage:
  wallprof record [flags] -p PID            record a running process
  wallprof record [flags] -- COMMAND [ARGS] launch a command and record it (and its children)
  wallprof report [flags] FILE              print a text (or JSON) summary of a profile
  wallprof version

Run 'wallprof COMMAND --help' for the flags of a command.
`

var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	switch args[0] {
	case "record":
		return runRecord(ctx, args[1:], stdout, stderr)
	case "report":
		return runReport(args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "wallprof", version)
		return exitOK
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		fmt.Fprintf(stderr, "wallprof: unknown command %q; run 'wallprof help' for the list.\n", args[0])
		return exitUsage
	}
}
