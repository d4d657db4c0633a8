package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/wallprof/wallprof/internal/goruntime/escapes"
)

func init() {
	commands["escapes"] = command{order: 90, run: runEscapes,
		usage: "  wallprof escapes [flags] [PACKAGES]       hot allocation sites with the compiler's escape-analysis reason\n"}
}

const escapesUsage = `Usage: wallprof escapes --profile allocs.pb.gz [flags] [PACKAGES]

Ranks the lines of a Go program that allocate the most, from an allocation
profile, and says why each one allocates: the compiler's escape analysis
('go build -gcflags=-m=2 PACKAGES', run in --dir with your environment;
PACKAGES defaults to ./...) for allocations on the line itself, or the
library function that allocates when the line calls one. Lines in
PACKAGES are the sites; allocations inside the runtime's allocator are
charged to their caller.

Flags:
`

func runEscapes(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("escapes", escapesUsage, stdout, stderr)
	prof := fs.String("profile", "", "allocation profile (pprof, from /debug/pprof/allocs or /debug/pprof/heap)")
	sample := fs.String("sample", "alloc_space", "rank by alloc_space, alloc_objects, inuse_space or inuse_objects")
	top := fs.Int("top", 20, "show this many sites (0: all)")
	dir := fs.String("dir", ".", "directory to build the packages in (the module of the profiled program)")
	asJSON := fs.Bool("json", false, "write the report as JSON (schema "+escapes.Format+")")
	if code, done := fs.parse(args); done {
		return code
	}
	if *prof == "" {
		return fs.usageError("give the allocation profile with --profile, e.g. 'curl -o allocs.pb.gz http://localhost:6060/debug/pprof/allocs'.")
	}
	if *top < 0 {
		return fs.usageError("--top wants a count of 0 or more.")
	}
	rep, err := escapesReport(ctx, *prof, escapes.Sample(*sample), *dir, fs.Args(), *top)
	if err != nil {
		fmt.Fprintf(stderr, "wallprof escapes: %s.\n", oneLine(err.Error()))
		return exitError
	}
	if *asJSON {
		err = escapes.WriteJSON(stdout, rep)
	} else {
		err = escapes.WriteText(stdout, rep)
	}
	if err != nil {
		fmt.Fprintf(stderr, "wallprof escapes: %v.\n", err)
		return exitError
	}
	return exitOK
}

func escapesReport(ctx context.Context, path string, sample escapes.Sample, dir string, pkgs []string, top int) (escapes.Report, error) {
	p, err := readAllocProfile(path)
	if err != nil {
		return escapes.Report{}, err
	}
	stacks, err := escapes.Stacks(p, sample)
	if err != nil {
		return escapes.Report{}, fmt.Errorf("%s: %w", path, err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return escapes.Report{}, err
	}
	if st, err := os.Stat(abs); err != nil || !st.IsDir() {
		return escapes.Report{}, fmt.Errorf("--dir %s is not a directory", dir)
	}
	diags, err := escapes.Analyze(ctx, abs, pkgs)
	if err != nil {
		return escapes.Report{}, err
	}
	return escapes.Join(stacks, diags, escapes.Options{Dir: abs, Sample: sample, Top: top}), nil
}

func readAllocProfile(path string) (*profile.Profile, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s does not exist", path)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s is not a pprof profile: %w", path, err)
	}
	return p, nil
}

// oneLine keeps the first line of a message and drops a final period.
func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return strings.TrimSuffix(strings.TrimSpace(s), ".")
}
