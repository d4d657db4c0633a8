package gopclntab

import (
	"encoding/binary"
	"testing"

	"github.com/wallprof/wallprof/internal/profile"
)

const synthText = 0x401000

// synthTable writes a minimal Go 1.20-layout pclntab by hand: two
// functions of 16 bytes at synthText, main.a (a frame of 8 bytes from pc+4,
// lines 10 then 11) and main.b (line 20), both in /src/a.go.
func synthTable() []byte {
	le := binary.LittleEndian
	const hdrSize = 8 + 8*8
	names := []byte("\x00main.a\x00main.b\x00")
	cutab := le.AppendUint32(nil, 0)
	files := []byte("/src/a.go\x00")
	// pc-value tables: pairs of (zig-zag value delta, pc delta), then 0.
	pctab := []byte{0,
		2, 4, 16, 12, 0, // pcsp at 1: 0 for [0,4), 8 for [4,16)
		2, 16, 0, // pcfile at 6: file 0
		22, 8, 2, 8, 0, // pcln at 9: line 10, then 11
		42, 16, 0, // pcln at 14: line 20
	}
	var pcln []byte
	funcOff := uint32(3 * 8)
	for i, e := range []uint32{0, 16, 32} {
		pcln = le.AppendUint32(pcln, e)
		pcln = le.AppendUint32(pcln, funcOff+uint32(i)*44)
	}
	for _, fn := range [][2]uint32{{1, 9}, {8, 14}} {
		for _, v := range []uint32{0 /*entryOff*/, fn[0], 0, 0, 1 /*pcsp*/, 6 /*pcfile*/, fn[1], 0, 0, 0 /*startLine*/} {
			pcln = le.AppendUint32(pcln, v)
		}
		pcln = append(pcln, 0, 0, 0, 0) // funcID, flag, pad, nfuncdata
	}
	le.PutUint32(pcln[funcOff+44:], 16) // main.b's entryOff
	off := uint64(hdrSize)
	var offs []uint64
	for _, b := range [][]byte{names, cutab, files, pctab, pcln} {
		offs = append(offs, off)
		off += uint64(len(b))
	}
	out := le.AppendUint32(nil, magic120)
	out = append(out, 0, 0, 1, 8)
	for _, w := range append([]uint64{2, 1, synthText}, offs...) {
		out = le.AppendUint64(out, w)
	}
	for _, b := range [][]byte{names, cutab, files, pctab, pcln} {
		out = append(out, b...)
	}
	return out
}

func TestSynthetic(t *testing.T) {
	tab, err := parse(synthTable(), 0x500000, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s, e := tab.TextRange(); s != synthText || e != synthText+32 {
		t.Errorf("TextRange = %#x-%#x", s, e)
	}
	for _, c := range []struct {
		pc    uint64
		fn    string
		line  int
		delta int64
	}{{synthText, "main.a", 10, 0}, {synthText + 4, "main.a", 10, 8}, {synthText + 9, "main.a", 11, 8}, {synthText + 16, "main.b", 20, 0}} {
		want := []profile.Frame{{Function: c.fn, File: "/src/a.go", Line: c.line}}
		if got := tab.Lookup(c.pc); !equalFrames(got, want) {
			t.Errorf("Lookup(%#x) = %v, want %v", c.pc, got, want)
		}
		if d, ok := tab.SPDelta(c.pc); !ok || d != c.delta {
			t.Errorf("SPDelta(%#x) = %d, %v, want %d", c.pc, d, ok, c.delta)
		}
	}
	if entry, end, name, ok := tab.FuncRange(synthText + 20); !ok || entry != synthText+16 || end != synthText+32 || name != "main.b" {
		t.Errorf("FuncRange = %#x, %#x, %q, %v", entry, end, name, ok)
	}
	for _, pc := range []uint64{0, synthText - 1, synthText + 32} {
		if tab.Lookup(pc) != nil {
			t.Errorf("Lookup(%#x) not nil", pc)
		}
	}
}

// FuzzOpen feeds arbitrary bytes as a .gopclntab section. The same bytes
// also stand in for the memory holding the inline trees, so that the
// inline decoding sees hostile input too. Nothing may panic.
func FuzzOpen(f *testing.F) {
	f.Add(synthTable())
	f.Add([]byte{0xf1, 0xff, 0xff, 0xff, 0, 0, 1, 8})
	f.Add([]byte{0xff, 0xff, 0xff, 0xfa, 0, 0, 1, 4, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		const addr = 0x500000
		tab, err := parse(data, addr, nil)
		if err != nil {
			return
		}
		tab.mem = memory{secs: []memSection{{addr: addr, data: data}}}
		tab.gofunc = addr
		start, end := tab.TextRange()
		probe := func(pc uint64) {
			tab.Lookup(pc)
			tab.SPDelta(pc)
			tab.FuncRange(pc)
		}
		for _, pc := range []uint64{0, start, start + 1, end - 1, end, synthText + 4, ^uint64(0)} {
			probe(pc)
		}
		if end > start {
			for i := uint64(0); i < 32; i++ {
				probe(start + (end-start)/32*i)
			}
		}
	})
}
