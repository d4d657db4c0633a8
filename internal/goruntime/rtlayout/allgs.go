package rtlayout

import (
	"debug/elf"
	"errors"
	"fmt"
	"sort"

	"golang.org/x/arch/x86/x86asm"

	"github.com/wallprof/wallprof/internal/symbolize/gopclntab"
)

// ErrAllgsNotFound is returned (wrapped) when neither the symbol table nor
// the code of runtime.forEachG gives the address of runtime.allgs.
var ErrAllgsNotFound = errors.New("runtime.allgs not found")

// allgsFunc is the runtime function whose code FindAllgs decodes. In every
// supported version (runtime/proc.go of Go 1.19 through 1.26) it is
//
//	func forEachG(fn func(gp *g)) {
//		lock(&allglock)
//		for _, gp := range allgs { fn(gp) }
//		unlock(&allglock)
//	}
//
// so its only 8-byte loads from static data are allgs.array and allgs.len,
// which are adjacent; allglock is only taken by address (LEAQ).
const allgsFunc = "runtime.forEachG"

// FindAllgs returns the link-time address of the slice header of
// runtime.allgs ([]*g: array, len, cap) and how it was found: from the
// symbol table when the binary has one, else from the machine code of
// runtime.forEachG (amd64 only).
func FindAllgs(f *elf.File, tab *gopclntab.Table) (addr uint64, how string, err error) {
	if a, err := AllgsFromSymtab(f); err == nil {
		return a, "symbol table", nil
	}
	a, err := AllgsFromCode(f, tab)
	if err != nil {
		return 0, "", err
	}
	return a, "code of " + allgsFunc, nil
}

// AllgsFromSymtab returns the address of runtime.allgs from the ELF symbol
// table.
func AllgsFromSymtab(f *elf.File) (uint64, error) {
	syms, err := f.Symbols()
	if err != nil {
		return 0, fmt.Errorf("%w: no symbol table: %v", ErrAllgsNotFound, err)
	}
	for _, s := range syms {
		if s.Name == "runtime.allgs" {
			return s.Value, nil
		}
	}
	return 0, fmt.Errorf("%w: no symbol runtime.allgs", ErrAllgsNotFound)
}

// AllgsFromCode finds runtime.forEachG through .gopclntab, decodes its
// amd64 code and returns the address A such that the function loads 8
// bytes from both A and A+8 with RIP-relative operands (allgs.array and
// allgs.len).
func AllgsFromCode(f *elf.File, tab *gopclntab.Table) (uint64, error) {
	if f.Machine != elf.EM_X86_64 {
		return 0, fmt.Errorf("%w: decoding %s code is not supported (amd64 only)", ErrAllgsNotFound, f.Machine)
	}
	entry, end, ok := FindFunc(tab, allgsFunc)
	if !ok {
		return 0, fmt.Errorf("%w: no function %s in .gopclntab", ErrAllgsNotFound, allgsFunc)
	}
	code, err := readCode(f, entry, end)
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrAllgsNotFound, err)
	}
	loads := ripLoads64(code, entry)
	for _, a := range loads {
		if i := sort.Search(len(loads), func(i int) bool { return loads[i] >= a+8 }); i < len(loads) && loads[i] == a+8 {
			return a, nil
		}
	}
	return 0, fmt.Errorf("%w: %s loads no adjacent slice fields (%d static loads)", ErrAllgsNotFound, allgsFunc, len(loads))
}

// FindFunc returns the entry and end pc of the function called name, by
// walking the function table in .gopclntab.
func FindFunc(tab *gopclntab.Table, name string) (entry, end uint64, ok bool) {
	pc, stop := tab.TextRange()
	for pc < stop {
		e, x, n, ok := tab.FuncRange(pc)
		if !ok || x <= pc {
			return 0, 0, false
		}
		if n == name {
			return e, x, true
		}
		pc = x
	}
	return 0, 0, false
}

// readCode returns the bytes of [start, end) from the section holding them.
func readCode(f *elf.File, start, end uint64) ([]byte, error) {
	if end <= start || end-start > 1<<20 {
		return nil, fmt.Errorf("bad function range %#x-%#x", start, end)
	}
	for _, s := range f.Sections {
		if s.Type != elf.SHT_PROGBITS || s.Flags&elf.SHF_EXECINSTR == 0 {
			continue
		}
		if start >= s.Addr && end <= s.Addr+s.Size {
			b := make([]byte, end-start)
			if _, err := s.ReadAt(b, int64(start-s.Addr)); err != nil {
				return nil, fmt.Errorf("read code at %#x: %w", start, err)
			}
			return b, nil
		}
	}
	return nil, fmt.Errorf("no executable section holds %#x-%#x", start, end)
}

// ripLoads64 decodes code (at address pc) and returns, sorted and without
// duplicates, the targets of 8-byte MOV loads whose source is RIP-relative.
// Decoding stops at the first byte sequence that is not an instruction.
func ripLoads64(code []byte, pc uint64) []uint64 {
	seen := make(map[uint64]bool)
	for len(code) > 0 {
		inst, err := x86asm.Decode(code, 64)
		if err != nil || inst.Len == 0 {
			break
		}
		next := pc + uint64(inst.Len)
		if inst.Op == x86asm.MOV && inst.DataSize == 64 {
			if m, ok := inst.Args[1].(x86asm.Mem); ok && m.Base == x86asm.RIP && m.Index == 0 {
				seen[uint64(int64(next)+m.Disp)] = true
			}
		}
		code, pc = code[inst.Len:], next
	}
	out := make([]uint64, 0, len(seen))
	for a := range seen {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
