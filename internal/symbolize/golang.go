package symbolize

import (
	"github.com/wallprof/wallprof/internal/profile"
)

// goTable is what the symbolizer needs from a Go binary's .gopclntab
// (implemented by gopclntab.Table). Addresses are ELF virtual addresses.
type goTable interface {
	// Lookup returns the frames at pc, innermost first, inlined included.
	Lookup(pc uint64) []profile.Frame
	// SPDelta returns how far SP is below the function's entry SP at pc.
	SPDelta(pc uint64) (int64, bool)
	// FuncRange returns the function containing pc.
	FuncRange(pc uint64) (entry, end uint64, name string, ok bool)
}
