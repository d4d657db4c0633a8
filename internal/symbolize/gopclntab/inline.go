package gopclntab

import "github.com/wallprof/wallprof/internal/profile"

// maxInlineDepth bounds the walk up an inline tree, so corrupt parent links
// cannot loop forever.
const maxInlineDepth = 256

// inlinedCall is the part of runtime.inlinedCall (runtime/symtabinl.go) we
// use. Its layout depends on the version:
//
//	Go 1.20+:      funcID uint8, _ [3]byte, nameOff int32, parentPc int32, startLine int32
//	Go 1.16..1.19: parent int16, funcID uint8, _ byte, file int32, line int32, func_ int32, parentPc int32
type inlinedCall struct {
	nameOff  int32 // offset in funcnametab of the inlined function's name
	parentPc int32 // offset from the entry of a pc whose position is the call site
}

// inlinedCallAt decodes entry ix of the inline tree at address tree.
func (t *Table) inlinedCallAt(tree uint64, ix int32) (inlinedCall, bool) {
	size, nameAt, parentAt := uint64(20), 12, 16
	if t.hdr.ver >= ver120 {
		size, nameAt, parentAt = 16, 4, 8
	}
	if ix < 0 {
		return inlinedCall{}, false
	}
	b, ok := t.mem.read(tree+uint64(ix)*size, int(size))
	if !ok {
		return inlinedCall{}, false
	}
	o := t.hdr.order
	return inlinedCall{
		nameOff:  int32(o.Uint32(b[nameAt:])),
		parentPc: int32(o.Uint32(b[parentAt:])),
	}, true
}

// frames expands pc in fn into its inlined frames and the physical frame,
// innermost first, the way runtime.inlineUnwinder does: the frame of
// inline-tree entry ix is followed by the frame at entry+parentPc.
func (t *Table) frames(fn funcInfo, pc uint64) []profile.Frame {
	tree, haveTree := t.funcdata(fn, funcdataInlTree)
	inlIndex := t.pcdata(fn, pcdataInlTreeIndex)
	var out []profile.Frame
	for depth := 0; ; depth++ {
		file, line := t.fileLine(fn, pc)
		if haveTree && inlIndex != 0 && depth < maxInlineDepth {
			if call, ok := t.inlinedAt(fn, tree, inlIndex, pc); ok {
				out = append(out, profile.Frame{Function: t.funcName(call.nameOff), File: file, Line: line})
				pc = fn.entry + uint64(call.parentPc)
				continue
			}
		}
		return append(out, profile.Frame{Function: t.funcName(fn.nameOff), File: file, Line: line})
	}
}

// inlinedAt returns the inlined call pc is in, if any and if its parent pc
// lies inside fn.
func (t *Table) inlinedAt(fn funcInfo, tree uint64, inlIndex uint32, pc uint64) (inlinedCall, bool) {
	ix, ok := t.pcvalue(inlIndex, fn.entry, pc)
	if !ok || ix < 0 {
		return inlinedCall{}, false
	}
	call, ok := t.inlinedCallAt(tree, ix)
	if !ok || call.parentPc < 0 || fn.entry+uint64(call.parentPc) >= fn.end {
		return inlinedCall{}, false
	}
	return call, true
}
