package symbolize

import (
	"debug/elf"
	"sort"
	"strings"

	"github.com/ianlancetaylor/demangle"
)

// symTable is the sorted function symbols of one object (.symtab and
// .dynsym, plus the separate debug file's .symtab).
type symTable struct {
	syms []sym
}

type sym struct {
	lo, hi uint64 // hi == lo: zero-sized, extends to the next symbol or section end
	name   string // as in the file (mangled)
}

func newSymTable(files []*elf.File) *symTable {
	var all []sym
	for _, f := range files {
		for _, load := range []func() ([]elf.Symbol, error){f.Symbols, f.DynamicSymbols} {
			ss, err := load()
			if err != nil {
				continue
			}
			for _, s := range ss {
				if !isFuncSym(f, s) {
					continue
				}
				all = append(all, sym{lo: s.Value, hi: s.Value + s.Size, name: s.Name})
			}
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].lo != all[j].lo {
			return all[i].lo < all[j].lo
		}
		return better(all[i], all[j])
	})
	t := &symTable{}
	for _, s := range all {
		if n := len(t.syms); n > 0 && t.syms[n-1].lo == s.lo {
			continue // an alias at the same address: keep the best one
		}
		t.syms = append(t.syms, s)
	}
	// Zero-sized symbols (hand-written assembly) extend to the next symbol,
	// but never past the end of their section.
	for i := range t.syms {
		s := &t.syms[i]
		if s.hi > s.lo {
			continue
		}
		s.hi = sectionEnd(files[0], s.lo)
		if i+1 < len(t.syms) && t.syms[i+1].lo < s.hi {
			s.hi = t.syms[i+1].lo
		}
	}
	return t
}

// better orders aliases at one address: sized before zero-sized, then names
// not starting with an underscore, then shorter names, then by name.
func better(a, b sym) bool {
	if (a.hi > a.lo) != (b.hi > b.lo) {
		return a.hi > a.lo
	}
	au, bu := strings.HasPrefix(a.name, "_") && !strings.HasPrefix(a.name, "_Z") && !strings.HasPrefix(a.name, "_R"),
		strings.HasPrefix(b.name, "_") && !strings.HasPrefix(b.name, "_Z") && !strings.HasPrefix(b.name, "_R")
	if au != bu {
		return !au
	}
	if len(a.name) != len(b.name) {
		return len(a.name) < len(b.name)
	}
	return a.name < b.name
}

func isFuncSym(f *elf.File, s elf.Symbol) bool {
	typ := elf.ST_TYPE(s.Info)
	if typ != elf.STT_FUNC && typ != elf.STT_GNU_IFUNC && !(typ == elf.STT_NOTYPE && s.Name != "") {
		return false
	}
	if s.Section == elf.SHN_UNDEF || s.Section >= elf.SHN_LORESERVE || s.Name == "" || s.Value == 0 {
		return false
	}
	if int(s.Section) >= len(f.Sections) {
		return false
	}
	sec := f.Sections[s.Section]
	if sec.Flags&elf.SHF_EXECINSTR == 0 {
		return false
	}
	// Local labels (".L...") and mapping symbols ("$x") are not functions.
	return !strings.HasPrefix(s.Name, ".L") && !strings.HasPrefix(s.Name, "$")
}

func sectionEnd(f *elf.File, addr uint64) uint64 {
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC != 0 && addr >= s.Addr && addr < s.Addr+s.Size {
			return s.Addr + s.Size
		}
	}
	return addr + 1
}

// find returns the symbol containing pc.
func (t *symTable) find(pc uint64) (sym, bool) {
	i := sort.Search(len(t.syms), func(i int) bool { return t.syms[i].lo > pc }) - 1
	// A sized symbol may be followed by a smaller one nested inside it;
	// look back a little for the innermost symbol containing pc.
	for j := i; j >= 0 && j > i-4; j-- {
		if pc < t.syms[j].hi {
			return t.syms[j], true
		}
	}
	return sym{}, false
}

// lookup returns the demangled name of the function containing pc, or "".
func (t *symTable) lookup(pc uint64) string {
	s, ok := t.find(pc)
	if !ok {
		return ""
	}
	return demangleName(s.name)
}

// demangleName demangles C++ and Rust names the way c++filt prints them
// (with parameters); anything else is returned unchanged.
func demangleName(name string) string {
	if strings.HasPrefix(name, "_Z") || strings.HasPrefix(name, "_R") || strings.HasPrefix(name, "__Z") {
		return demangle.Filter(name)
	}
	return name
}
