package record

import (
	"fmt"
	"strings"

	"github.com/wallprof/wallprof/internal/collect"
)

// unwindStopNames say, for a note, why the in-kernel unwinder stopped
// before a stack's outermost frame (collect.Unwind*).
var unwindStopNames = [collect.NumUnwindStops]string{
	collect.UnwindDepth:    "more frames than a sample holds",
	collect.UnwindRead:     "stack memory that could not be read",
	collect.UnwindRule:     "an unwind rule it cannot follow",
	collect.UnwindStack:    "a frame pointer that did not lead up the stack",
	collect.UnwindInternal: "a failed map lookup",
}

// unwindNote says how complete the user stacks are: the share the
// in-kernel unwinder walked to their outermost frame, why the others
// stopped, and the tables that did not fit ("" when it walked none).
func (r *Recording) unwindNote() string {
	st, ok := r.session.UnwindStats()
	if !ok {
		return ""
	}
	c := r.agg.UnwindCounts()
	var on, off, stopped [collect.NumUnwindStops]int64
	var nOn, nOff int64
	for i := range on {
		on[i], off[i] = c.OnCPU[i], c.OffCPU[i]
		nOn += on[i]
		nOff += off[i]
		stopped[i] = on[i] + off[i]
	}
	if nOn+nOff == 0 {
		return ""
	}
	pct := func(n, of int64) string {
		switch v := 100 * float64(n) / float64(max(of, 1)); {
		case of == 0:
			return "-"
		case n > 0 && v < 0.1:
			return "<0.1%"
		case n < of && v > 99.9:
			return ">99.9%"
		default:
			return fmt.Sprintf("%.1f%%", v)
		}
	}
	var why []string
	for i, n := range stopped {
		if i != collect.UnwindEnd && n > 0 {
			why = append(why, fmt.Sprintf("%s %s", unwindStopNames[i], pct(n, nOn+nOff)))
		}
	}
	s := fmt.Sprintf("user stacks were unwound in the kernel with the .eh_frame tables of %d files (%d rows): %s of on-CPU and %s of off-CPU stacks reached their outermost frame",
		st.Files, st.Rows, pct(on[collect.UnwindEnd], nOn), pct(off[collect.UnwindEnd], nOff))
	if len(why) > 0 {
		s += "; the others stopped at " + strings.Join(why, ", ")
	}
	if st.Refused > 0 {
		s += fmt.Sprintf("; the tables of %d files did not fit in %d rows (WALLPROF_UNWIND_ROWS) and their code was walked by frame pointer", st.Refused, st.Capacity)
	}
	if st.LoadErrors > 0 {
		s += fmt.Sprintf("; %d tables could not be loaded (%v)", st.LoadErrors, st.FirstLoadErr)
	}
	return s
}
