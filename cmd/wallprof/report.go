package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/wallprof/wallprof/internal/present"
)

func init() {
	commands["report"] = command{order: 20, run: runReport, usage: "  wallprof report [flags] FILE              print a text (or JSON) summary of a profile\n"}
}

func runReport(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	top := fs.Int("top", present.DefaultTop, "number of functions per table (negative: all)")
	asJSON := fs.Bool("json", false, "write the report as JSON (schema "+present.ReportFormat+")")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: wallprof report [flags] FILE

Prints the recording's totals by state, lost events and wallprof's own cost,
the top functions by wall, on-CPU and off-CPU time (flat and cumulative), and
a per-thread table (wall, on-CPU %, runnable %, blocked % by kind). FILE is a
profile written by 'wallprof record' or any pprof file.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "wallprof report: give exactly one profile file, e.g. 'wallprof report app.pb.gz'.")
		return exitUsage
	}
	path := fs.Arg(0)
	p, err := present.ReadProfileFile(path)
	if err != nil {
		var fe *present.FormatError
		switch {
		case errors.As(err, &fe):
			fmt.Fprintf(stderr, "wallprof report: %v.\n", err)
		case errors.Is(err, os.ErrNotExist):
			fmt.Fprintf(stderr, "wallprof report: %s does not exist.\n", path)
		default:
			fmt.Fprintf(stderr, "wallprof report: cannot read %s: %v.\n", path, err)
		}
		return exitError
	}
	if err := present.WriteReport(stdout, p, present.ReportOptions{Top: *top, JSON: *asJSON}); err != nil {
		fmt.Fprintf(stderr, "wallprof report: %v.\n", err)
		return exitError
	}
	return exitOK
}
