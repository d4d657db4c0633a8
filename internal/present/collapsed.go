package present

import (
	"bufio"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/wallprof/wallprof/internal/profile"
)

// CollapsedOptions configures WriteCollapsed.
type CollapsedOptions struct {
	// Weight is the time counted: Wall (the zero value), CPU or OffCPU.
	Weight Weight
	// Unit divides the values: 0 or time.Nanosecond writes nanoseconds,
	// time.Microsecond microseconds, and so on. Each line's value is
	// rounded to the nearest unit, and lines that round to zero are left
	// out. FlameGraph and inferno read the numbers as counts, so the unit
	// only matters to the labels a reader puts on them.
	Unit time.Duration
	// PerThread adds the thread as the root frame, named "comm-pid/tid"
	// with spaces in comm replaced by '_', as stackcollapse-perf.pl --tid
	// does, so each thread gets its own tower.
	PerThread bool
	// States adds the scheduler state as an extra leaf frame, "[sleeping]",
	// so a flame graph separates on-CPU time from each kind of waiting.
	States bool
	// KernelSuffix appends "_[k]" to kernel frames, the annotation
	// flamegraph.pl --color=... and inferno use to colour kernel code.
	KernelSuffix bool
}

// WriteCollapsed writes p in the "folded" format of FlameGraph's
// stackcollapse scripts and inferno-collapse: one line per distinct stack,
// frames from the root to the leaf separated by ';', then a space and the
// stack's total value. Inlined functions are expanded, caller before callee.
// Lines are sorted so the output is deterministic. In frame names ';'
// becomes ':' (as stackcollapse-perf.pl does) and line breaks become
// spaces; other characters, spaces included, are kept, since readers split a
// line at its last space. Unlike stackcollapse-perf.pl, names are not
// shortened: C++ arguments and template parameters stay.
func WriteCollapsed(w io.Writer, p *profile.Profile, opt CollapsedOptions) error {
	unit := int64(opt.Unit)
	if unit <= 0 {
		unit = 1
	}
	totals := map[string]int64{}
	var frames []string
	for _, s := range p.Samples {
		v := opt.Weight.of(s)
		if v == 0 {
			continue
		}
		frames = collapsedFrames(frames[:0], s, opt)
		totals[strings.Join(frames, ";")] += v
	}
	keys := make([]string, 0, len(totals))
	for k := range totals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	bw := bufio.NewWriter(w)
	for _, k := range keys {
		v := roundDiv(totals[k], unit)
		if v == 0 {
			continue
		}
		fmt.Fprintf(bw, "%s %d\n", k, v)
	}
	return bw.Flush()
}

// collapsedFrames appends the frames of s, root first.
func collapsedFrames(dst []string, s *profile.Sample, opt CollapsedOptions) []string {
	if opt.PerThread {
		name := strings.ReplaceAll(s.Thread, " ", "_")
		dst = append(dst, foldName(fmt.Sprintf("%s-%d/%d", name, s.PID, s.TID)))
	}
	for i := len(s.Stack) - 1; i >= 0; i-- {
		loc := s.Stack[i]
		if loc == nil {
			continue
		}
		suffix := ""
		if opt.KernelSuffix && loc.Mapping != nil && loc.Mapping.Kernel {
			suffix = "_[k]"
		}
		if len(loc.Frames) == 0 {
			dst = append(dst, foldName(loc.UnknownName())+suffix)
			continue
		}
		for j := len(loc.Frames) - 1; j >= 0; j-- {
			dst = append(dst, foldName(loc.Frames[j].Function)+suffix)
		}
	}
	if len(s.Stack) == 0 {
		dst = append(dst, "[no stack]")
	}
	if opt.States {
		dst = append(dst, "["+s.State.String()+"]")
	}
	return dst
}

var foldReplacer = strings.NewReplacer(";", ":", "\r\n", " ", "\n", " ", "\r", " ")

// foldName makes a name safe for the folded format.
func foldName(s string) string {
	if s == "" {
		return "[unknown]"
	}
	return foldReplacer.Replace(s)
}

// roundDiv divides v by d, rounding half away from zero.
func roundDiv(v, d int64) int64 {
	if d == 1 {
		return v
	}
	if v < 0 {
		return -roundDiv(-v, d)
	}
	return (v + d/2) / d
}
