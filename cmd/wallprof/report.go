package main

import (
	"context"
	"fmt"
	"io"
	"regexp"

	"github.com/wallprof/wallprof/internal/present"
)

func init() {
	commands["report"] = command{order: 20, run: runReport, usage: "  wallprof report [flags] FILE              print a text (or JSON) summary of a profile\n"}
}

const reportUsage = `Usage: wallprof report [flags] FILE

Prints the recording's totals by state, lost events and wallprof's own cost,
the top functions by wall, on-CPU and off-CPU time (flat and cumulative), and
a per-thread table (wall, on-CPU %, runnable %, blocked % by kind). FILE is a
profile written by 'wallprof record' or any pprof file, '-' for stdin, the
URL of a pprof endpoint (http://host:6060/debug/pprof/profile?seconds=10),
or anything 'wallprof convert' reads (perf script, collapsed stacks, ...).

--goroutines prints, for a Go program, its goroutine groups (by creation
site): how many goroutines, their time, and its share running, runnable and
waiting, waiting broken down by the runtime's wait reason (chan receive, IO
wait, sleep, sync.Mutex.Lock, ...); --focus-goroutines keeps the matching
groups.

--tree, --threads and --states select views instead: the header, then the
selected views, plus the top functions if --top is given. --focus, --ignore
and --hide filter the samples as pprof's options of the same names do, and
--tagfocus and --tagignore by their labels (state=runnable); the measured
per-thread totals are not filtered. --json always holds the header,
states, top functions and threads, and the tree with --tree.

Flags:
`

func runReport(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("report", reportUsage, stdout, stderr)
	top := fs.Int("top", present.DefaultTop, "number of functions per table (negative: all)")
	asJSON := fs.Bool("json", false, "write the report as JSON (schema "+present.ReportFormat+")")
	tree := fs.Bool("tree", false, "print the call tree, with wall, on-CPU and off-CPU time per node")
	threads := fs.Bool("threads", false, "print the per-thread table: wall, on-CPU, runnable and blocked time by kind")
	states := fs.Bool("states", false, "print the totals by state")
	nodeFraction := fs.Float64("nodefraction", present.DefaultNodeFraction, "hide call-tree nodes under this fraction of the total wall time (0: show all)")
	focus := fs.String("focus", "", "keep only samples with a frame matching this regexp (function, file or mapping name)")
	ignore := fs.String("ignore", "", "drop samples with a frame matching this regexp")
	hide := fs.String("hide", "", "remove frames matching this regexp from the stacks")
	gview := fs.Bool("goroutines", false, "Go programs: goroutine groups (by creation site) with their count and their time running, runnable and waiting by wait reason")
	tagfocus := fs.String("tagfocus", "", "keep only samples with a label matching this, as pprof's -tagfocus: state=runnable, thread=worker, tid=1234, wait_reason='chan receive' (a regexp, or numbers and ranges lo:hi for pid, tid and goid)")
	tagignore := fs.String("tagignore", "", "drop samples with a label matching this, as pprof's -tagignore: state=sleeping")
	focusG := fs.String("focus-goroutines", "", "with --goroutines: only the groups whose creator or goroutine function matches this regexp")
	if code, done := fs.parse(args); done {
		return code
	}
	if fs.NArg() != 1 {
		return fs.usageError("give exactly one profile file, e.g. 'wallprof report app.pb.gz'.")
	}
	filter, err := present.CompileFilter(*focus, *ignore, *hide)
	if err != nil {
		return fs.usageError("%v.", err)
	}
	var tagFocus, tagIgnore *tagFilter
	for _, t := range []struct {
		flag, val string
		f         **tagFilter
	}{{"tagfocus", *tagfocus, &tagFocus}, {"tagignore", *tagignore, &tagIgnore}} {
		if t.val == "" {
			continue
		}
		if *t.f, err = parseTagFilter(t.val); err != nil {
			return fs.usageError("--%s: %v.", t.flag, err)
		}
	}
	topSet := fs.isSet("top")
	opt := present.ReportOptions{
		Top: *top, JSON: *asJSON, ShowTop: topSet,
		Tree: *tree, Threads: *threads, States: *states,
		NodeFraction: *nodeFraction, Filter: filter,
	}
	if *nodeFraction <= 0 {
		opt.NodeFraction = -1 // every node
	}
	path := fs.Arg(0)
	p, err := readProfileFor("report", path, stderr)
	if err != nil {
		return exitError
	}
	if tagFocus != nil || tagIgnore != nil {
		filterByTags(p, tagFocus, tagIgnore)
	}
	if *gview || *focusG != "" {
		var re *regexp.Regexp
		if *focusG != "" {
			if re, err = regexp.Compile(*focusG); err != nil {
				return fs.usageError("--focus-goroutines %q is not a valid regular expression: %v.", *focusG, err)
			}
		}
		gr, err := present.NewGoroutineReport(p, re)
		if err != nil {
			fmt.Fprintf(stderr, "wallprof report: %s: %v.\n", path, err)
			return exitError
		}
		if err := present.WriteGoroutineReport(stdout, gr, *asJSON); err != nil {
			fmt.Fprintf(stderr, "wallprof report: %v.\n", err)
			return exitError
		}
		return exitOK
	}
	if err := present.WriteReport(stdout, p, opt); err != nil {
		fmt.Fprintf(stderr, "wallprof report: %v.\n", err)
		return exitError
	}
	return exitOK
}
