package rtlayout

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/wallprof/wallprof/internal/groundtruth"
	"github.com/wallprof/wallprof/internal/symbolize/gopclntab"
)

// toolchains are the Go releases the tables were generated from; tests run
// with those found in the module cache (and always with the local one).
var toolchains = []string{"go1.20.14", "go1.21.13", "go1.22.12", "go1.23.12", "go1.24.13", "go1.25.14"}

// cachedToolchains returns "" (the local toolchain) and the toolchains of
// the list that are in the module cache, so the test does not download.
func cachedToolchains(t *testing.T) []string {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	cache := strings.TrimSpace(string(out))
	found := []string{""}
	for _, v := range toolchains {
		dir := filepath.Join(cache, "golang.org", "toolchain@v0.0.1-"+v+"."+runtime.GOOS+"-"+runtime.GOARCH)
		if _, err := os.Stat(dir); err == nil {
			found = append(found, v)
		} else {
			t.Logf("%s is not in the module cache; not tested", v)
		}
	}
	return found
}

// stripCopy returns a copy of bin stripped by strip(1).
func stripCopy(t *testing.T, bin string) string {
	t.Helper()
	strip, err := exec.LookPath("strip")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("strip (binutils) not found")
		}
		t.Skip("strip (binutils) not found")
	}
	out := filepath.Join(t.TempDir(), "stripped")
	if b, err := exec.Command(strip, "--strip-all", "-o", out, bin).CombinedOutput(); err != nil {
		t.Fatalf("strip: %v\n%s", err, b)
	}
	return out
}

func openELF(t *testing.T, path string) (*elf.File, *gopclntab.Table) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	tab, err := gopclntab.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	return f, tab
}

// TestAllgsAndOffsets builds the goparked workload with every cached
// toolchain, normal and stripped, and checks that
//   - the address of runtime.allgs decoded from the code of
//     runtime.forEachG equals the symbol table's, in both builds;
//   - the committed table of that version equals the build's DWARF;
//   - FindAllgs uses the symbol table when there is one and the code when
//     the binary is stripped.
func TestAllgsAndOffsets(t *testing.T) {
	dir := groundtruth.WorkloadDir(t, "goparked")
	for _, tc := range cachedToolchains(t) {
		name := tc
		if name == "" {
			name = "local"
		}
		t.Run(name, func(t *testing.T) {
			plain := groundtruth.BuildGo(t, dir, false, tc)
			stripped := groundtruth.BuildGo(t, dir, true, tc)
			pf, ptab := openELF(t, plain)
			sf, stab := openELF(t, stripped)

			want, err := AllgsFromSymtab(pf)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := AllgsFromCode(pf, ptab); err != nil || got != want {
				t.Errorf("unstripped: allgs from code = %#x, %v; symbol table says %#x", got, err, want)
			}
			if _, err := AllgsFromSymtab(sf); err == nil {
				t.Fatalf("stripped build has runtime.allgs in a symbol table")
			}
			// The -s -w build moves data by a few bytes (its build info
			// records the flags), but not within .bss.
			got, how, err := FindAllgs(sf, stab)
			if err != nil || how != "code of runtime.forEachG" || got-sf.Section(".bss").Addr != want-pf.Section(".bss").Addr {
				t.Errorf("stripped: FindAllgs = %#x (%q, %v); want .bss+%#x from the code",
					got, how, err, want-pf.Section(".bss").Addr)
			}
			// strip(1) removes the symbol table and keeps every address.
			bf, btab := openELF(t, stripCopy(t, plain))
			if got, how, err := FindAllgs(bf, btab); err != nil || got != want || how != "code of runtime.forEachG" {
				t.Errorf("strip --strip-all: FindAllgs = %#x (%q, %v); want %#x from the code", got, how, err, want)
			}
			if _, how, _ := FindAllgs(pf, ptab); how != "symbol table" {
				t.Errorf("unstripped: FindAllgs used %q, want the symbol table", how)
			}

			raw, err := os.Open(stripped)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			version, err := GoVersion(raw)
			if err != nil {
				t.Fatal(err)
			}
			if tc != "" && version != tc {
				t.Fatalf("built by %s, want %s", version, tc)
			}
			d, err := pf.DWARF()
			if err != nil {
				t.Fatal(err)
			}
			fromDWARF, err := FromDWARF(d)
			if err != nil {
				t.Fatal(err)
			}
			l, err := ForVersion(version)
			if err != nil {
				t.Fatal(err)
			}
			if fromDWARF != l.Offsets {
				t.Errorf("%s: DWARF offsets\n%+v\ncommitted table\n%+v", version, fromDWARF, l.Offsets)
			}
			if sl, err := Load(sf, version); err != nil || sl.Source != l.Source {
				t.Errorf("Load(stripped) = %q, %v; want the table", sl.Source, err)
			}
			if pl, err := Load(pf, version); err != nil || pl.Source != "DWARF of the binary" || pl.Offsets != l.Offsets {
				t.Errorf("Load(unstripped) = %q %+v, %v; want DWARF offsets", pl.Source, pl.Offsets, err)
			}
		})
	}
}

func TestFindFunc(t *testing.T) {
	bin := groundtruth.BuildGo(t, groundtruth.WorkloadDir(t, "goparked"), true, "")
	_, tab := openELF(t, bin)
	entry, end, ok := FindFunc(tab, "main.waitOnChan")
	if !ok || end <= entry {
		t.Fatalf("FindFunc(main.waitOnChan) = %#x, %#x, %v", entry, end, ok)
	}
	if _, _, name, _ := tab.FuncRange(entry); name != "main.waitOnChan" {
		t.Errorf("FuncRange(%#x) = %q", entry, name)
	}
	if _, _, ok := FindFunc(tab, "main.noSuchFunction"); ok {
		t.Error("found main.noSuchFunction")
	}
}

func TestRIPLoads(t *testing.T) {
	// MOVQ 0x10(IP), CX; MOVQ 0x11(IP), DX; LEAQ 0x20(IP), AX; MOVL 0x30(IP), BX; RET
	code := []byte{
		0x48, 0x8b, 0x0d, 0x10, 0x00, 0x00, 0x00,
		0x48, 0x8b, 0x15, 0x11, 0x00, 0x00, 0x00,
		0x48, 0x8d, 0x05, 0x20, 0x00, 0x00, 0x00,
		0x8b, 0x1d, 0x30, 0x00, 0x00, 0x00,
		0xc3,
	}
	got := ripLoads64(code, 0x1000)
	// 0x1007+0x10 and 0x100e+0x11: 8 bytes apart. The LEAQ and the 4-byte
	// load are not 8-byte loads.
	want := []uint64{0x1017, 0x101f}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("ripLoads64 = %#x, want %#x", got, want)
	}
}
