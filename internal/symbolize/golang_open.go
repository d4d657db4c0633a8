package symbolize

import "debug/elf"

// openGoTable returns the .gopclntab reader of f, or nil when f is not a Go
// binary. Not wired to package gopclntab yet.
func openGoTable(f *elf.File) goTable {
	return nil
}
