package rtlayout

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestGeneratedTables reruns the generator and compares its output with
// the committed tables_gen.go. It needs every toolchain of the generator
// in the module cache (it does not download them), and skips otherwise
// (go run ./internal/goruntime/rtlayout/gen downloads them).
func TestGeneratedTables(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program with every supported toolchain")
	}
	if got := len(cachedToolchains(t)); got != len(toolchains)+1 || runtime.Version() != "go1.26.8" {
		t.Skip("not every toolchain of the tables is in the module cache")
	}
	out := filepath.Join(t.TempDir(), "tables_gen.go")
	cmd := exec.Command("go", "run", "./internal/goruntime/rtlayout/gen", "-o", out)
	cmd.Dir = "../../.."
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile("tables_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Error("tables_gen.go differs from the generator's output: run go run ./internal/goruntime/rtlayout/gen")
	}
}
