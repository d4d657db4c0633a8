package gopclntab

import (
	"debug/elf"
	"os"
)

// memory is a set of loaded sections, addressed by virtual address.
type memory struct {
	secs []memSection
}

type memSection struct {
	addr uint64
	data []byte
}

// read returns n bytes at addr, or false if they are not all in one loaded
// section.
func (m *memory) read(addr uint64, n int) ([]byte, bool) {
	for _, s := range m.secs {
		if addr >= s.addr && addr-s.addr < uint64(len(s.data)) {
			off := addr - s.addr
			if n < 0 || uint64(n) > uint64(len(s.data))-off {
				return nil, false
			}
			return s.data[off : off+uint64(n)], true
		}
	}
	return nil, false
}

// image is the ELF file being opened.
type image struct {
	f    *elf.File
	file *os.File // f's file, to map sections from; nil: read them
	maps []mapKey // the mappings its sections were given
}

func newImage(f *elf.File, file *os.File) *image { return &image{f: f, file: file} }

// unmap gives back the mappings of a Table that was not made.
func (img *image) unmap() {
	for _, k := range img.maps {
		unmapSection(k)
	}
	img.maps = nil
}

// sectionData loads every section selected by keep.
func (img *image) sectionData(keep func(*elf.Section) bool) memory {
	var m memory
	for _, s := range img.f.Sections {
		if s.Type == elf.SHT_NOBITS || s.Flags&elf.SHF_ALLOC == 0 || !keep(s) {
			continue
		}
		if d, err := img.sectionBytes(s); err == nil {
			m.secs = append(m.secs, memSection{addr: s.Addr, data: d})
		}
	}
	return m
}

// Word indexes of runtime.moduledata fields (runtime/symtab.go). They are
// the same in every supported version up to etext; gofunc moved when
// covctrs/ecovctrs were added in Go 1.20.
const (
	mdPcHeader    = 0
	mdFuncnametab = 1  // slice: ptr, len, cap
	mdFtab        = 16 // slice: ptr, len, cap
	mdMinpc       = 20
	mdMaxpc       = 21
	mdText        = 22
	mdEtext       = 23
	mdGofunc118   = 38 // Go 1.18, 1.19: ... types, etypes, rodata, gofunc
	mdGofunc120   = 40 // Go 1.20+: covctrs, ecovctrs inserted before end
)

// moduledata holds what we use of runtime.firstmoduledata.
type moduledata struct {
	text   uint64
	gofunc uint64 // 0 if the layout has none or it did not validate
}

// wordReader reads the pointer-sized word at an address.
type wordReader func(addr uint64) (uint64, bool)

// findModuledata locates runtime.firstmoduledata: a word in writable data
// equal to the address of .gopclntab (its pcHeader field) whose other
// fields agree with the header. Position-independent binaries whose data
// words are filled only by dynamic relocations are handled through their
// R_X86_64_RELATIVE entries.
func (t *Table) findModuledata(img *image) (moduledata, bool) {
	data := img.sectionData(func(s *elf.Section) bool {
		return s.Type == elf.SHT_PROGBITS && s.Flags&elf.SHF_WRITE != 0
	})
	ps := uint64(t.hdr.ptrSize)
	direct := func(addr uint64) (uint64, bool) {
		b, ok := data.read(addr, t.hdr.ptrSize)
		if !ok {
			return 0, false
		}
		return readWord(b, t.hdr.order, t.hdr.ptrSize), true
	}
	for _, s := range data.secs {
		for off := uint64(0); off+ps <= uint64(len(s.data)); off += ps {
			if readWord(s.data[off:], t.hdr.order, t.hdr.ptrSize) != t.addr {
				continue
			}
			if md, ok := t.checkModuledata(s.addr+off, direct); ok {
				return md, true
			}
		}
	}
	relocs := img.relativeRelocs()
	if len(relocs) == 0 {
		return moduledata{}, false
	}
	relocated := func(addr uint64) (uint64, bool) {
		if v, ok := relocs[addr]; ok {
			return v, true
		}
		return direct(addr)
	}
	for at, v := range relocs {
		if v == t.addr {
			if md, ok := t.checkModuledata(at, relocated); ok {
				return md, true
			}
		}
	}
	return moduledata{}, false
}

// checkModuledata validates a candidate moduledata at addr and decodes it.
func (t *Table) checkModuledata(addr uint64, read wordReader) (moduledata, bool) {
	ps := uint64(t.hdr.ptrSize)
	word := func(i int) uint64 {
		v, ok := read(addr + uint64(i)*ps)
		if !ok {
			return ^uint64(0) // fails every check below
		}
		return v
	}
	h := &t.hdr
	funcnameOff := uint64(len(t.data) - len(h.funcnametab))
	if word(mdPcHeader) != t.addr || word(mdFuncnametab) != t.addr+funcnameOff ||
		word(mdFtab) != t.addr+h.pclnOff || word(mdFtab+1) != uint64(h.nfunc)+1 {
		return moduledata{}, false
	}
	md := moduledata{text: word(mdText)}
	minpc, maxpc, etext := word(mdMinpc), word(mdMaxpc), word(mdEtext)
	if md.text > minpc || minpc > maxpc || maxpc > etext {
		return moduledata{}, false
	}
	idx := 0
	switch h.ver {
	case ver118:
		idx = mdGofunc118
	case ver120:
		idx = mdGofunc120
	}
	if idx != 0 {
		types, etypes, rodata, gofunc := word(idx-3), word(idx-2), word(idx-1), word(idx)
		if types <= etypes && rodata <= gofunc && gofunc != ^uint64(0) {
			md.gofunc = gofunc
		}
	}
	return md, true
}

// relativeRelocs returns the R_X86_64_RELATIVE relocations of an amd64
// file: relocated address to value.
func (img *image) relativeRelocs() map[uint64]uint64 {
	const rX8664Relative = 8
	f := img.f
	if f.Machine != elf.EM_X86_64 || f.Class != elf.ELFCLASS64 {
		return nil
	}
	m := make(map[uint64]uint64)
	for _, s := range f.Sections {
		if s.Type != elf.SHT_RELA {
			continue
		}
		d, err := s.Data()
		if err != nil {
			continue
		}
		for p := 0; p+24 <= len(d); p += 24 {
			off := f.ByteOrder.Uint64(d[p:])
			info := f.ByteOrder.Uint64(d[p+8:])
			if elf.R_TYPE64(info) == rX8664Relative {
				m[off] = f.ByteOrder.Uint64(d[p+16:])
			}
		}
	}
	return m
}

// symbolValue returns the value of the first of names found in the symbol
// table.
func (img *image) symbolValue(names ...string) (uint64, bool) {
	syms, err := img.f.Symbols()
	if err != nil {
		return 0, false
	}
	for _, name := range names {
		for _, s := range syms {
			if s.Name == name {
				return s.Value, true
			}
		}
	}
	return 0, false
}
