package symbolize

import "encoding/binary"

// maxLeafFrames bounds how many frameless frames FixLeaf unwinds.
const maxLeafFrames = 32

// FixLeaf repairs the innermost frames of a frame-pointer stack (see
// Resolver). Starting at regs, it unwinds every frame that has not set up a
// frame pointer at its pc, with .eh_frame/.debug_frame CFI for native code
// and the .gopclntab SP-delta table for Go, reading saved values from stack
// (memory from regs.SP up). It stops at the first frame whose CFA is
// RBP-based (from there the frame-pointer chain is right), at a frame it
// cannot unwind, or when stack runs out, and splices the return addresses it
// recovered between chain[0] and the rest of chain.
func (p *Process) FixLeaf(regs Regs, stack []byte, chain []uint64) []uint64 {
	if len(chain) == 0 || chain[0] != regs.IP {
		return chain
	}
	u := unwinder{p: p, stack: stack, base: regs.SP}
	pcs, cfa, bp, bpRestored := u.run(regs)
	if len(pcs) == 0 || (len(chain) > 1 && pcs[0] == chain[1]) {
		return chain // nothing was missing
	}
	out := make([]uint64, 0, len(chain)+len(pcs))
	out = append(out, regs.IP)
	out = append(out, pcs...)
	if !bpRestored || bp == regs.BP {
		// RBP was untouched by the frameless frames: it is the joining
		// frame's frame pointer, and the kernel's walk from it is right.
		return append(out, chain[1:]...)
	}
	// A frameless frame used RBP as a scratch register, so the kernel
	// walked from a bogus RBP and chain[1:] is garbage. Continue the
	// frame-pointer walk from the restored RBP, but only inside our copy of
	// the stack; what lies beyond it is lost.
	return append(out, u.fpWalk(bp, cfa)...)
}

type unwinder struct {
	p     *Process
	stack []byte
	base  uint64 // address of stack[0]
}

// read returns the 8 bytes at addr from the stack copy.
func (u *unwinder) read(addr uint64) (uint64, bool) {
	if addr < u.base || addr-u.base > uint64(len(u.stack)) || addr-u.base+8 > uint64(len(u.stack)) {
		return 0, false
	}
	off := addr - u.base
	return binary.LittleEndian.Uint64(u.stack[off : off+8]), true
}

// run unwinds frameless frames from regs. It returns the recovered return
// addresses, the joining frame's stack pointer (the last frame's CFA), the
// value RBP has in the joining frame and whether that value was restored
// from the stack (rather than left untouched). It stops where a frame's CFA
// is not above its stack pointer: the stack grows down, so such a row is
// wrong or was applied to the wrong frame.
func (u *unwinder) run(regs Regs) (pcs []uint64, sp, bp uint64, restored bool) {
	pc, sp, bp := regs.IP, regs.SP, regs.BP
	for i := 0; i < maxLeafFrames; i++ {
		lookup := pc
		if i > 0 {
			lookup = pc - 1 // a return address may be just past its function
		}
		ra, cfa, savedBP, ok := u.step(lookup, sp)
		if !ok || cfa <= sp {
			break
		}
		if savedBP != nil {
			bp, restored = *savedBP, true
		}
		pcs = append(pcs, ra)
		pc, sp = ra, cfa
	}
	return pcs, sp, bp, restored
}

// step unwinds one frame at pc with stack pointer sp. It returns false when
// the frame has a frame pointer (the joining frame) or cannot be unwound.
func (u *unwinder) step(pc, sp uint64) (ra, cfa uint64, savedBP *uint64, ok bool) {
	r, va, found := u.p.locate(pc)
	if !found {
		return 0, 0, nil, false
	}
	if gt := r.obj.goTable(); gt != nil {
		if _, _, _, isGo := gt.FuncRange(va); isGo {
			return u.stepGo(gt, va, sp)
		}
	}
	f, found := r.obj.findFDE(va)
	if !found {
		return 0, 0, nil, false
	}
	row, err := f.rowAt(va)
	if err != nil || row.cfaExpr || row.cfaReg != dwRSP {
		return 0, 0, nil, false // RBP-based (joining frame), or not evaluable
	}
	cfa = sp + uint64(row.cfaOff)
	raRule := row.regs[dwRA]
	if raRule.kind != ruleOffset {
		return 0, 0, nil, false
	}
	if ra, ok = u.read(cfa + uint64(raRule.off)); !ok || ra == 0 {
		return 0, 0, nil, false
	}
	if bpRule := row.regs[dwRBP]; bpRule.kind == ruleOffset {
		v, ok := u.read(cfa + uint64(bpRule.off))
		if !ok {
			return 0, 0, nil, false
		}
		savedBP = &v
	}
	return ra, cfa, savedBP, true
}

// stepGo unwinds a Go frame that has not pushed its frame pointer yet
// (SP delta 0: a function's entry or a frameless assembly leaf such as
// runtime.futex). Go frames with a frame keep RBP as frame pointer, so the
// chain is right from there.
func (u *unwinder) stepGo(gt goTable, pc, sp uint64) (ra, cfa uint64, savedBP *uint64, ok bool) {
	delta, ok := gt.SPDelta(pc)
	if !ok || delta != 0 {
		return 0, 0, nil, false
	}
	if ra, ok = u.read(sp); !ok || ra == 0 {
		return 0, 0, nil, false
	}
	return ra, sp + 8, nil, true
}

// fpWalk follows saved frame pointers from bp while they stay inside the
// stack copy and the chain grows. sp is the stack pointer of the frame bp
// belongs to: a frame pointer below it, or not 8-byte aligned, is not one,
// and the walk returns nothing.
func (u *unwinder) fpWalk(bp, sp uint64) []uint64 {
	if bp < sp || bp&7 != 0 {
		return nil
	}
	var out []uint64
	for i := 0; i < 64; i++ {
		ra, ok1 := u.read(bp + 8)
		next, ok2 := u.read(bp)
		if !ok1 || ra == 0 {
			break
		}
		out = append(out, ra)
		if !ok2 || next <= bp || next&7 != 0 {
			break // the chain does not grow: what next points to is no frame
		}
		bp = next
	}
	return out
}
