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
	"sort"
	"strings"
	"syscall"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command failed
	exitUsage = 2 // bad flags or arguments
)

// command is one subcommand. Each lives in its own file and registers itself
// in commands from an init function.
type command struct {
	order int    // position in the usage text
	usage string // "wallprof NAME ..." line(s) of the usage text
	run   func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

var commands = map[string]command{}

func usage() string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		oi, oj := commands[names[i]].order, commands[names[j]].order
		return oi < oj || oi == oj && names[i] < names[j]
	})
	var b strings.Builder
	b.WriteString("wallprof: where does the time go? A wall-clock profiler for Linux.\n\nUsage:\n")
	for _, n := range names {
		b.WriteString(commands[n].usage)
	}
	b.WriteString("  wallprof version\n\nRun 'wallprof help COMMAND' (or 'wallprof COMMAND --help') for the flags of a command.\n")
	return b.String()
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return exitUsage
	}
	switch args[0] {
	case "version", "--version":
		fmt.Fprintln(stdout, printVersion())
		return exitOK
	case "help", "-h", "--help":
		return help(ctx, args[1:], stdout, stderr)
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "wallprof: unknown command %q; run 'wallprof help' for the list.\n", args[0])
		return exitUsage
	}
	return c.run(ctx, args[1:], stdout, stderr)
}

// help prints the top-level usage, or with a command's name that command's
// usage ('wallprof help record' is 'wallprof record --help'), on stdout.
func help(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stdout, usage())
		return exitOK
	}
	c, ok := commands[args[0]]
	if !ok || len(args) > 1 {
		if ok {
			fmt.Fprintf(stderr, "wallprof help: give one command, e.g. 'wallprof help %s'.\n", args[0])
		} else {
			fmt.Fprintf(stderr, "wallprof help: unknown command %q; run 'wallprof help' for the list.\n", args[0])
		}
		return exitUsage
	}
	return c.run(ctx, []string{"--help"}, stdout, stderr)
}
