package gopclntab

import "encoding/binary"

// FuncByName returns the entry and end pc of the physical function called
// name (its full name, "main.(*Index).Search"), by walking the function
// table.
func (t *Table) FuncByName(name string) (entry, end uint64, ok bool) {
	for i := 0; i < t.hdr.nfunc; i++ {
		fn, ok := t.funcAt(i)
		if ok && t.funcName(fn.nameOff) == name {
			return fn.entry, fn.end, true
		}
	}
	return 0, 0, false
}

// InlinedInto returns the names of the physical functions whose code holds
// an inlined copy of the function called name, each once, in table order.
// Functions whose inline tree cannot be located are skipped.
func (t *Table) InlinedInto(name string) []string {
	var out []string
	for i := 0; i < t.hdr.nfunc; i++ {
		fn, ok := t.funcAt(i)
		if !ok {
			continue
		}
		tree, ok := t.funcdata(fn, funcdataInlTree)
		inl := t.pcdata(fn, pcdataInlTreeIndex)
		if !ok || inl == 0 {
			continue
		}
		found := false
		t.pcvalues(inl, func(ix int32) bool {
			if call, ok := t.inlinedCallAt(tree, ix); ok && t.funcName(call.nameOff) == name {
				found = true
			}
			return !found
		})
		if found {
			out = append(out, t.funcName(fn.nameOff))
		}
	}
	return out
}

// funcAt decodes function i of the function table.
func (t *Table) funcAt(i int) (funcInfo, bool) {
	entry, off, ok := t.ftabEntry(i)
	if !ok {
		return funcInfo{}, false
	}
	end, _, ok := t.ftabEntry(i + 1)
	if !ok {
		return funcInfo{}, false
	}
	fn, ok := t.decodeFunc(off)
	if !ok {
		return funcInfo{}, false
	}
	fn.entry, fn.end = entry, end
	return fn, true
}

// pcvalues calls yield with each value (>= 0) of the pc-value table at off
// until the table ends or yield returns false. It stops after 1<<20 steps,
// so a corrupt table cannot loop forever.
func (t *Table) pcvalues(off uint32, yield func(int32) bool) {
	h := &t.hdr
	if off == 0 || uint64(off) >= uint64(len(h.pctab)) {
		return
	}
	p := h.pctab[off:]
	val := int32(-1)
	for step := 0; step < 1<<20; step++ {
		uvdelta, n := binary.Uvarint(p)
		if n <= 0 || uvdelta > 0xffffffff || (uvdelta == 0 && step > 0) {
			return
		}
		p = p[n:]
		_, n = binary.Uvarint(p)
		if n <= 0 {
			return
		}
		p = p[n:]
		if uvdelta&1 != 0 {
			val += int32(^(uint32(uvdelta) >> 1))
		} else {
			val += int32(uint32(uvdelta) >> 1)
		}
		if val >= 0 && !yield(val) {
			return
		}
	}
}

// funcFlagAsm is abi.FuncFlagAsm (internal/abi/symtab.go): the function is
// written in assembly.
const funcFlagAsm = 1 << 2

// IsAssembly reports whether the function containing pc is written in
// assembly (Go's ABI0, which keeps nothing in fixed registers). known is
// false where the table does not say: before Go 1.20, or pc in no function.
func (t *Table) IsAssembly(pc uint64) (asm, known bool) {
	fn, ok := t.findFunc(pc)
	if !ok || t.hdr.ver < ver120 {
		return false, false
	}
	b := t.hdr.pclntab[fn.off:]
	return b[fn.fixedSize-3]&funcFlagAsm != 0, true
}
