package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/wallprof/wallprof/internal/goruntime/gctrace"
)

func init() {
	commands["gctrace"] = command{order: 70, run: runGctrace,
		usage: "  wallprof gctrace LOG [LOG2]               summarise GODEBUG=gctrace=1 output (two logs: side by side)\n"}
}

const gctraceUsage = `Usage: wallprof gctrace [flags] LOG [LOG2]

Summarises the lines a Go program prints to stderr with GODEBUG=gctrace=1
(Go 1.5 to 1.26): collections, the span of time they cover, the share of
time in GC (the runtime's own figure, and as computed from the wall-clock and
CPU phase times), stop-the-world time, the pace of collections, and the heap
before, after, live and its goal (min, median, max). The program's own
output between the lines, and scavenger lines, are skipped. LOG "-" is the
standard input.

With two logs (say, before and after a fix), prints them side by side with
the change, absolute and in percent.

Flags:
`

func runGctrace(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("gctrace", gctraceUsage, stdout, stderr)
	asJSON := fs.Bool("json", false, "write the summary as JSON (schema "+gctrace.Format+")")
	requests := fs.String("requests", "", "requests served while the log was written, for requests per collection; with two logs, N for both or N,M")
	if code, done := fs.parse(args); done {
		return code
	}
	if fs.NArg() != 1 && fs.NArg() != 2 {
		return fs.usageError("give one or two log files, e.g. 'wallprof gctrace before.log after.log'.")
	}
	reqs, err := parseRequests(*requests, fs.NArg())
	if err != nil {
		return fs.usageError("%v.", err)
	}
	sums := make([]gctrace.Summary, fs.NArg())
	for i, path := range fs.Args() {
		if sums[i], err = summarizeLog(path, reqs[i]); err != nil {
			fmt.Fprintf(stderr, "wallprof gctrace: %v.\n", err)
			return exitError
		}
	}
	switch {
	case *asJSON:
		err = gctrace.WriteJSON(stdout, sums...)
	case len(sums) == 2:
		err = gctrace.WriteComparison(stdout, sums[0], sums[1])
	default:
		err = gctrace.WriteText(stdout, sums[0])
	}
	if err != nil {
		fmt.Fprintf(stderr, "wallprof gctrace: %v.\n", err)
		return exitError
	}
	return exitOK
}

// parseRequests reads --requests: empty, N (for every log) or N,M.
func parseRequests(s string, logs int) ([]int64, error) {
	out := make([]int64, logs)
	if s == "" {
		return out, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > logs {
		return nil, fmt.Errorf("--requests has %d values for %d log(s)", len(parts), logs)
	}
	for i := range out {
		p := parts[min(i, len(parts)-1)]
		n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--requests wants a positive count, got %q", p)
		}
		out[i] = n
	}
	return out, nil
}

func summarizeLog(path string, requests int64) (gctrace.Summary, error) {
	r := io.Reader(os.Stdin)
	name := "stdin"
	if path != "-" {
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			return gctrace.Summary{}, fmt.Errorf("%s does not exist", path)
		}
		if err != nil {
			return gctrace.Summary{}, fmt.Errorf("cannot read %s: %w", path, err)
		}
		defer f.Close()
		r, name = f, path
	}
	l, err := gctrace.Parse(r)
	if err != nil {
		return gctrace.Summary{}, fmt.Errorf("%s: %w", name, err)
	}
	s, err := gctrace.Summarize(name, l, requests)
	if errors.Is(err, gctrace.ErrNoCycles) {
		return s, fmt.Errorf("%s has no gctrace line in its %d lines; run the program with GODEBUG=gctrace=1 and capture its stderr (2>file)", name, l.Lines)
	}
	return s, err
}
