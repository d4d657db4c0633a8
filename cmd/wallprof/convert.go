package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/wallprof/wallprof/internal/convert"
	"github.com/wallprof/wallprof/internal/outfile"
	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/profile"
)

func init() {
	commands["convert"] = command{order: 60, run: runConvert,
		usage: "  wallprof convert [flags] FILE -o OUT      convert perf script, pt-pmp, eu-stack, gdb, collapsed or pprof input to pprof, collapsed or speedscope\n"}
}

// convertFlags are wallprof convert's flags.
type convertFlags struct {
	from, to, output, weight, pids string
	perThread, states, quiet       bool
	opt                            convert.Options
}

func (f *convertFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.from, "from", "", "input `format`: perf, ptpmp, eustack, gdb, collapsed or pprof (default: detected from the content)")
	fs.StringVar(&f.to, "to", "", "output `format`: pprof, collapsed or speedscope (default: from the -o extension)")
	fs.StringVar(&f.output, "o", "", "write to `FILE` ('-' for stdout)")
	fs.StringVar(&f.output, "output", "", "same as -o")
	fs.DurationVar(&f.opt.Period, "period", convert.DefaultPeriod, "time one snapshot or count stands for, for inputs without time (pt-pmp, eu-stack, gdb, collapsed); e.g. 1s for one snapshot a second, 1ns for wallprof's own collapsed output")
	fs.IntVar(&f.opt.PerfFrequency, "perf-freq", convert.DefaultPerfFrequency, "the -F `Hz` perf recorded at, to weigh samples of events that do not count time (cycles, instructions)")
	fs.StringVar(&f.pids, "pid", "", "keep only these processes (comma-separated `PIDs`), e.g. from a system-wide perf record -a")
	fs.StringVar(&f.weight, "weight", "wall", "time counted in collapsed and speedscope output: wall, cpu or offcpu")
	fs.BoolVar(&f.perThread, "per-thread", false, "collapsed: a root frame per thread; speedscope: a profile per thread")
	fs.BoolVar(&f.states, "states", false, "collapsed and speedscope: the thread state as an extra leaf frame, e.g. [sleeping]")
	fs.BoolVar(&f.quiet, "q", false, "print nothing but errors")
}

const convertUsage = `Usage: wallprof convert [flags] INPUT -o OUT

Converts other tools' stacks into a profile: 'perf script' output (samples
are on-CPU time; sched:sched_switch and --off-cpu events are off-CPU time),
pt-pmp output, 'eu-stack -p' and gdb 'thread apply all bt' dumps, collapsed
stacks and pprof. Writes pprof (.pb.gz), collapsed stacks (.folded, .txt) or
speedscope JSON (.json). INPUT may be '-' for stdin. The input format is
detected from its content unless --from names it. Lines that cannot be read
are counted and the first is shown.

Flags:
`

func runConvert(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("convert", convertUsage, stdout, stderr)
	var f convertFlags
	f.register(fs.FlagSet)
	if code, done := fs.parse(args); done {
		return code
	}
	if code := f.check(fs.Args(), fs.usageError); code != exitOK {
		return code
	}
	return f.convert(fs.Arg(0), stdout, stderr)
}

// check validates the flags and fills in the defaults; it returns exitOK,
// or what fail returns after saying what is wrong.
func (f *convertFlags) check(inputs []string, fail func(format string, a ...any) int) int {
	switch {
	case len(inputs) != 1:
		return fail("give exactly one input file, e.g. 'wallprof convert perf.script -o perf.pb.gz'.")
	case f.output == "":
		return fail("give an output file with -o, e.g. -o out.pb.gz, out.folded or out.speedscope.json.")
	}
	if f.from != "" {
		if _, err := convert.ParseFormat(f.from); err != nil {
			return fail("%v.", err)
		}
	}
	if f.to == "" {
		f.to = outputFormat(f.output)
		if f.to == "" {
			return fail("cannot tell the output format from %q: name it with --to pprof, collapsed or speedscope.", f.output)
		}
	}
	if f.to != "pprof" && f.to != "collapsed" && f.to != "speedscope" {
		return fail("unknown --to %q: use pprof, collapsed or speedscope.", f.to)
	}
	if _, err := present.ParseWeight(f.weight); err != nil {
		return fail("%v.", err)
	}
	if f.opt.Period <= 0 {
		return fail("--period must be positive, e.g. 10ms.")
	}
	if f.opt.PerfFrequency <= 0 {
		return fail("--perf-freq must be positive, e.g. 4000.")
	}
	if f.pids != "" {
		for _, s := range strings.Split(f.pids, ",") {
			pid, err := strconv.Atoi(strings.TrimSpace(s))
			if err != nil || pid <= 0 {
				return fail("--pid takes process IDs separated by commas, not %q.", f.pids)
			}
			f.opt.PIDs = append(f.opt.PIDs, pid)
		}
	}
	return exitOK
}

// outputFormat guesses the output format from a file name, or "".
func outputFormat(name string) string {
	n := strings.ToLower(name)
	switch {
	case strings.HasSuffix(n, ".pb.gz"), strings.HasSuffix(n, ".pb"), strings.HasSuffix(n, ".pprof"):
		return "pprof"
	case strings.HasSuffix(n, ".folded"), strings.HasSuffix(n, ".collapsed"), strings.HasSuffix(n, ".txt"):
		return "collapsed"
	case strings.HasSuffix(n, ".json"):
		return "speedscope"
	}
	return ""
}

func (f *convertFlags) convert(input string, stdout, stderr io.Writer) int {
	data, err := readInput(input)
	if err != nil {
		fmt.Fprintf(stderr, "wallprof convert: %v.\n", err)
		return exitError
	}
	from := convert.Format(f.from)
	r, err := convert.Import(data, from, f.opt)
	if r != nil {
		for _, w := range r.Warnings {
			fmt.Fprintf(stderr, "wallprof convert: warning: %s.\n", w)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "wallprof convert: %s: %v.\n", inputName(input), err)
		return exitError
	}
	if msg := r.SkippedMessage(); msg != "" {
		fmt.Fprintf(stderr, "wallprof convert: %s.\n", msg)
	}
	var buf bytes.Buffer
	if err := f.write(&buf, r.Profile); err != nil {
		fmt.Fprintf(stderr, "wallprof convert: %v.\n", err)
		return exitError
	}
	if err := writeOutput(f.output, buf.Bytes(), stdout); err != nil {
		fmt.Fprintf(stderr, "wallprof convert: %v.\n", err)
		return exitError
	}
	if !f.quiet && f.output != "-" {
		fmt.Fprintf(stderr, "wallprof convert: read %s from %s (%d stacks, %d threads); wrote %s to %s\n",
			r.Format.Description(), inputName(input), len(r.Profile.Samples), len(r.Profile.Threads), f.to, f.output)
	}
	return exitOK
}

func (f *convertFlags) write(w io.Writer, p *profile.Profile) error {
	weight, _ := present.ParseWeight(f.weight)
	switch f.to {
	case "pprof":
		return present.WritePprof(w, p)
	case "collapsed":
		return present.WriteCollapsed(w, p, present.CollapsedOptions{Weight: weight, PerThread: f.perThread, States: f.states})
	default:
		return convert.WriteSpeedscope(w, p, convert.SpeedscopeOptions{Weight: weight, PerThread: f.perThread, States: f.states})
	}
}

func inputName(input string) string {
	if input == "-" {
		return "stdin"
	}
	return input
}

// readInput reads a file, or stdin for "-", up to present.MaxProfileSize bytes.
func readInput(input string) ([]byte, error) {
	var r io.Reader = os.Stdin
	if input != "-" {
		fh, err := os.Open(input)
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s does not exist", input)
		}
		if err != nil {
			return nil, fmt.Errorf("cannot read %s: %v", input, err)
		}
		defer fh.Close()
		r = fh
	}
	data, err := io.ReadAll(io.LimitReader(r, present.MaxProfileSize+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %v", inputName(input), err)
	}
	if len(data) > present.MaxProfileSize {
		return nil, fmt.Errorf("%s is larger than %d bytes", inputName(input), present.MaxProfileSize)
	}
	return data, nil
}

// writeOutput writes data to path ("-" for stdout) atomically, so a
// failed conversion leaves no partial output.
func writeOutput(path string, data []byte, stdout io.Writer) error {
	if path == "-" {
		_, err := stdout.Write(data)
		return err
	}
	err := outfile.Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
	if err != nil {
		return fmt.Errorf("cannot write %s: %v", path, err)
	}
	return nil
}
