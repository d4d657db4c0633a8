package symbolize

import (
	"debug/elf"
	"os"

	"github.com/wallprof/wallprof/internal/symbolize/gopclntab"
)

// openGoTable returns the .gopclntab reader of f (read from file, whose
// sections it maps; nil for an image in memory), or nil when f is not a Go
// binary or its table cannot be read (DWARF and symbols are used instead).
func openGoTable(f *elf.File, file *os.File) goTable {
	t, err := gopclntab.OpenFile(f, file)
	if err != nil {
		return nil
	}
	return t
}
