package convert

import (
	"fmt"
	"strings"
	"time"

	"github.com/wallprof/wallprof/internal/profile"
)

// Format is an input format.
type Format string

// The input formats Import reads.
const (
	Perf      Format = "perf"      // perf script output
	PtPmp     Format = "ptpmp"     // pt-pmp output
	EuStack   Format = "eustack"   // eu-stack -p dumps
	GDB       Format = "gdb"       // gdb "thread apply all bt" dumps
	Collapsed Format = "collapsed" // folded stacks
	Pprof     Format = "pprof"     // pprof protobuf
)

// Formats lists the input formats in the order detection tries them.
var Formats = []Format{Pprof, Perf, GDB, EuStack, PtPmp, Collapsed}

// ParseFormat is the inverse of Format's string value.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("unknown input format %q: want perf, ptpmp, eustack, gdb, collapsed or pprof", s)
}

// Description names what a file in format f is, for messages: "perf script output".
func (f Format) Description() string {
	switch f {
	case Perf:
		return "perf script output"
	case PtPmp:
		return "pt-pmp output"
	case EuStack:
		return "eu-stack output"
	case GDB:
		return "gdb backtrace output"
	case Collapsed:
		return "collapsed stacks"
	case Pprof:
		return "a pprof profile"
	}
	return string(f)
}

// DefaultPeriod is the weight given to one snapshot or one count when the
// input has no time: pt-pmp, eu-stack and gdb snapshots, collapsed stacks.
// It is nominal: set Options.Period to the real interval between snapshots.
const DefaultPeriod = 10 * time.Millisecond

// DefaultPerfFrequency is perf record's default sampling frequency, used
// to weigh samples of events that do not count time (cycles,
// instructions...) when Options.PerfFrequency is not set.
const DefaultPerfFrequency = 4000

// Options configures Import.
type Options struct {
	// Period is the time one snapshot or one count stands for, for inputs
	// without time. 0 means DefaultPeriod.
	Period time.Duration
	// PerfFrequency is the -F given to perf record, used for perf samples
	// of events whose period is not time (cycles, instructions...): each
	// weighs 1/PerfFrequency seconds. 0 means DefaultPerfFrequency.
	PerfFrequency int
	// PIDs, when not empty, keeps only the samples of these processes (for
	// inputs that name processes): a system-wide `perf record -a` sees every
	// switch-in, but only the target's threads are wanted.
	PIDs []int
}

func (o Options) period() time.Duration {
	if o.Period > 0 {
		return o.Period
	}
	return DefaultPeriod
}

// Result is an imported profile and what could not be read.
type Result struct {
	Profile *profile.Profile
	Format  Format
	Lines   int // lines in the input (0 for pprof)
	// Skipped counts the lines that were not the format; FirstSkipped is
	// the first of them and FirstSkippedLine its 1-based line number.
	Skipped          int
	FirstSkipped     string
	FirstSkippedLine int
	// Warnings say what the input lacks and how to get it (also in the
	// profile's notes), e.g. the perf script fields to add.
	Warnings []string
}

// SkippedMessage says which lines were skipped, or "" when none were:
// "skipped 3 of 1200 lines that are not perf script output; the first, line 17: ...".
func (r *Result) SkippedMessage() string {
	if r.Skipped == 0 {
		return ""
	}
	ex := r.FirstSkipped
	if len(ex) > 120 {
		ex = ex[:120] + "..."
	}
	lines := "lines"
	if r.Lines == 1 {
		lines = "line"
	}
	return fmt.Sprintf("skipped %d of %d %s that are not %s; the first, line %d: %q",
		r.Skipped, r.Lines, lines, r.Format.Description(), r.FirstSkippedLine, ex)
}

// skip counts a line that is not the format.
func (r *Result) skip(n int, line string) {
	if r.Skipped == 0 {
		r.FirstSkipped, r.FirstSkippedLine = line, n
	}
	r.Skipped++
}

// NoDataError is returned when nothing at all could be read from the input.
type NoDataError struct {
	Format Format
	Result *Result // what was skipped
}

func (e *NoDataError) Error() string {
	msg := fmt.Sprintf("the input has no %s that wallprof could read", e.Format.Description())
	if e.Format == Pprof {
		msg = "the input is not a pprof profile wallprof could read"
	}
	if e.Result != nil && e.Result.Skipped > 0 {
		ex := e.Result.FirstSkipped
		if len(ex) > 120 {
			ex = ex[:120] + "..."
		}
		msg += fmt.Sprintf(" (line %d: %q)", e.Result.FirstSkippedLine, ex)
	}
	return msg
}

// Import reads data in format f; with f == "" it detects the format first.
// Errors are *NoDataError when nothing could be read, or *DetectError when
// the format could not be recognised.
func Import(data []byte, f Format, opt Options) (*Result, error) {
	if f == "" {
		d, ok := Detect(data)
		if !ok {
			return nil, &DetectError{Empty: len(strings.TrimSpace(string(data))) == 0}
		}
		f = d
	}
	var r *Result
	var err error
	switch f {
	case Perf:
		r = parsePerf(data, opt)
	case PtPmp:
		r = parsePtPmp(data, opt)
	case EuStack:
		r = parseEuStack(data, opt)
	case GDB:
		r = parseGDB(data, opt)
	case Collapsed:
		r = parseCollapsed(data, opt)
	case Pprof:
		r, err = parsePprof(data)
		if err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("unknown input format %q", f)
	}
	r.Format = f
	if f != Pprof && len(r.Profile.Samples) == 0 {
		return r, &NoDataError{Format: f, Result: r}
	}
	return r, nil
}

// DetectError says the input's format could not be recognised.
type DetectError struct{ Empty bool }

func (e *DetectError) Error() string {
	if e.Empty {
		return "the input is empty"
	}
	return "the input is not in a format wallprof recognises (perf script, pt-pmp, eu-stack, gdb backtraces, collapsed stacks or pprof); name it with --from"
}
