package symbolize

import (
	"debug/elf"
	"testing"
)

// FuzzParseCFI feeds mutated .eh_frame/.debug_frame bytes to the parser and
// the CFA evaluator: errors are fine, panics are not.
func FuzzParseCFI(f *testing.F) {
	// A hand-written CIE ("zR", pcrel|sdata4) and one FDE with a few rules.
	f.Add([]byte{
		0x14, 0, 0, 0, 0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 0x10, 1, 0x1b,
		0x0c, 0x07, 0x08, 0x90, 0x01, 0, 0,
		0x1c, 0, 0, 0, 0x1c, 0, 0, 0, 0xe0, 0xff, 0xff, 0xff, 0x20, 0, 0, 0, 0,
		0x41, 0x0e, 0x10, 0x86, 0x02, 0x43, 0x0d, 0x06, 0x0a, 0x0b, 0x2e, 0x08, 0x0c, 0x07, 0x08, 0, 0,
	}, true)
	if ef, err := elf.Open("/lib/x86_64-linux-gnu/libc.so.6"); err == nil {
		if s := ef.Section(".eh_frame"); s != nil {
			if data, err := s.Data(); err == nil && len(data) > 1024 {
				f.Add(data[:1024], true)
			}
		}
		ef.Close()
	}
	f.Fuzz(func(t *testing.T, data []byte, isEH bool) {
		tab, _ := parseCFI(data, 0x1000, isEH)
		for i := range tab.fdes {
			if i > 64 {
				break
			}
			fd := &tab.fdes[i]
			for _, pc := range []uint64{fd.lo, fd.lo + 1, fd.lo + 17, fd.hi - 1} {
				fd.rowAt(pc)
			}
			tab.find(fd.lo)
		}
	})
}
