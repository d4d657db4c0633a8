package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/wallprof/wallprof/internal/outfile"
	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/present/flame"
	"github.com/wallprof/wallprof/internal/profile"
)

func init() {
	commands["diff"] = command{order: 50, run: runDiff, usage: "  wallprof diff [flags] BEFORE AFTER        compare two profiles per second of recording\n"}
}

const diffUsage = `Usage: wallprof diff [flags] BEFORE AFTER

Compares two profiles, each normalised to time per second of its recording,
so that recordings of different lengths compare: the totals by state, then
the functions whose self (flat) and total (cum) time changed most, with
before/s, after/s, delta/s and delta %. With -o it also writes a
differential flame graph: the shape of AFTER, coloured by the change from
BEFORE. Both are profiles written by 'wallprof record' or pprof files that
record their duration: files, '-' for stdin (one of them), or URLs of pprof
endpoints (http://host:6060/debug/pprof/profile?seconds=10).

Flags:
`

func runDiff(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("diff", diffUsage, stdout, stderr)
	out := fs.String("o", "", "also write the differential flame graph (HTML) to this file")
	top := fs.Int("top", present.DefaultTop, "number of functions per table (negative: all)")
	asJSON := fs.Bool("json", false, "write the comparison as JSON (schema "+present.DiffFormat+")")
	weight := fs.String("weight", "wall", "time compared per function: wall, cpu or offcpu")
	if code, done := fs.parse(args); done {
		return code
	}
	if fs.NArg() != 2 {
		return fs.usageError("give two profile files, e.g. 'wallprof diff before.pb.gz after.pb.gz'.")
	}
	if stdinTwice(fs.Args()) {
		return fs.usageError("only one of the profiles can be read from stdin ('-').")
	}
	w, err := present.ParseWeight(*weight)
	if err != nil {
		return fs.usageError("--weight: %v.", err)
	}
	var profiles [2]*profile.Profile
	for i, path := range fs.Args() {
		if profiles[i], err = readProfileFor("diff", path, stderr); err != nil {
			return exitError
		}
	}
	opt := present.DiffOptions{Top: *top, JSON: *asJSON, Weight: w, BeforeName: fs.Arg(0), AfterName: fs.Arg(1)}
	if err := present.WriteDiff(stdout, profiles[0], profiles[1], opt); err != nil {
		var de *present.DurationError
		if errors.As(err, &de) {
			fmt.Fprintf(stderr, "wallprof diff: %v; record it with 'wallprof record', or use a pprof file that sets duration_nanos.\n", err)
		} else {
			fmt.Fprintf(stderr, "wallprof diff: %v.\n", err)
		}
		return exitError
	}
	if *out != "" {
		if err := writeDiffFlame(*out, profiles[0], profiles[1], w); err != nil {
			fmt.Fprintf(stderr, "wallprof diff: cannot write the differential flame graph: %v.\n", err)
			return exitError
		}
		fmt.Fprintf(stderr, "wallprof diff: wrote the differential flame graph to %s\n", *out)
	}
	return exitOK
}

// writeDiffFlame writes the differential flame graph of before and after
// to path, atomically.
func writeDiffFlame(path string, before, after *profile.Profile, w present.Weight) error {
	return outfile.Write(path, func(out io.Writer) error {
		return flame.WriteDiffHTML(out, before, after, flame.Options{Weight: w})
	})
}
