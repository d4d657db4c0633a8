package symbolize

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

var dwarfRegNames = map[string]int{
	"rax": 0, "rdx": 1, "rcx": 2, "rbx": 3, "rsi": 4, "rdi": 5, "rbp": 6, "rsp": 7,
	"r8": 8, "r9": 9, "r10": 10, "r11": 11, "r12": 12, "r13": 13, "r14": 14, "r15": 15, "ra": 16,
}

// TestCFIMatchesReadelf compares every row of every FDE's unwind table
// with `readelf --debug-dump=frames-interp` (binutils) as independent truth.
func TestCFIMatchesReadelf(t *testing.T) {
	needTool(t, "readelf")
	files := []string{"/lib/x86_64-linux-gnu/libc.so.6", filepath.Join(binaries(t), "cprog-fp"), filepath.Join(binaries(t), "cxxprog")}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			o := openTestObject(t, file)
			out, err := exec.Command("readelf", "-wF", file).Output()
			if err != nil && len(out) == 0 { // readelf exits 1 on mere warnings
				t.Fatal(err)
			}
			rows, bad := 0, 0
			var cols []string
			inEH, inFDE := false, false
			sc := bufio.NewScanner(bytes.NewReader(out))
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				line := sc.Text()
				f := strings.Fields(line)
				switch {
				case strings.HasPrefix(line, "Contents of the"):
					inEH = strings.Contains(line, ".eh_frame ")
				case len(f) > 3 && (f[3] == "FDE" || f[3] == "CIE"):
					inFDE = f[3] == "FDE"
				case strings.HasPrefix(line, "   LOC"):
					cols = f[2:]
				case len(f) == 0:
					cols = nil
				case inEH && inFDE && cols != nil && len(f) == len(cols)+2:
					pc, err := strconv.ParseUint(f[0], 16, 64)
					if err != nil {
						continue
					}
					rows++
					if msg := compareRow(o, pc, f[1], cols, f[2:]); msg != "" {
						if bad++; bad <= 10 {
							t.Errorf("%s %#x: %s", filepath.Base(file), pc, msg)
						}
					}
				}
			}
			t.Logf("%d rows compared", rows)
			if rows < 10 {
				t.Fatalf("only %d rows compared", rows)
			}
			if bad > 0 {
				t.Errorf("%d of %d rows differ", bad, rows)
			}
		})
	}
}

func compareRow(o *object, pc uint64, cfa string, cols, vals []string) string {
	fde, ok := o.findFDE(pc)
	if !ok {
		return "no FDE"
	}
	row, err := fde.rowAt(pc)
	if err != nil {
		return err.Error()
	}
	got := "exp"
	if !row.cfaExpr {
		name := "?"
		for n, r := range dwarfRegNames {
			if uint64(r) == row.cfaReg {
				name = n
			}
		}
		got = fmt.Sprintf("%s%+d", name, row.cfaOff)
	}
	if got != cfa {
		return fmt.Sprintf("CFA %s, readelf says %s", got, cfa)
	}
	for i, c := range cols {
		r, ok := dwarfRegNames[c]
		if !ok {
			continue
		}
		rule, want := row.regs[r], vals[i]
		var g string
		switch rule.kind {
		case ruleOffset:
			g = fmt.Sprintf("c%+d", rule.off)
		case ruleValOffset:
			g = fmt.Sprintf("v%+d", rule.off)
		case ruleSame, ruleUndefined:
			g = "u"
			if want == "s" {
				want = "u"
			}
		default:
			continue // register and expression rules: not used for unwinding
		}
		if g != want {
			return fmt.Sprintf("%s rule %s, readelf says %s", c, g, want)
		}
	}
	return ""
}

// TestFixLeafShortStack feeds FixLeaf every truncation of a real stack:
// it must never panic and never return less than the chain.
func TestFixLeafShortStack(t *testing.T) {
	p, err := NewProcess(1)
	if err != nil {
		t.Skipf("cannot read process 1: %v", err)
	}
	for _, m := range p.Mappings() {
		if !strings.HasPrefix(m.File, "/") {
			continue
		}
		for _, a := range []uint64{m.Start, m.Start + 0x40, (m.Start + m.Limit) / 2} {
			stack := bytes.Repeat([]byte{0x10, 0, 0, 0, 0, 0, 0, 0}, 64)
			chain := []uint64{a, 0x1234}
			for n := 0; n <= len(stack); n += 3 {
				out := p.FixLeaf(Regs{IP: a, SP: 0x7ff000, BP: 0x7ff100}, stack[:n], chain)
				if len(out) < 1 || out[0] != a {
					t.Fatalf("FixLeaf lost the leaf: %v", out)
				}
			}
		}
	}
}
