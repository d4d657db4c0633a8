package gopclntab

import (
	"debug/dwarf"
	"debug/elf"
	"debug/gosym"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/wallprof/wallprof/internal/profile"
)

// gosymTable is the ground truth: the standard library's reader of the
// unstripped binary's tables.
func gosymTable(t *testing.T, f *elf.File) *gosym.Table {
	t.Helper()
	pcln, err := f.Section(".gopclntab").Data()
	if err != nil {
		t.Fatal(err)
	}
	var symtab []byte
	if s := f.Section(".gosymtab"); s != nil {
		symtab, _ = s.Data()
	}
	// debug/gosym needs the address of runtime.text, which is not the start
	// of .text when C code was linked in.
	textStart := f.Section(".text").Addr
	if v, ok := newImage(f, nil).symbolValue("runtime.text"); ok {
		textStart = v
	}
	tab, err := gosym.NewTable(symtab, gosym.NewLineTable(pcln, textStart))
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func openTable(t *testing.T, path string) *Table {
	t.Helper()
	tab, err := Open(openELF(t, path))
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	return tab
}

// TestAgainstGosym checks that the stripped and the PIE build resolve every
// function of the unstripped build exactly as debug/gosym does.
func TestAgainstGosym(t *testing.T) {
	for _, tc := range toolchainsFor(t) {
		t.Run(toolchainName(tc), func(t *testing.T) {
			want := gosymTable(t, openELF(t, buildProg(t, tc, modeNormal)))
			for _, mode := range []string{modeNormal, modeStripped} {
				tab := openTable(t, buildProg(t, tc, mode))
				if tab.gofunc == 0 && tab.hdr.ver != ver116 {
					t.Errorf("%s: moduledata.gofunc not found: no inline trees", mode)
				}
				compareFuncs(t, mode, want, tab)
				if mode == modeNormal && tab.hdr.ver != ver116 {
					// The symbol confirms the moduledata found by content.
					f := openELF(t, buildProg(t, tc, mode))
					sym, ok := newImage(f, nil).symbolValue("go:func.*", "go.func.*")
					if !ok || sym != tab.gofunc {
						t.Errorf("gofunc = %#x, symbol go:func.* = %#x, %v", tab.gofunc, sym, ok)
					}
				}
			}
			if tc == "" {
				// A PIE build has different code: its own pclntab, read
				// by debug/gosym, is the reference.
				pie := buildProg(t, tc, modePIE)
				tab := openTable(t, pie)
				if tab.gofunc == 0 {
					t.Errorf("pie: moduledata.gofunc not found: no inline trees")
				}
				compareFuncs(t, modePIE, gosymTable(t, openELF(t, pie)), tab)
				ext := gosymTable(t, openELF(t, buildProg(t, tc, modeExtPIE)))
				for _, mode := range []string{modeExtPIE, modeExtPIEStripped} {
					compareFuncs(t, mode, ext, openTable(t, buildProg(t, tc, mode)))
				}
			}
		})
	}
}

func compareFuncs(t *testing.T, mode string, want *gosym.Table, tab *Table) {
	t.Helper()
	errs := 0
	check := func(cond bool, format string, args ...any) bool {
		if !cond && errs < 10 {
			errs++
			t.Errorf(mode+": "+format, args...)
		}
		return cond
	}
	start, end := tab.TextRange()
	check(start == want.Funcs[0].Entry && end == want.Funcs[len(want.Funcs)-1].End,
		"TextRange = %#x-%#x, gosym %#x-%#x", start, end, want.Funcs[0].Entry, want.Funcs[len(want.Funcs)-1].End)
	for _, fn := range want.Funcs {
		// A function without line tables (such as the go:textfipsstart
		// marker) has no file at its entry; debug/gosym then decodes
		// whatever is at offset 0, the runtime reports no position.
		file, _, _ := want.PCToLine(fn.Entry)
		noTables := file == ""
		entry, fend, name, ok := tab.FuncRange(fn.Entry)
		check(ok && entry == fn.Entry && fend == fn.End && name == fn.Name,
			"FuncRange(%#x) = %#x, %#x, %q, %v; want %#x, %#x, %q", fn.Entry, entry, fend, name, ok, fn.Entry, fn.End, fn.Name)
		for _, pc := range []uint64{fn.Entry, fn.Entry + (fn.End-fn.Entry)/2, fn.End - 1} {
			frames := tab.Lookup(pc)
			file, line, _ := want.PCToLine(pc)
			if line < 0 || noTables {
				// Padding after the function's code: no table covers it.
				file, line = "?", 0
			}
			if !check(len(frames) > 0, "Lookup(%#x) in %s = nil", pc, fn.Name) {
				continue
			}
			check(frames[len(frames)-1].Function == fn.Name, "Lookup(%#x): physical frame %q, want %q", pc, frames[len(frames)-1].Function, fn.Name)
			check(frames[0].File == file && frames[0].Line == line, "Lookup(%#x) in %s: innermost %s:%d, want %s:%d",
				pc, fn.Name, frames[0].File, frames[0].Line, file, line)
		}
	}
	check(tab.Lookup(end) == nil && tab.Lookup(start-1) == nil, "Lookup outside the text range is not nil")
}

// sourceLine returns the 1-based line of testdata/prog/main.go containing s.
func sourceLine(t *testing.T, s string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "prog", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			return i + 1
		}
	}
	t.Fatalf("%q not in main.go", s)
	return 0
}

// inlinedPCs returns the pcs where DWARF says callee's body was inlined
// into caller, and the call-site line DWARF records.
func inlinedPCs(t *testing.T, d *dwarf.Data, caller, callee string) (pcs []uint64, callLine int64) {
	t.Helper()
	r := d.Reader()
	var cur string
	for {
		e, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if e == nil {
			return pcs, callLine
		}
		switch e.Tag {
		case dwarf.TagSubprogram:
			cur, _ = e.Val(dwarf.AttrName).(string)
		case dwarf.TagInlinedSubroutine:
			if cur != caller || dwarfName(t, d, e) != callee {
				continue
			}
			ranges, err := d.Ranges(e)
			if err != nil {
				t.Fatal(err)
			}
			for _, rg := range ranges {
				pcs = append(pcs, rg[0])
			}
			callLine, _ = e.Val(dwarf.AttrCallLine).(int64)
		}
	}
}

func dwarfName(t *testing.T, d *dwarf.Data, e *dwarf.Entry) string {
	off, ok := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
	if !ok {
		return ""
	}
	r := d.Reader()
	r.Seek(off)
	origin, err := r.Next()
	if err != nil || origin == nil {
		t.Fatalf("abstract origin %#x: %v", off, err)
	}
	name, _ := origin.Val(dwarf.AttrName).(string)
	return name
}

// TestInline checks that a pc in scale's body inlined into hotLoop resolves
// to [main.scale, main.hotLoop] with the lines of the source.
func TestInline(t *testing.T) {
	bodyLine, callLine := sourceLine(t, "return x*3 + 1"), sourceLine(t, "sum ^= scale(i)")
	for _, tc := range toolchainsFor(t) {
		t.Run(toolchainName(tc), func(t *testing.T) {
			f := openELF(t, buildProg(t, tc, modeNormal))
			d, err := f.DWARF()
			if err != nil {
				t.Fatal(err)
			}
			pcs, dwarfCallLine := inlinedPCs(t, d, "main.hotLoop", "main.scale")
			if len(pcs) == 0 {
				t.Fatal("DWARF has no inlined main.scale in main.hotLoop")
			}
			if dwarfCallLine != int64(callLine) {
				t.Errorf("DWARF call line %d, source says %d", dwarfCallLine, callLine)
			}
			for _, mode := range []string{modeNormal, modeStripped} {
				tab := openTable(t, buildProg(t, tc, mode))
				for _, pc := range pcs {
					got := tab.Lookup(pc)
					file := got[0].File
					want := []profile.Frame{
						{Function: "main.scale", File: file, Line: bodyLine},
						{Function: "main.hotLoop", File: file, Line: callLine},
					}
					if !equalFrames(got, want) || !strings.HasSuffix(file, "testdata/prog/main.go") {
						t.Errorf("%s: Lookup(%#x) = %v, want %v", mode, pc, got, want)
					}
				}
				// Without the inline trees the physical frame remains.
				noInl := *tab
				noInl.gofunc, noInl.mem = 0, memory{}
				if got := noInl.Lookup(pcs[0]); len(got) != 1 || got[0].Function != "main.hotLoop" {
					t.Errorf("%s: without inline trees Lookup(%#x) = %v", mode, pcs[0], got)
				}
			}
		})
	}
}

func equalFrames(a, b []profile.Frame) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestNames checks the names of the functions the test program declares.
func TestNames(t *testing.T) {
	want := map[string]bool{
		"main.(*server).handle": false, "main.hotLoop": false, "main.makeCounter": false,
		"main.makeCounter.func1": false, "main.Sum[go.shape.int]": false, "main.main": false,
	}
	tab := openTable(t, buildProg(t, "", modeStripped))
	start, end := tab.TextRange()
	for pc := start; pc < end; {
		_, fend, name, ok := tab.FuncRange(pc)
		if !ok {
			t.Fatalf("FuncRange(%#x) failed inside the text range", pc)
		}
		if _, ok := want[name]; ok {
			want[name] = true
		}
		pc = fend
	}
	for name, found := range want {
		if !found {
			t.Errorf("function %q not found", name)
		}
	}
}

// instr is one instruction of `go tool objdump` output.
type instr struct {
	pc  uint64
	asm string
}

func objdump(t *testing.T, bin, fn string) []instr {
	t.Helper()
	out, err := exec.Command("go", "tool", "objdump", "-s", "^"+fn+"$", bin).Output()
	if err != nil {
		t.Fatalf("go tool objdump: %v", err)
	}
	var ins []instr
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Split(strings.TrimSpace(l), "\t")
		var parts []string
		for _, s := range f {
			if s != "" {
				parts = append(parts, s)
			}
		}
		if len(parts) < 4 || !strings.HasPrefix(parts[1], "0x") {
			continue
		}
		pc, err := strconv.ParseUint(parts[1][2:], 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		ins = append(ins, instr{pc, parts[3]})
	}
	if len(ins) == 0 {
		t.Fatalf("objdump found no %s", fn)
	}
	return ins
}

// spEffect is how an instruction moves SP (bytes pushed: positive).
func spEffect(t *testing.T, asm string) int64 {
	imm := func() int64 {
		s := strings.TrimPrefix(strings.Fields(asm)[1], "$")
		v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(s, "0x"), ","), 16, 64)
		if err != nil {
			t.Fatalf("immediate in %q: %v", asm, err)
		}
		return v
	}
	switch {
	case strings.HasPrefix(asm, "PUSHQ"):
		return 8
	case strings.HasPrefix(asm, "POPQ"):
		return -8
	case strings.HasPrefix(asm, "SUBQ $") && strings.HasSuffix(asm, ", SP"):
		return imm()
	case strings.HasPrefix(asm, "ADDQ $") && strings.HasSuffix(asm, ", SP"):
		return -imm()
	}
	return 0
}

// checkSPDelta follows fn's instructions up to its first RET, tracking SP
// from the disassembly, and compares with SPDelta at every instruction. It
// returns the largest delta seen.
func checkSPDelta(t *testing.T, tab *Table, bin, fn string) int64 {
	t.Helper()
	var delta, maxDelta int64
	for _, in := range objdump(t, bin, fn) {
		got, ok := tab.SPDelta(in.pc)
		if !ok || got != delta {
			t.Errorf("%s: SPDelta(%#x) [%s] = %d, %v; disassembly says %d", fn, in.pc, in.asm, got, ok, delta)
		}
		if strings.HasPrefix(in.asm, "RET") {
			break
		}
		delta += spEffect(t, in.asm)
		maxDelta = max(maxDelta, delta)
	}
	return maxDelta
}

func TestSPDelta(t *testing.T) {
	for _, tc := range toolchainsFor(t) {
		t.Run(toolchainName(tc), func(t *testing.T) {
			// objdump needs the symbols; the stripped build has the same code.
			bin := buildProg(t, tc, modeNormal)
			tab := openTable(t, buildProg(t, tc, modeStripped))
			if d := checkSPDelta(t, tab, bin, "main.main"); d <= 0 {
				t.Errorf("main.main never allocates a frame (max delta %d)", d)
			}
			// runtime.futex is an assembly leaf without a frame (TEXT
			// runtime·futex(SB),NOSPLIT,$0): zero throughout.
			if d := checkSPDelta(t, tab, bin, `runtime\.futex(\.abi0)?`); d != 0 {
				t.Errorf("runtime.futex moves SP by %d", d)
			}
			// Every byte of its code, up to the last instruction (the
			// padding after it is outside every table).
			ins := objdump(t, bin, `runtime\.futex(\.abi0)?`)
			for pc := ins[0].pc; pc <= ins[len(ins)-1].pc; pc++ {
				if d, ok := tab.SPDelta(pc); !ok || d != 0 {
					t.Errorf("runtime.futex: SPDelta(%#x) = %d, %v", pc, d, ok)
					break
				}
			}
			if _, ok := tab.SPDelta(0); ok {
				t.Error("SPDelta(0) ok")
			}
		})
	}
}

func TestNotGo(t *testing.T) {
	for _, path := range []string{"/bin/sh", "/bin/true", "/usr/bin/env"} {
		f, err := elf.Open(path)
		if err != nil {
			continue
		}
		defer f.Close()
		if f.Section(".gopclntab") != nil {
			continue
		}
		if _, err := Open(f); !errors.Is(err, ErrNotGo) {
			t.Errorf("Open(%s) = %v, want ErrNotGo", path, err)
		}
		return
	}
	t.Skip("no non-Go ELF executable found")
}

// TestTruncated cuts a real table at many lengths: errors or short
// answers, never a panic.
func TestTruncated(t *testing.T) {
	f := openELF(t, buildProg(t, "", modeStripped))
	sec := f.Section(".gopclntab")
	data, err := sec.Data()
	if err != nil {
		t.Fatal(err)
	}
	full, err := parse(data, sec.Addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	start, end := full.TextRange()
	for _, n := range []int{0, 3, 7, 8, 16, 40, 71, 72, 100, len(data) / 4, len(data) / 2, len(data) - 100, len(data) - 1} {
		tab, err := parse(data[:n], sec.Addr, nil)
		if err != nil {
			continue
		}
		for pc := start; pc < end; pc += (end - start) / 997 {
			tab.Lookup(pc)
			tab.SPDelta(pc)
			tab.FuncRange(pc)
		}
	}
}

// TestExternalBinaries checks Go binaries named in $GOPCLNTAB_BINARIES
// (colon-separated), e.g. distribution builds, against debug/gosym reading
// the same file.
func TestExternalBinaries(t *testing.T) {
	paths := os.Getenv("GOPCLNTAB_BINARIES")
	if paths == "" {
		t.Skip("set GOPCLNTAB_BINARIES to check other Go binaries")
	}
	for _, path := range filepath.SplitList(paths) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			tab := openTable(t, path)
			if tab.gofunc == 0 && tab.hdr.ver != ver116 {
				t.Errorf("moduledata.gofunc not found: no inline trees")
			}
			want := gosymTable(t, openELF(t, path))
			compareFuncs(t, "", want, tab)
			inlined := 0
			for _, fn := range want.Funcs {
				for pc := fn.Entry; pc < fn.End; pc += 7 {
					if len(tab.Lookup(pc)) > 1 {
						inlined++
					}
				}
			}
			t.Logf("%d functions, %d sampled pcs in inlined code, textStart %#x", len(want.Funcs), inlined, tab.textStart)
		})
	}
}

// TestRelocatedModuledata zeroes the words of a PIE's data that dynamic
// relocations fill (as linkers that rely on RELA addends leave them), so
// that runtime.firstmoduledata can only be found through the relocations.
func TestRelocatedModuledata(t *testing.T) {
	pie := buildProg(t, "", modePIE)
	want := openTable(t, pie)
	b, err := os.ReadFile(pie)
	if err != nil {
		t.Fatal(err)
	}
	f := openELF(t, pie)
	zeroed := 0
	for at := range newImage(f, nil).relativeRelocs() {
		for _, s := range f.Sections {
			if s.Type == elf.SHT_PROGBITS && s.Flags&elf.SHF_WRITE != 0 && at >= s.Addr && at+8 <= s.Addr+s.Size {
				copy(b[s.Offset+at-s.Addr:], make([]byte, 8))
				zeroed++
			}
		}
	}
	out := filepath.Join(t.TempDir(), "zeroed")
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
	got := openTable(t, out)
	if zeroed == 0 || got.gofunc != want.gofunc || got.textStart != want.textStart || got.gofunc == 0 {
		t.Errorf("zeroed %d words: gofunc %#x, text %#x; want %#x, %#x", zeroed, got.gofunc, got.textStart, want.gofunc, want.textStart)
	}
}
