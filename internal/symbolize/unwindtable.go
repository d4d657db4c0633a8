package symbolize

import (
	"bytes"
	"debug/elf"
	"os"
	"sort"
	"strings"
)

// This file turns an object's call frame information (.eh_frame, else
// .debug_frame) into the compact table the in-kernel unwinder searches
// (doc/unwind.md): one 8-byte row per address where the rule changes, sorted
// by address, saying how to find the CFA, where the return address is (always
// CFA-8 on x86-64, or the row says it cannot be found) and where RBP was
// saved.

// UnwindKind says how a row finds the caller's frame.
type UnwindKind uint8

// The kinds, as the BPF program (unw_row.kind) reads them.
const (
	// UnwindNone: no CFI covers the address; the unwinder follows the frame
	// pointer (Go code, JIT code, and gaps between functions).
	UnwindNone UnwindKind = iota
	UnwindRSP             // CFA = RSP + CFAOff
	UnwindRBP             // CFA = RBP + CFAOff
	// UnwindPLT: the PLT stub's expression, CFA = RSP + 8, plus 8 when
	// (RIP & 15) >= CFAOff.
	UnwindPLT
	UnwindEnd         // the return address is undefined: the outermost frame
	UnwindUnsupported // a rule the unwinder cannot follow: it stops here
	// UnwindDerefRBP: CFA = *(RBP + int16(CFAOff)), GCC's rule in a
	// function that realigns its stack (the DRAP pattern: AVX code).
	UnwindDerefRBP

	// UnwindBPAtRBP, or'ed into a kind, says the caller's RBP was saved at
	// RBP + 8*BPOff (a DW_CFA_expression), not at CFA + 8*BPOff.
	UnwindBPAtRBP UnwindKind = 0x80
	// UnwindCFAScaled, or'ed into UnwindRSP or UnwindRBP, says CFAOff is in
	// 8-byte units: a frame over 64 KiB (Stockfish has one of 80 KiB).
	UnwindCFAScaled UnwindKind = 0x40
)

// kindFlags are the bits of a kind that are not the kind itself.
const kindFlags = UnwindBPAtRBP | UnwindCFAScaled

// UnwindRow is one row of an unwind table.
type UnwindRow struct {
	PC     uint32 // offset from the table's Base
	CFAOff uint16
	Kind   UnwindKind
	// BPOff is where the caller's RBP was saved, in 8-byte units from the
	// CFA (RBP = *(CFA + 8*BPOff)); 0 when RBP still holds it.
	BPOff int8
}

// UnwindTable is the unwind table of one object.
type UnwindTable struct {
	Base uint64 // the ELF virtual address row PCs count from
	Rows []UnwindRow
}

// maxTableSpan is the largest address range one table covers: row PCs are
// 32-bit offsets from Base.
const maxTableSpan = 1 << 32

// pltExpr is the CFA expression binutils gives PLT entries, up to its
// threshold literal: DW_OP_breg7 8; DW_OP_breg16 0; DW_OP_lit15; DW_OP_and;
// DW_OP_litN; DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus.
var (
	pltExprHead = []byte{0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a}
	pltExprTail = []byte{0x2a, 0x33, 0x24, 0x22}
)

// unwindRow compacts one CFI row.
func unwindRow(row *cfaRow) UnwindRow {
	unsupported := UnwindRow{Kind: UnwindUnsupported}
	switch ra := row.regs[dwRA]; {
	case ra.kind == ruleUndefined:
		return UnwindRow{Kind: UnwindEnd}
	case ra.kind != ruleOffset || ra.off != -8:
		return unsupported
	}
	var out UnwindRow
	switch {
	case row.cfaExpr:
		if off, ok := rbpOffsetExpr(row.expr, true); ok && off >= -1<<15 && off < 1<<15 {
			out = UnwindRow{Kind: UnwindDerefRBP, CFAOff: uint16(int16(off))}
			break
		}
		e := row.expr
		if len(e) != len(pltExprHead)+1+len(pltExprTail) || !bytes.HasPrefix(e, pltExprHead) ||
			!bytes.HasSuffix(e, pltExprTail) || e[len(pltExprHead)] < 0x30 || e[len(pltExprHead)] > 0x4f {
			return unsupported
		}
		out = UnwindRow{Kind: UnwindPLT, CFAOff: uint16(e[len(pltExprHead)] - 0x30)}
	case row.cfaReg != dwRSP && row.cfaReg != dwRBP:
		return unsupported
	case row.cfaOff < 0 || row.cfaOff > 0xffff*8 || (row.cfaOff > 0xffff && row.cfaOff%8 != 0):
		return unsupported
	default:
		out = UnwindRow{Kind: UnwindRSP, CFAOff: uint16(row.cfaOff)}
		if row.cfaReg == dwRBP {
			out.Kind = UnwindRBP
		}
		if row.cfaOff > 0xffff {
			out.Kind |= UnwindCFAScaled
			out.CFAOff = uint16(row.cfaOff / 8)
		}
	}
	switch bp := row.regs[dwRBP]; bp.kind {
	case ruleOffset:
		if bp.off%8 != 0 || bp.off/8 < -128 || bp.off/8 > 127 || bp.off == 0 {
			return unsupported
		}
		out.BPOff = int8(bp.off / 8)
	case ruleSame:
	case ruleExpr:
		// Saved at RBP + off: the frame pointer's own slot in a function
		// that realigns its stack.
		off, ok := rbpOffsetExpr(bp.expr, false)
		if !ok || off%8 != 0 || off/8 < -128 || off/8 > 127 {
			return unsupported
		}
		out.Kind |= UnwindBPAtRBP
		out.BPOff = int8(off / 8)
	default:
		// RBP restored some other way: the rows after this frame that
		// follow the frame pointer would read garbage. Rare (hand-written
		// assembly); stop rather than guess.
		return unsupported
	}
	return out
}

// rbpOffsetExpr matches the expression DW_OP_breg6 N (RBP + N), followed by
// DW_OP_deref when deref, and returns N.
func rbpOffsetExpr(e []byte, deref bool) (int64, bool) {
	if len(e) < 2 || e[0] != 0x76 {
		return 0, false
	}
	r := &reader{b: e, off: 1}
	n := r.sleb()
	if r.err != nil {
		return 0, false
	}
	rest := e[r.off:]
	if deref {
		return n, len(rest) == 1 && rest[0] == 0x06
	}
	return n, len(rest) == 0
}

// unwindTable builds the table from the object's CFI: .eh_frame where it
// has one, and .debug_frame for the addresses .eh_frame does not cover. It
// returns nil when the object has no CFI (Go binaries linked internally,
// JIT images): its code is unwound by frame pointers.
//
// In a Go binary only .eh_frame counts (the C code of a cgo program): Go's
// own code keeps frame pointers, which lead across its stack switches
// (systemstack, mcall, asmcgocall, cgocallback), where the SP-based rules of
// its .debug_frame would read the wrong stack, and which say nothing of
// where RBP was saved.
func (o *object) unwindTable() *UnwindTable {
	o.unwMu.Lock()
	defer o.unwMu.Unlock()
	if o.unw == nil && (!o.unwKnown || o.unwHas) {
		tables := o.cfiTables()
		var extra []absRow
		if gt := o.goTable(); gt != nil {
			tables = nil
			if s := o.elf.Section(".eh_frame"); s != nil && s.Type != elf.SHT_NOBITS && len(o.cfiTables()) > 0 {
				tables = o.cfiTables()[:1]
			}
			extra = o.crosscall2Rows(gt)
		}
		o.unw = buildUnwindTable(tables, extra...)
		o.unwKnown, o.unwHas = true, o.unw != nil && len(o.unw.Rows) > 0
	}
	return o.unw
}

// hasUnwindTable reports whether the object's unwind table has rows,
// building it the first time.
func (o *object) hasUnwindTable() bool {
	o.unwMu.Lock()
	known, has := o.unwKnown, o.unwHas
	o.unwMu.Unlock()
	if known {
		return has
	}
	t := o.unwindTable()
	return t != nil && len(t.Rows) > 0
}

// dropUnwindTable drops the built table (unwindTable builds it again).
func (o *object) dropUnwindTable() {
	o.unwMu.Lock()
	o.unw = nil
	o.unwMu.Unlock()
}

type absRow struct {
	pc  uint64
	row UnwindRow
}

func buildUnwindTable(tables []*cfiTable, extra ...absRow) *UnwindTable {
	rows := append([]absRow(nil), extra...)
	var covered []*cfiTable // the tables already taken, for overlap checks
	for _, t := range tables {
		if t == nil {
			continue
		}
		for i := range t.fdes {
			f := &t.fdes[i]
			if f.hi <= f.lo || inAny(covered, f.lo) {
				continue
			}
			rows = appendFDERows(rows, f)
		}
		covered = append(covered, t)
	}
	if len(rows) == 0 {
		return nil
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].pc < rows[j].pc })
	base := rows[0].pc
	out := &UnwindTable{Base: base, Rows: make([]UnwindRow, 0, len(rows))}
	for i, r := range rows {
		if r.pc-base >= maxTableSpan {
			break
		}
		// Of rows at one address, the last wins, but an FDE's end marker
		// (UnwindNone) gives way to the first row of the FDE that starts
		// there.
		if i+1 < len(rows) && rows[i+1].pc == r.pc {
			if rows[i+1].row.Kind == UnwindNone && r.row.Kind != UnwindNone {
				rows[i+1].row = r.row
			}
			continue
		}
		r.row.PC = uint32(r.pc - base)
		if n := len(out.Rows); n > 0 && sameRule(out.Rows[n-1], r.row) {
			continue
		}
		out.Rows = append(out.Rows, r.row)
	}
	return out
}

func sameRule(a, b UnwindRow) bool {
	return a.Kind == b.Kind && a.CFAOff == b.CFAOff && a.BPOff == b.BPOff
}

func inAny(tables []*cfiTable, pc uint64) bool {
	for _, t := range tables {
		if _, ok := t.find(pc); ok {
			return true
		}
	}
	return false
}

// appendFDERows appends f's rows, and an UnwindNone row at its end.
func appendFDERows(rows []absRow, f *fde) []absRow {
	var row cfaRow
	ex := cfaExec{c: f.cie}
	if err := ex.run(&row, nil, f.cie.initial, 0, ^uint64(0), 0); err != nil {
		return rows
	}
	initial := row
	start := len(rows)
	ex.advance = func(loc uint64, r *cfaRow) {
		if loc >= f.lo && loc < f.hi {
			rows = append(rows, absRow{pc: loc, row: unwindRow(r)})
		}
	}
	if err := ex.run(&row, &initial, f.instr, f.lo, ^uint64(0), f.base); err != nil {
		// A broken program: keep nothing of it rather than wrong rows.
		return rows[:start]
	}
	if ex.loc < f.hi {
		rows = append(rows, absRow{pc: ex.loc, row: unwindRow(&row)})
	}
	return append(rows, absRow{pc: f.hi, row: UnwindRow{Kind: UnwindNone}})
}

// UnwindMapping is one executable mapping of a process and the unwind table
// of its file: an address addr in [Start, Limit) is at ELF virtual address
// addr - Bias.
type UnwindMapping struct {
	Start, Limit uint64
	Bias         uint64
	// Key names the file (its build id, else its path): tables are shared
	// between the processes that map the same file.
	Key string
	// HasTable says whether the file has unwind rows (else: no CFI,
	// frame pointers only); LoadTable gives them.
	HasTable bool
	// Table, when set, is the table LoadTable returns (else it is built
	// from the file's CFI, or taken from the file's cache).
	Table *UnwindTable
	obj   *object
	// CgoCallback is runtime.cgocallback's code in this mapping (absolute
	// addresses; zero when it has none): a Go program or library that C
	// code calls into, whose goroutine stacks the walk continues on the C
	// thread's stack.
	CgoCallback [2]uint64
	GoExit      [2]uint64 // runtime.goexit, likewise
	Go          bool      // Go code (.gopclntab): its frameless leaves need the stack snapshot
}

// LoadTable returns the mapping's unwind table (nil without one),
// building it if it was dropped (Loaded).
func (m UnwindMapping) LoadTable() *UnwindTable {
	if m.Table != nil || m.obj == nil {
		return m.Table
	}
	return m.obj.unwindTable()
}

// Loaded says that the mapping's table is loaded where it is used: the
// file's cached copy is dropped (LoadTable builds it again if needed, after
// an eviction).
func (m UnwindMapping) Loaded() {
	if m.obj != nil {
		m.obj.dropUnwindTable()
	}
}

// UnwindMappings returns the process's file-backed executable mappings,
// ordered by address, saying which have unwind tables (the table of a file
// is built the first time, and kept until it is Loaded). Anonymous memory (JIT code) and pseudo mappings are left out:
// the unwinder follows frame pointers there.
func (p *Process) UnwindMappings() []UnwindMapping {
	p.mu.RLock()
	regions := append([]*region(nil), p.maps...)
	p.mu.RUnlock()
	var out []UnwindMapping
	for _, r := range regions {
		if r.obj == nil || (r.pseudo != "" && r.pseudo != "[vdso]") {
			continue
		}
		va, ok := r.obj.mappedVaddr(r.m.Offset)
		if !ok {
			continue
		}
		key := r.obj.buildID
		if key == "" {
			key = r.obj.name
		}
		m := UnwindMapping{Start: r.m.Start, Limit: r.m.Limit, Bias: r.m.Start - va,
			Key: key, HasTable: r.obj.hasUnwindTable(), obj: r.obj, Go: r.obj.goTable() != nil}
		if cb, exit, ok := r.obj.cgoCallback(); ok && cb[0]+m.Bias >= m.Start && cb[0]+m.Bias < m.Limit {
			m.CgoCallback = [2]uint64{cb[0] + m.Bias, cb[1] + m.Bias}
			m.GoExit = [2]uint64{exit[0] + m.Bias, exit[1] + m.Bias}
		}
		out = append(out, m)
	}
	return out
}

// crosscall2Rows describes runtime/cgo's crosscall2, the Go assembly that C
// code calls to enter Go: it pushes RBP, then saves it again in a frame of
// its own and points RBP there, so its frame pointer does not lead to a
// return address. Rows from the SP deltas of .gopclntab (CFA = RSP + delta
// + 8, the caller's RBP at CFA-16 once pushed) let the walk go on into the
// C caller. Nil when the object has no crosscall2 (not a cgo program).
func (o *object) crosscall2Rows(gt goTable) []absRow {
	syms, _ := o.elf.Symbols()
	var lo, hi uint64
	for _, s := range syms {
		if s.Name == "crosscall2" && elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Size > 0 {
			lo, hi = s.Value, s.Value+s.Size
			break
		}
	}
	if lo == 0 || hi-lo > 4096 {
		return nil
	}
	var rows []absRow
	last := int64(-1)
	for pc := lo; pc < hi; pc++ {
		d, ok := gt.SPDelta(pc)
		if !ok || d < 0 || d+8 > 0xffff {
			return nil
		}
		if d == last {
			continue
		}
		last = d
		r := UnwindRow{Kind: UnwindRSP, CFAOff: uint16(d + 8)}
		if d >= 8 {
			r.BPOff = -2 // pushed first: at entry SP - 8
		}
		rows = append(rows, absRow{pc: pc, row: r})
	}
	return append(rows, absRow{pc: hi, row: UnwindRow{Kind: UnwindNone}})
}

// cgoCallback returns the ELF virtual addresses of runtime.cgocallback and
// runtime.goexit in a Go object, from its symbol table.
func (o *object) cgoCallback() (cgocb, goexit [2]uint64, ok bool) {
	o.cgocbOnce.Do(func() {
		if o.goTable() == nil {
			return
		}
		syms, _ := o.elf.Symbols()
		var cb, exit [2]uint64
		for _, s := range syms {
			if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Size == 0 {
				continue
			}
			switch strings.TrimSuffix(s.Name, ".abi0") {
			case "runtime.cgocallback":
				cb = [2]uint64{s.Value, s.Value + s.Size}
			case "runtime.goexit":
				exit = [2]uint64{s.Value, s.Value + s.Size}
			}
		}
		if cb[0] != 0 && exit[0] != 0 {
			o.cgocb, o.goexit = cb, exit
		}
	})
	return o.cgocb, o.goexit, o.cgocb[0] != 0
}

// mappedVaddr is the ELF virtual address that a mapping of the file at
// offset off starts at. The mapping starts at a page boundary, which may lie
// before the segment's own file offset.
func (o *object) mappedVaddr(off uint64) (uint64, bool) {
	for _, p := range o.loads {
		if off >= p.Off&^0xfff && off < p.Off+p.Filesz {
			return off + p.Vaddr - p.Off, true
		}
	}
	return 0, false
}

// libDirs are where WarmUnwind looks for an executable's libraries.
var libDirs = []string{"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib"}

// WarmUnwind builds, ahead of time, the unwind tables of the executable at
// path and of the libraries it names (DT_NEEDED, found in the system's
// library directories): a command about to be launched has its tables
// ready as soon as it maps them, rather than after its first samples.
// Errors are ignored: the tables are then built when the process is seen.
func (c *Cache) WarmUnwind(path string) {
	seen := map[string]bool{}
	var warm func(string, int)
	warm = func(p string, depth int) {
		if seen[p] || depth > 3 {
			return
		}
		seen[p] = true
		o, err := c.openFileIn(hostRoot{}, p, p)
		if err != nil {
			return
		}
		o.unwindTable()
		libs, _ := o.elf.ImportedLibraries()
		for _, lib := range libs {
			for _, d := range libDirs {
				if full := d + "/" + lib; fileExists(full) {
					warm(full, depth+1)
					break
				}
			}
		}
	}
	warm(path, 0)
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}
