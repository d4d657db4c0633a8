package symbolize

import (
	"debug/elf"

	"github.com/wallprof/wallprof/internal/symbolize/gopclntab"
)

// openGoTable returns the .gopclntab reader of f, or nil when f is not a Go
// binary or its table cannot be read (DWARF and symbols are used instead).
func openGoTable(f *elf.File) goTable {
	t, err := gopclntab.Open(f)
	if err != nil {
		return nil
	}
	return t
}
