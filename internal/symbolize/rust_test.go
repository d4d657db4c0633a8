package symbolize

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRustNames builds a Rust program with legacy and v0 mangling and
// checks that its functions get readable, full paths.
func TestRustNames(t *testing.T) {
	needTool(t, "rustc")
	for _, mangling := range []string{"default", "v0"} {
		t.Run(mangling, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "rustprog")
			args := []string{"-g", "-o", bin, "testdata/rustprog.rs"}
			if mangling == "v0" {
				args = append([]string{"-C", "symbol-mangling-version=v0"}, args...)
			}
			cmd := exec.Command("rustc", args...)
			if out, err := cmd.CombinedOutput(); err != nil {
				if mangling == "v0" {
					t.Skipf("rustc cannot use v0 mangling here: %s", out)
				}
				t.Fatalf("rustc: %v\n%s", err, out)
			}
			o := openTestObject(t, bin)
			found := map[string]bool{}
			for name, s := range funcSymbols(t, bin) {
				if !strings.Contains(name, "rustprog") || !strings.Contains(name, "shapes") {
					continue
				}
				got := o.symbols().lookup(s.Value)
				switch {
				case strings.Contains(got, "rustprog::shapes::Square>::area") || strings.HasSuffix(got, "rustprog::shapes::Square::area"):
					found["area"] = true
				case strings.Contains(got, "rustprog::shapes::total"):
					found["total"] = true
				default:
					t.Errorf("symbol %s demangles to %q", name, got)
				}
				if fr := o.frames(s.Value); len(fr) == 0 || !strings.Contains(outermost(fr), "shapes") {
					t.Errorf("frames at %s: %+v", name, fr)
				}
			}
			if !found["area"] || !found["total"] {
				t.Errorf("found %v, want area and total", found)
			}
		})
	}
}
