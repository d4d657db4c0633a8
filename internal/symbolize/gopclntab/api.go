// Package gopclntab reads a Go binary's .gopclntab (function table, file and
// line tables, inline trees, SP-delta tables) without relying on the symbol
// table or DWARF, so stripped binaries symbolize fully.
//
// Contract:
//   - Open accepts ELF files whose .gopclntab was written by Go 1.16/1.17
//     (magic 0xfffffffa), 1.18/1.19 (0xfffffff0) or 1.20 and later
//     (0xfffffff1). Anything else is ErrNotGo or a descriptive error.
//   - Everything the format states (byte order, pointer size, pc quantum)
//     is taken from the header, never assumed.
//   - Inline trees live outside .gopclntab (in go:func.* data in .rodata).
//     Open finds them through runtime.firstmoduledata, which it locates by
//     content, so no symbol table is needed. If that fails, lookups still
//     return the physical function: inline information is a bonus, never a
//     reason to fail.
//   - Input is untrusted: truncated or corrupt data yields an error from
//     Open or a shorter answer from a lookup, never a panic.
//   - A Table is immutable after Open and safe for concurrent use.
package gopclntab

import (
	"debug/elf"
	"errors"
	"os"

	"github.com/wallprof/wallprof/internal/profile"
)

// ErrNotGo is returned (wrapped) by Open when the file has no .gopclntab
// section or the section is not a Go pc-line table.
var ErrNotGo = errors.New("not a Go binary: no usable .gopclntab")

// Table is a decoded view of one binary's .gopclntab.
type Table struct {
	hdr       header
	textStart uint64   // base of the entry offsets (Go 1.18+)
	data      []byte   // the whole .gopclntab section
	addr      uint64   // its virtual address
	mem       memory   // loaded sections that hold funcdata (inline trees)
	gofunc    uint64   // moduledata.gofunc (Go 1.18+); 0 if unknown
	maps      []mapKey // the file's mappings it holds (Close)
}

// Close gives back the Table's mappings of its file's sections (they are
// unmapped when no other Table of the file holds them). Nothing read from
// the Table may be used afterwards but the strings and numbers it returned
// (they are copies).
func (t *Table) Close() error {
	for _, k := range t.maps {
		unmapSection(k)
	}
	t.maps = nil
	return nil
}

// Open reads the .gopclntab of f. The returned Table does not keep f open:
// everything it needs is copied into memory.
func Open(f *elf.File) (*Table, error) { return OpenFile(f, nil) }

// OpenFile is Open for f read from file: the sections the Table keeps are
// mapped from file (mmap.go) rather than copied, where the file allows.
// The Table does not keep file open.
func OpenFile(f *elf.File, file *os.File) (*Table, error) {
	img := newImage(f, file)
	data, addr, err := pclntabData(img)
	if err != nil {
		img.unmap()
		return nil, err
	}
	t, err := parse(data, addr, img)
	if err != nil {
		img.unmap()
		return nil, err
	}
	t.maps = img.maps
	return t, nil
}

// Lookup returns the frames at pc, innermost first: the functions inlined
// at pc (deepest first), then the physical function. For every frame but
// the innermost, Line (and File) is the call site in the next outer frame.
// It returns nil if pc is not in any Go function.
func (t *Table) Lookup(pc uint64) []profile.Frame {
	fn, ok := t.findFunc(pc)
	if !ok {
		return nil
	}
	return t.frames(fn, pc)
}

// SPDelta returns the value of the function's pcsp table at pc: how many
// bytes the function has pushed or allocated below its return address at
// that instruction (0 at the entry pc). ok is false if pc is not in a Go
// function or the table does not cover pc.
func (t *Table) SPDelta(pc uint64) (delta int64, ok bool) {
	fn, ok := t.findFunc(pc)
	if !ok {
		return 0, false
	}
	v, ok := t.pcvalue(fn.pcsp, fn.entry, pc)
	if !ok {
		return 0, false
	}
	return int64(v), true
}

// FuncRange returns the physical function containing pc: its entry pc, the
// end of its code (exclusive, the next function's entry) and its full name.
func (t *Table) FuncRange(pc uint64) (entry, end uint64, name string, ok bool) {
	fn, ok := t.findFunc(pc)
	if !ok {
		return 0, 0, "", false
	}
	return fn.entry, fn.end, t.funcName(fn.nameOff), true
}

// FuncID returns the funcID byte of the function containing pc (the
// runtime's abi.FuncID, which marks special runtime functions and
// compiler-generated wrappers; its values depend on the Go version).
func (t *Table) FuncID(pc uint64) (uint8, bool) {
	fn, ok := t.findFunc(pc)
	if !ok {
		return 0, false
	}
	return fn.funcID, true
}

// TextRange returns the range of pcs covered by the function table: from
// the first function's entry to the end of the last function (exclusive).
func (t *Table) TextRange() (start, end uint64) {
	n := t.hdr.nfunc
	if n == 0 {
		return 0, 0
	}
	start, _, _ = t.ftabEntry(0)
	end, _, _ = t.ftabEntry(n)
	return start, end
}

// pclntabData returns the function table's bytes and address: the
// .gopclntab section, or, in the shared libraries (-buildmode=c-shared) and
// PIEs of Go before 1.26, which keep it inside .data.rel.ro, the bytes
// between the symbols runtime.pclntab and runtime.epclntab.
func pclntabData(img *image) ([]byte, uint64, error) {
	f := img.f
	if sec := f.Section(".gopclntab"); sec != nil && sec.Type != elf.SHT_NOBITS {
		data, err := img.sectionBytes(sec)
		if err != nil {
			return nil, 0, errors.Join(ErrNotGo, err)
		}
		return data, sec.Addr, nil
	}
	syms, _ := f.Symbols()
	var lo, hi uint64
	for _, s := range syms {
		switch s.Name {
		case "runtime.pclntab":
			lo = s.Value
		case "runtime.epclntab":
			hi = s.Value
		}
	}
	if lo == 0 || hi <= lo {
		return nil, 0, ErrNotGo
	}
	for _, sec := range f.Sections {
		if sec.Type == elf.SHT_NOBITS || lo < sec.Addr || hi > sec.Addr+sec.Size {
			continue
		}
		data, err := img.sectionBytes(sec)
		if err != nil {
			return nil, 0, errors.Join(ErrNotGo, err)
		}
		return data[lo-sec.Addr : hi-sec.Addr], lo, nil
	}
	return nil, 0, ErrNotGo
}
