package symbolize

import "fmt"

// This file evaluates a CFA program (DW_CFA_* instructions) up to a pc and
// yields the unwind row there: how to compute the CFA and where the return
// address and the callee-saved registers live.

// x86-64 DWARF register numbers we care about.
const (
	dwRBP = 6
	dwRSP = 7
	dwRA  = 16
	nRegs = 17
)

type ruleKind uint8

const (
	ruleSame      ruleKind = iota // register unchanged (also "undefined" for our purposes unless RA)
	ruleUndefined                 // register has no recoverable value
	ruleOffset                    // saved at CFA+off
	ruleValOffset                 // value is CFA+off
	ruleRegister                  // value is in register reg
	ruleExpr                      // DWARF expression: not evaluated
)

type regRule struct {
	kind ruleKind
	off  int64
	reg  uint64
	expr []byte // ruleExpr: the expression (DW_CFA_expression; not for val_expression)
}

// cfaRow is one row of the unwind table.
type cfaRow struct {
	cfaReg  uint64
	cfaOff  int64
	cfaExpr bool   // CFA is a DWARF expression: not evaluated here
	expr    []byte // the CFA expression, when cfaExpr
	regs    [nRegs]regRule
}

const maxStateStack = 64

// rowAt runs the CIE's initial instructions and the FDE's instructions up
// to pc and returns the row in effect at pc.
func (f *fde) rowAt(pc uint64) (cfaRow, error) {
	var row cfaRow
	ex := cfaExec{c: f.cie}
	if err := ex.run(&row, nil, f.cie.initial, 0, ^uint64(0), 0); err != nil {
		return row, fmt.Errorf("CIE initial instructions: %w", err)
	}
	initial := row
	if err := ex.run(&row, &initial, f.instr, f.lo, pc, f.base); err != nil {
		return row, fmt.Errorf("FDE at %#x: %w", f.lo, err)
	}
	return row, nil
}

type cfaExec struct {
	c     *cie
	stack []cfaRow
	// advance, when set, is called with each row before the location
	// moves on: the row holds from loc up to the next call's loc.
	advance func(loc uint64, row *cfaRow)
	loc     uint64 // the location when run returned
}

// run executes prog starting at location loc and stops when the location
// advances past pc. initial is the row after the CIE's initial
// instructions (for DW_CFA_restore); nil while running them.
func (ex *cfaExec) run(row, initial *cfaRow, prog []byte, loc, pc, base uint64) error {
	r := &reader{b: prog}
	for r.off < len(r.b) {
		op := r.u8()
		var adv uint64
		switch op >> 6 {
		case 1: // DW_CFA_advance_loc
			adv = uint64(op & 0x3f)
		case 2: // DW_CFA_offset
			setRule(row, uint64(op&0x3f), regRule{kind: ruleOffset, off: int64(r.uleb()) * ex.c.dataAlign})
		case 3: // DW_CFA_restore
			restoreRule(row, initial, uint64(op&0x3f))
		default:
			var err error
			adv, err = ex.extended(row, initial, r, op, base)
			if err != nil {
				return err
			}
			if op == 0x01 { // DW_CFA_set_loc: absolute
				if ex.advance != nil {
					ex.advance(loc, row)
				}
				if adv > pc {
					ex.loc = adv
					return nil
				}
				loc = adv
				continue
			}
		}
		if r.err != nil {
			return r.err
		}
		if adv != 0 {
			if ex.advance != nil {
				ex.advance(loc, row)
			}
			loc += adv * ex.c.codeAlign
			if loc > pc {
				ex.loc = loc
				return nil
			}
		}
	}
	ex.loc = loc
	return nil
}

// extended executes one opcode whose high two bits are zero. For advance
// opcodes it returns the delta (or the new location for DW_CFA_set_loc).
func (ex *cfaExec) extended(row, initial *cfaRow, r *reader, op byte, base uint64) (uint64, error) {
	da := ex.c.dataAlign
	switch op {
	case 0x00: // nop
	case 0x01: // set_loc
		return r.encoded(ex.c.fdeEnc, base)
	case 0x02:
		return uint64(r.u8()), nil
	case 0x03:
		return uint64(r.u16()), nil
	case 0x04:
		return uint64(r.u32()), nil
	case 0x05: // offset_extended
		reg := r.uleb()
		setRule(row, reg, regRule{kind: ruleOffset, off: int64(r.uleb()) * da})
	case 0x06: // restore_extended
		restoreRule(row, initial, r.uleb())
	case 0x07: // undefined
		setRule(row, r.uleb(), regRule{kind: ruleUndefined})
	case 0x08: // same_value
		setRule(row, r.uleb(), regRule{kind: ruleSame})
	case 0x09: // register
		reg := r.uleb()
		setRule(row, reg, regRule{kind: ruleRegister, reg: r.uleb()})
	case 0x0a: // remember_state
		if len(ex.stack) >= maxStateStack {
			return 0, fmt.Errorf("state stack overflow")
		}
		ex.stack = append(ex.stack, *row)
	case 0x0b: // restore_state
		if len(ex.stack) == 0 {
			return 0, fmt.Errorf("restore_state with empty stack")
		}
		*row = ex.stack[len(ex.stack)-1] // the whole row, CFA rule included
		ex.stack = ex.stack[:len(ex.stack)-1]
	case 0x0c: // def_cfa
		row.cfaReg = r.uleb()
		row.cfaOff = int64(r.uleb())
		row.cfaExpr, row.expr = false, nil
	case 0x0d: // def_cfa_register
		row.cfaReg = r.uleb()
	case 0x0e: // def_cfa_offset
		row.cfaOff = int64(r.uleb())
	case 0x0f: // def_cfa_expression
		row.expr = r.take(int(min(r.uleb(), uint64(len(r.b)))))
		row.cfaExpr = true
	case 0x10: // expression: the register is saved at the address it computes
		reg := r.uleb()
		setRule(row, reg, regRule{kind: ruleExpr, expr: r.take(int(min(r.uleb(), uint64(len(r.b)))))})
	case 0x16: // val_expression
		reg := r.uleb()
		r.take(int(min(r.uleb(), uint64(len(r.b)))))
		setRule(row, reg, regRule{kind: ruleExpr})
	case 0x11: // offset_extended_sf
		reg := r.uleb()
		setRule(row, reg, regRule{kind: ruleOffset, off: r.sleb() * da})
	case 0x12: // def_cfa_sf
		row.cfaReg = r.uleb()
		row.cfaOff = r.sleb() * da
		row.cfaExpr, row.expr = false, nil
	case 0x13: // def_cfa_offset_sf
		row.cfaOff = r.sleb() * da
	case 0x14: // val_offset
		reg := r.uleb()
		setRule(row, reg, regRule{kind: ruleValOffset, off: int64(r.uleb()) * da})
	case 0x15: // val_offset_sf
		reg := r.uleb()
		setRule(row, reg, regRule{kind: ruleValOffset, off: r.sleb() * da})
	case 0x2e: // GNU_args_size
		r.uleb()
	case 0x2f: // GNU_negative_offset_extended
		reg := r.uleb()
		setRule(row, reg, regRule{kind: ruleOffset, off: -int64(r.uleb()) * da})
	default:
		return 0, fmt.Errorf("unknown CFA opcode %#x", op)
	}
	return 0, r.err
}

func setRule(row *cfaRow, reg uint64, rule regRule) {
	if reg < nRegs {
		row.regs[reg] = rule
	}
}

func restoreRule(row, initial *cfaRow, reg uint64) {
	if reg >= nRegs {
		return
	}
	if initial == nil {
		row.regs[reg] = regRule{}
		return
	}
	row.regs[reg] = initial.regs[reg]
}
