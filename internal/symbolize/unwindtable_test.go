package symbolize

import (
	"os"
	"path/filepath"
	"sort"
	"testing"
)

// lookupRow is what the BPF program does with a table: the last row at or
// before pc, or none.
func lookupRow(t *UnwindTable, pc uint64) (UnwindRow, bool) {
	if pc < t.Base || pc-t.Base >= maxTableSpan {
		return UnwindRow{}, false
	}
	rel := uint32(pc - t.Base)
	i := sort.Search(len(t.Rows), func(i int) bool { return t.Rows[i].PC > rel }) - 1
	if i < 0 {
		return UnwindRow{}, false
	}
	return t.Rows[i], true
}

// TestUnwindTableMatchesCFI checks the compact table against the CFI
// evaluator (itself checked against readelf): at every address where an FDE's
// rule changes, the row before it, and a few inside, the table gives the row
// that the FDE's program gives there, compacted; between FDEs it gives none.
func TestUnwindTableMatchesCFI(t *testing.T) {
	files := []string{"/lib/x86_64-linux-gnu/libc.so.6", filepath.Join(binaries(t), "cprog-pie"),
		filepath.Join(binaries(t), "cprog-nodebug"), filepath.Join(binaries(t), "cxxprog")}
	if _, err := os.Stat("/usr/games/stockfish"); err == nil {
		files = append(files, "/usr/games/stockfish") // stack realignment (DRAP) rules
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			o := openTestObject(t, file)
			tab := o.unwindTable()
			if tab == nil || len(tab.Rows) == 0 {
				t.Fatal("no unwind table")
			}
			kinds := map[UnwindKind]int{}
			checked, bad := 0, 0
			check := func(f *fde, pc uint64) {
				want := UnwindRow{Kind: UnwindUnsupported}
				if row, err := f.rowAt(pc); err == nil {
					want = unwindRow(&row)
				}
				got, ok := lookupRow(tab, pc)
				checked++
				if !ok || !sameRule(got, want) {
					if bad++; bad <= 10 {
						t.Errorf("%#x (FDE %#x-%#x): table has %+v (found %v), CFI gives %+v", pc, f.lo, f.hi, got, ok, want)
					}
				}
			}
			for _, ct := range o.cfiTables()[:1] { // .eh_frame
				for i := range ct.fdes {
					f := &ct.fdes[i]
					if f.hi <= f.lo {
						continue
					}
					var locs []uint64
					var row cfaRow
					ex := cfaExec{c: f.cie}
					if ex.run(&row, nil, f.cie.initial, 0, ^uint64(0), 0) != nil {
						continue
					}
					initial := row
					ex.advance = func(loc uint64, r *cfaRow) {
						if loc >= f.lo && loc < f.hi {
							locs = append(locs, loc)
							kinds[unwindRow(r).Kind&^kindFlags]++
						}
					}
					if ex.run(&row, &initial, f.instr, f.lo, ^uint64(0), f.base) != nil {
						continue
					}
					kinds[unwindRow(&row).Kind&^kindFlags]++ // the last row
					for _, loc := range append(locs, f.lo, (f.lo+f.hi)/2, f.hi-1) {
						check(f, loc)
						if loc > f.lo {
							check(f, loc-1)
						}
					}
					// Just past the FDE, when nothing else starts there: no rule.
					if _, covered := ct.find(f.hi); !covered {
						if got, ok := lookupRow(tab, f.hi); ok && got.Kind != UnwindNone {
							t.Errorf("%#x, the end of FDE %#x: table has %+v, want none", f.hi, f.lo, got)
						}
					}
				}
			}
			t.Logf("%d rows in the table; %d addresses checked; kinds at rule changes: %v", len(tab.Rows), checked, kinds)
			if checked < 20 {
				t.Fatalf("only %d addresses checked", checked)
			}
			if bad > 0 {
				t.Errorf("%d of %d addresses differ", bad, checked)
			}
			if filepath.Base(file) == "stockfish" && kinds[UnwindDerefRBP] == 0 {
				t.Error("no stack-realignment rule (CFA = *(RBP+N)) recognised in stockfish")
			}
			if filepath.Base(file) == "cprog-pie" && kinds[UnwindPLT] == 0 {
				t.Error("no PLT rule recognised in a PIE with a PLT")
			}
		})
	}
}

func TestRBPOffsetExpr(t *testing.T) {
	for _, c := range []struct {
		e     []byte
		deref bool
		n     int64
		ok    bool
	}{
		{[]byte{0x76, 0x68, 0x06}, true, -24, true}, // DW_OP_breg6 -24; DW_OP_deref
		{[]byte{0x76, 0x00}, false, 0, true},        // DW_OP_breg6 0
		{[]byte{0x76, 0x00}, true, 0, false},        // no deref
		{[]byte{0x76, 0x68, 0x06}, false, 0, false}, // a deref too many
		{[]byte{0x77, 0x08, 0x06}, true, 0, false},  // RSP, not RBP
		{[]byte{0x76}, true, 0, false},              // truncated
	} {
		n, ok := rbpOffsetExpr(c.e, c.deref)
		if ok != c.ok || (ok && n != c.n) {
			t.Errorf("rbpOffsetExpr(% x, %v) = %d, %v; want %d, %v", c.e, c.deref, n, ok, c.n, c.ok)
		}
	}
}

// TestUnwindTableDroppedOnceLoaded: a process's mappings say which files
// have tables without keeping their rows once loaded (Loaded): the
// in-kernel unwinder holds them, and a second load (after an eviction)
// builds the same rows again.
func TestUnwindTableDroppedOnceLoaded(t *testing.T) {
	c := NewCache()
	defer c.Close()
	p, err := c.NewProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	var m UnwindMapping
	for _, x := range p.UnwindMappings() {
		if x.HasTable && x.obj != nil && x.obj.goTable() == nil {
			m = x // a C library or the vDSO
		}
	}
	if m.obj == nil {
		t.Skip("the test binary maps no file with CFI (static)")
	}
	first := m.LoadTable()
	rows := len(first.Rows)
	m.Loaded()
	if m.obj.unw != nil {
		t.Fatal("the table is still held after Loaded")
	}
	if again := p.UnwindMappings(); len(again) == 0 || m.obj.unw != nil {
		t.Fatal("listing the mappings again built the table anew")
	}
	if second := m.LoadTable(); second == nil || len(second.Rows) != rows || second.Base != first.Base {
		t.Fatalf("rebuilt table has %d rows, want %d", len(second.Rows), rows)
	}
}
