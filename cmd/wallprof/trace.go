package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/wallprof/wallprof/internal/goruntime/exectrace"
)

func init() {
	commands["trace"] = command{order: 75, run: runTrace,
		usage: "  wallprof trace TRACE|--url URL            summarise a Go execution trace (pauses, GC, latency, blocking)\n"}
}

const traceUsage = `Usage: wallprof trace [flags] TRACE
       wallprof trace [flags] --url http://HOST/debug/pprof/trace?seconds=5

Summarises a Go execution trace (runtime/trace, 'go test -trace', or
/debug/pprof/trace; Go 1.22 to 1.26) in one streaming pass: stop-the-world
pauses with percentiles and their period, GC cycles, mark assists by
goroutine group and the GC workers' share of CPU, scheduling latency,
blocking by reason (channel, select, sync, sync.Cond, network, syscall,
sleep), long syscalls, goroutine churn, user regions and tasks, each with
its stacks. TRACE "-" is the standard input.

With -o, writes one HTML page with a timeline and the histograms, and
pprof profiles of scheduling latency, blocking and syscalls beside it
(open them with 'go tool pprof' or 'wallprof flame').

Flags:
`

func runTrace(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("trace", traceUsage, stdout, stderr)
	asJSON := fs.Bool("json", false, "write the summary as JSON (schema "+exectrace.Format+")")
	out := fs.String("o", "", "write a self-contained HTML page (and pprof profiles beside it)")
	prefix := fs.String("pprof-prefix", "", "write the pprof profiles PREFIX{sched-latency,blocking,syscalls}.pb.gz (default: beside -o)")
	url := fs.String("url", "", "fetch the trace from a /debug/pprof/trace URL instead of a file")
	if code, done := fs.parse(args); done {
		return code
	}
	if (fs.NArg() == 1) == (*url != "") {
		return fs.usageError("give one trace file or --url, e.g. 'wallprof trace trace.out'")
	}
	s, err := readTrace(ctx, fs.Arg(0), *url, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "wallprof trace: %v.\n", err)
		return exitError
	}
	if s.Truncated != "" {
		fmt.Fprintf(stderr, "wallprof trace: warning: %s.\n", s.Truncated)
	}
	if *out != "" || *prefix != "" {
		if err := writeTraceFiles(s, *out, *prefix, stderr); err != nil {
			fmt.Fprintf(stderr, "wallprof trace: %v.\n", err)
			return exitError
		}
	}
	switch {
	case *asJSON:
		err = exectrace.WriteJSON(stdout, s)
	case *out == "":
		err = exectrace.WriteText(stdout, s)
	}
	if err != nil {
		fmt.Fprintf(stderr, "wallprof trace: %v.\n", err)
		return exitError
	}
	if s.Truncated != "" {
		return exitError
	}
	return exitOK
}

// readTrace opens the trace (a file, stdin or a URL) and analyses it,
// with a progress line on a terminal.
func readTrace(ctx context.Context, path, url string, stderr io.Writer) (*exectrace.Summary, error) {
	var (
		r    io.Reader
		opt  exectrace.Options
		name = path
	)
	switch {
	case url != "":
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, fmt.Errorf("bad --url: %w", err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("fetch the trace: %w", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("fetch the trace: %s answered %s", url, resp.Status)
		}
		r, name, opt.Size = resp.Body, url, resp.ContentLength
		if isTerminal(stderr) {
			fmt.Fprintf(stderr, "fetching %s...\n", url)
		}
	case path == "-":
		r, name = os.Stdin, "stdin"
	default:
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s does not exist", path)
		}
		if err != nil {
			return nil, fmt.Errorf("cannot read %s: %w", path, err)
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil {
			opt.Size = fi.Size()
		}
		r = f
	}
	opt.Name = name
	opt.Stop = ctx.Err
	if isTerminal(stderr) && (opt.Size > 64<<20 || opt.Size <= 0) {
		start := time.Now()
		opt.Progress = func(n int64) {
			mb := float64(n) / (1 << 20)
			line := fmt.Sprintf("\rreading %s: %.0f MB", filepath.Base(name), mb)
			if opt.Size > 0 {
				line += fmt.Sprintf(" of %.0f MB (%.0f%%)", float64(opt.Size)/(1<<20), 100*float64(n)/float64(opt.Size))
			}
			if s := time.Since(start).Seconds(); s > 0 {
				line += fmt.Sprintf(", %.0f MB/s", mb/s)
			}
			fmt.Fprint(stderr, line+"   ")
		}
		defer fmt.Fprint(stderr, "\r"+strings.Repeat(" ", 78)+"\r")
	}
	s, err := exectrace.Analyze(r, opt)
	if err != nil {
		return nil, traceError(name, err)
	}
	return s, nil
}

// traceError turns the analysis' error into the one sentence the user sees.
func traceError(name string, err error) error {
	switch {
	case errors.Is(err, exectrace.ErrEmpty):
		return fmt.Errorf("%s is empty: it holds no trace", name)
	case errors.Is(err, exectrace.ErrOldTrace), errors.Is(err, exectrace.ErrNewTrace):
		return fmt.Errorf("%s: %w", name, err)
	case errors.Is(err, exectrace.ErrTruncated):
		return fmt.Errorf("%s: %w", name, err)
	case errors.Is(err, exectrace.ErrNotTrace):
		return fmt.Errorf("%s is not a Go execution trace (it does not start with 'go 1.N trace' or holds no event); write one with runtime/trace, 'go test -trace' or /debug/pprof/trace", name)
	}
	return fmt.Errorf("%s: %w", name, err)
}

// writeTraceFiles writes the HTML page and the pprof profiles.
func writeTraceFiles(s *exectrace.Summary, out, prefix string, stderr io.Writer) error {
	if prefix == "" {
		prefix = strings.TrimSuffix(out, filepath.Ext(out)) + "."
	}
	profiles, err := exectrace.WriteProfiles(s, prefix)
	if err != nil {
		return err
	}
	for _, p := range profiles {
		fmt.Fprintf(stderr, "wrote %s\n", p)
	}
	if out == "" {
		return nil
	}
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", out, err)
	}
	if err := exectrace.WriteHTML(f, s, profiles); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", out, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	fmt.Fprintf(stderr, "wrote %s\n", out)
	return nil
}
