package gopclntab

import "debug/elf"

// parse builds a Table from the bytes of a .gopclntab section loaded at
// addr. img, if not nil, is the file it came from: it is used to find
// runtime.firstmoduledata (text start, inline trees).
func parse(data []byte, addr uint64, img *image) (*Table, error) {
	h, err := parseHeader(data)
	if err != nil {
		return nil, err
	}
	t := &Table{hdr: h, data: data, addr: addr, textStart: h.textStart}
	if img != nil {
		t.resolveModule(img)
	}
	return t, nil
}

// resolveModule fills in what the pclntab header leaves to the module
// data: the text start (not stored from Go 1.26 on) and the base of the
// funcdata offsets (gofunc), and loads the section holding the inline trees.
func (t *Table) resolveModule(img *image) {
	md, found := t.findModuledata(img)
	if t.hdr.ver >= ver118 && t.textStart == 0 {
		switch text := img.f.Section(".text"); {
		case found:
			t.textStart = md.text
		case text != nil:
			t.textStart = text.Addr // what debug/gosym assumes
		}
	}
	inSection := func(addr uint64) func(*elf.Section) bool {
		return func(s *elf.Section) bool {
			return s.Type == elf.SHT_PROGBITS && addr >= s.Addr && addr-s.Addr < s.Size
		}
	}
	switch {
	case t.hdr.ver == ver116:
		// funcdata are absolute pointers into go.func.* in .rodata.
		t.mem = img.sectionData(func(s *elf.Section) bool { return s.Name == ".rodata" })
	case md.gofunc != 0:
		t.gofunc = md.gofunc
	default:
		if v, ok := img.symbolValue("go:func.*", "go.func.*"); ok {
			t.gofunc = v
		}
	}
	if t.gofunc != 0 {
		t.mem = img.sectionData(inSection(t.gofunc))
		if len(t.mem.secs) == 0 {
			t.gofunc = 0 // points nowhere we can read: no inline trees
		}
	}
}
