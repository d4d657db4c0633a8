package gopclntab

import (
	"bytes"
	"encoding/binary"
	"sort"
)

// Indexes into a _func's pcdata and funcdata arrays (internal/abi/symtab.go).
const (
	pcdataInlTreeIndex = 2
	funcdataInlTree    = 3
)

// funcInfo is one decoded runtime._func (runtime/runtime2.go).
type funcInfo struct {
	off       int // offset of the _func in hdr.pclntab
	entry     uint64
	end       uint64 // next function's entry
	nameOff   int32
	pcsp      uint32
	pcfile    uint32
	pcln      uint32
	npcdata   uint32
	cuOffset  uint32
	nfuncdata uint8
	funcID    uint8 // the runtime's abi.FuncID; its values vary with the Go version
	fixedSize int   // size of the _func before its pcdata array
}

// ftabEntry returns functab entry i (0 <= i <= nfunc): the function's entry
// pc and the offset of its _func in pclntab.
func (t *Table) ftabEntry(i int) (entry, funcOff uint64, ok bool) {
	h := &t.hdr
	if i < 0 || i > h.nfunc {
		return 0, 0, false
	}
	if h.ver == ver116 {
		p := i * 2 * h.ptrSize
		return readWord(h.pclntab[p:], h.order, h.ptrSize), readWord(h.pclntab[p+h.ptrSize:], h.order, h.ptrSize), true
	}
	p := i * 8
	return t.textStart + uint64(h.order.Uint32(h.pclntab[p:])), uint64(h.order.Uint32(h.pclntab[p+4:])), true
}

// findFunc returns the function whose code contains pc.
func (t *Table) findFunc(pc uint64) (funcInfo, bool) {
	n := t.hdr.nfunc
	if n == 0 {
		return funcInfo{}, false
	}
	// First entry with entry > pc; the function is the one before it.
	i := sort.Search(n+1, func(i int) bool {
		e, _, _ := t.ftabEntry(i)
		return e > pc
	})
	if i == 0 || i > n {
		return funcInfo{}, false
	}
	entry, off, _ := t.ftabEntry(i - 1)
	end, _, _ := t.ftabEntry(i)
	fn, ok := t.decodeFunc(off)
	if !ok {
		return funcInfo{}, false
	}
	fn.entry, fn.end = entry, end
	return fn, true
}

// decodeFunc decodes the fixed part of the _func at off in pclntab.
func (t *Table) decodeFunc(off uint64) (funcInfo, bool) {
	h := &t.hdr
	entrySize := 4
	if h.ver == ver116 {
		entrySize = h.ptrSize
	}
	fixed := entrySize + 8*4 + 4 // entry, 8 uint32 fields, funcID..nfuncdata
	if h.ver >= ver120 {
		fixed += 4 // startLine
	}
	if off > uint64(len(h.pclntab)) || uint64(len(h.pclntab))-off < uint64(fixed) {
		return funcInfo{}, false
	}
	b := h.pclntab[off:]
	u32 := func(i int) uint32 { return h.order.Uint32(b[entrySize+4*i:]) }
	fn := funcInfo{
		off:       int(off),
		nameOff:   int32(u32(0)),
		pcsp:      u32(3),
		pcfile:    u32(4),
		pcln:      u32(5),
		npcdata:   u32(6),
		cuOffset:  u32(7),
		nfuncdata: b[fixed-1],
		funcID:    b[fixed-4],
		fixedSize: fixed,
	}
	return fn, true
}

// pcdata returns the offset in pctab of the function's pcdata table i, or
// 0 if there is none.
func (t *Table) pcdata(fn funcInfo, i uint32) uint32 {
	if i >= fn.npcdata {
		return 0
	}
	p := uint64(fn.off) + uint64(fn.fixedSize) + uint64(i)*4
	if p+4 > uint64(len(t.hdr.pclntab)) {
		return 0
	}
	return t.hdr.order.Uint32(t.hdr.pclntab[p:])
}

// funcdata returns the address of the function's funcdata i, or false if
// it has none or it cannot be located.
func (t *Table) funcdata(fn funcInfo, i uint8) (uint64, bool) {
	h := &t.hdr
	if i >= fn.nfuncdata {
		return 0, false
	}
	p := uint64(fn.off) + uint64(fn.fixedSize) + uint64(fn.npcdata)*4
	if h.ver == ver116 {
		// An array of pointers, aligned to the pointer size in memory.
		if h.ptrSize == 8 && (t.addr+h.pclnOff+p)&4 != 0 {
			p += 4
		}
		p += uint64(i) * uint64(h.ptrSize)
		if p+uint64(h.ptrSize) > uint64(len(h.pclntab)) {
			return 0, false
		}
		v := readWord(h.pclntab[p:], h.order, h.ptrSize)
		return v, v != 0
	}
	p += uint64(i) * 4
	if t.gofunc == 0 || p+4 > uint64(len(h.pclntab)) {
		return 0, false
	}
	v := h.order.Uint32(h.pclntab[p:])
	if v == ^uint32(0) {
		return 0, false
	}
	return t.gofunc + uint64(v), true
}

// pcvalue evaluates the pc-value table at off in pctab for pc, in a
// function starting at entry (runtime/symtab.go: pcvalue, step). Each step
// is a zig-zag varint value delta followed by a varint pc delta in units of
// the pc quantum; the value applies to pcs below the new pc. ok is false if
// there is no table or it ends before pc.
func (t *Table) pcvalue(off uint32, entry, pc uint64) (int32, bool) {
	h := &t.hdr
	if off == 0 || pc < entry || uint64(off) >= uint64(len(h.pctab)) {
		return 0, false
	}
	p := h.pctab[off:]
	val, cur := int32(-1), entry
	for first := true; ; first = false {
		uvdelta, n := binary.Uvarint(p)
		if n <= 0 || uvdelta > 0xffffffff || (uvdelta == 0 && !first) {
			return 0, false
		}
		p = p[n:]
		pcdelta, n := binary.Uvarint(p)
		if n <= 0 || pcdelta > 0xffffffff {
			return 0, false
		}
		p = p[n:]
		if uvdelta&1 != 0 {
			val += int32(^(uint32(uvdelta) >> 1))
		} else {
			val += int32(uint32(uvdelta) >> 1)
		}
		cur += pcdelta * h.quantum
		if pc < cur {
			return val, true
		}
	}
}

// funcName returns the name at off in funcnametab, or "?".
func (t *Table) funcName(off int32) string {
	return cstring(t.hdr.funcnametab, int64(off))
}

// fileLine returns the source position of pc in fn (innermost: for an
// inlined body, the position in the inlined function).
func (t *Table) fileLine(fn funcInfo, pc uint64) (string, int) {
	h := &t.hdr
	file := "?"
	if fileno, ok := t.pcvalue(fn.pcfile, fn.entry, pc); ok && fileno >= 0 {
		p := (uint64(fn.cuOffset) + uint64(fileno)) * 4
		if p+4 <= uint64(len(h.cutab)) {
			if off := h.order.Uint32(h.cutab[p:]); off != ^uint32(0) {
				file = cstring(h.filetab, int64(off))
			}
		}
	}
	line, ok := t.pcvalue(fn.pcln, fn.entry, pc)
	if !ok || line < 0 {
		line = 0
	}
	return file, int(line)
}

// cstring returns the NUL-terminated string at off in b, or "?" if off is
// out of range or the string is not terminated.
func cstring(b []byte, off int64) string {
	if off < 0 || off >= int64(len(b)) {
		return "?"
	}
	s := b[off:]
	n := bytes.IndexByte(s, 0)
	if n < 0 {
		return "?"
	}
	return string(s[:n])
}
