package present

import (
	"fmt"

	"github.com/wallprof/wallprof/internal/profile"
)

// Weight selects which of a sample's time is counted.
type Weight uint8

// The weights, matching the pprof sample types WritePprof writes.
const (
	Wall   Weight = iota // all time: on-CPU and off-CPU
	CPU                  // on-CPU time only
	OffCPU               // off-CPU time only: runnable and blocked
)

var weightNames = [...]string{"wall", "cpu", "offcpu"}

func (w Weight) String() string {
	if int(w) < len(weightNames) {
		return weightNames[w]
	}
	return fmt.Sprintf("weight(%d)", uint8(w))
}

// ParseWeight is the inverse of Weight.String.
func ParseWeight(s string) (Weight, error) {
	for i, n := range weightNames {
		if n == s {
			return Weight(i), nil
		}
	}
	return 0, fmt.Errorf("unknown weight %q: want wall, cpu or offcpu", s)
}

// of returns the part of s's value counted under w.
func (w Weight) of(s *profile.Sample) int64 {
	switch w {
	case Wall:
		return s.Value
	case CPU:
		if s.State == profile.OnCPU {
			return s.Value
		}
	case OffCPU:
		if s.State.OffCPU() {
			return s.Value
		}
	}
	return 0
}

// frameNames appends the function names of a stack to dst, innermost
// first: the leaf location's inlined frames first, the root's outermost
// frame last. A location without frames is named "module+0xoffset" (or
// "0xaddress" without a mapping), so unknown code is shown, never hidden.
func frameNames(dst []string, stack []*profile.Location) []string {
	for _, loc := range stack {
		if loc == nil {
			continue
		}
		if len(loc.Frames) == 0 {
			dst = append(dst, loc.UnknownName())
			continue
		}
		for _, f := range loc.Frames {
			dst = append(dst, f.Function)
		}
	}
	return dst
}
