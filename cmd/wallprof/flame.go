package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/wallprof/wallprof/internal/outfile"
	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/present/flame"
)

func init() {
	commands["flame"] = command{order: 30, run: runFlame,
		usage: "  wallprof flame [flags] FILE [-o OUT]      write an interactive flame graph (HTML, or SVG with --svg)\n"}
}

const flameUsage = `Usage: wallprof flame [flags] FILE [-o OUT]

Writes a flame graph of a profile. The HTML page is one self-contained file
(no network request): click a frame to zoom, search by regular expression
(with the matched share of the total), hover for a frame's wall, on-CPU,
runnable and blocked time, switch between the wall, on-CPU and off-CPU
weights and between flame and icicle orientation. Frames are coloured by what
dominates them: on-CPU (orange), runnable (purple) or blocked (blue).
With --svg it writes a standalone SVG instead, for tickets and wikis: click
to zoom, hover for details, 'Search' to highlight.
FILE is a profile written by 'wallprof record' or any pprof file, '-' for
stdin, the URL of a pprof endpoint, or anything 'wallprof convert' reads.

Flags:
`

func runFlame(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("flame", flameUsage, stdout, stderr)
	out := fs.String("o", "", "output file ('-' for standard output; default: FILE's name with .html or .svg)")
	svg := fs.Bool("svg", false, "write a standalone interactive SVG (one weight) instead of the HTML page")
	weight := fs.String("weight", "wall", "weight shown first (HTML) or drawn (SVG): wall, cpu or offcpu")
	title := fs.String("title", "", "title above the graph (default: the profiled command)")
	minWidth := fs.Float64("min-width", 100*flame.DefaultMinWidth, "leave out call paths narrower than this percentage of the total under every weight")
	threads := fs.Bool("threads", false, "one root frame per thread (comm-pid/tid)")
	icicle := fs.Bool("icicle", false, "HTML: open with the root at the top (the page can switch)")
	gview := fs.Bool("goroutines", false, "draw the goroutine view of a Go program: each goroutine's time running (on-CPU colour), runnable and waiting (blocked colour); the default for a profile that has one (--goroutines=false draws its threads)")
	focusG := fs.String("focus-goroutines", "", "draw the goroutine view of the goroutine groups whose creator or own function matches this regexp, e.g. 'net/http.\\(\\*conn\\).serve'")
	focus := fs.String("focus", "", "keep only stacks with a function matching this regular expression")
	if code, done := fs.parse(args); done {
		return code
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "wallprof flame: "+format+"\n", a...)
		return code
	}
	if fs.NArg() != 1 {
		return fs.usageError("give exactly one profile file, e.g. 'wallprof flame app.pb.gz -o app.html'.")
	}
	w, err := present.ParseWeight(*weight)
	if err != nil {
		return fs.usageError("--weight %q is not a weight: use wall, cpu or offcpu.", *weight)
	}
	if *minWidth < 0 || *minWidth >= 100 {
		return fs.usageError("--min-width %g is out of range: give a percentage from 0 (keep everything) to below 100.", *minWidth)
	}
	opt := flame.Options{Title: *title, Weight: w, MinWidth: *minWidth / 100, PerThread: *threads, Icicle: *icicle}
	if *minWidth == 0 {
		opt.MinWidth, opt.MaxNodes = -1, -1
	}
	if *focus != "" {
		re, err := regexp.Compile(*focus)
		if err != nil {
			return fs.usageError("--focus %q is not a valid regular expression: %v.", *focus, err)
		}
		opt.Focus = re
	}
	path := fs.Arg(0)
	p, err := readProfileFor("flame", path, stderr)
	if err != nil {
		return exitError
	}
	if !fs.isSet("goroutines") && *focusG == "" && len(p.Goroutines) > 0 {
		// A Go program: its goroutines first, as 'wallprof report
		// --goroutines' and the run report show them; the threads'
		// view is mostly the runtime's idle threads.
		*gview = true
		fmt.Fprintf(stderr, "wallprof flame: a Go program: drawing its goroutines (--goroutines=false draws its threads).\n")
	}
	if *gview || *focusG != "" {
		var re *regexp.Regexp
		if *focusG != "" {
			if re, err = regexp.Compile(*focusG); err != nil {
				return fs.usageError("--focus-goroutines %q is not a valid regular expression: %v.", *focusG, err)
			}
		}
		if len(p.Goroutines) == 0 {
			return fail(exitError, "%s: %v.", path, present.ErrNoGoroutines)
		}
		p = present.GoroutineView(p, re)
		if len(p.Samples) == 0 {
			return fail(exitError, "no goroutine group matches --focus-goroutines %q; 'wallprof report --goroutines %s' lists them.", *focusG, path)
		}
		if opt.Title == "" {
			opt.Title = "Goroutines of " + p.Command
			if re != nil {
				opt.Title += " matching " + re.String()
			}
		}
	}
	dest := *out
	if dest == "" {
		dest = defaultFlameOutput(path, *svg)
	}
	write := flame.WriteHTML
	if *svg {
		write = flame.WriteSVG
	}
	if dest == "-" {
		bw := bufio.NewWriter(stdout)
		if err := write(bw, p, opt); err != nil {
			return fail(exitError, "%v.", err)
		}
		if err := bw.Flush(); err != nil {
			return fail(exitError, "cannot write to standard output: %v.", err)
		}
		return exitOK
	}
	f, err := outfile.Create(dest)
	if err != nil {
		return fail(exitError, "cannot create %s: %v.", dest, errors.Unwrap(err))
	}
	defer f.Abandon()
	if err := write(f, p, opt); err != nil {
		return fail(exitError, "cannot write %s: %v.", dest, err)
	}
	if err := f.Commit(); err != nil {
		return fail(exitError, "cannot write %s: %v.", dest, err)
	}
	if st, err := os.Stat(dest); err == nil {
		fmt.Fprintf(stderr, "wrote %s (%d KiB)\n", dest, (st.Size()+1023)/1024)
	}
	return exitOK
}

// defaultFlameOutput names the output after the profile: app.pb.gz gives
// app.html (or app.svg), in the current directory.
func defaultFlameOutput(in string, svg bool) string {
	base := filepath.Base(in)
	for _, ext := range []string{".gz", ".pb", ".pprof", ".prof", ".folded"} {
		base = strings.TrimSuffix(base, ext)
	}
	if base == "" || base == "." || base == "-" {
		base = "flame"
	}
	if svg {
		return base + ".svg"
	}
	return base + ".html"
}
