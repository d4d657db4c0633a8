// Package bpfgen checks, from a test, that the BPF objects and Go bindings
// bpf2go generated and that are committed are what their source produces
// now: building wallprof needs no clang, and nothing drifts.
package bpfgen

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// requireTool skips the test when something needed to rebuild the BPF object
// is missing, except under CI=true, where it fails: CI installs clang and
// libbpf-dev so that the check always runs there.
func requireTool(t testing.TB, ok bool, why string) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: CI must install it)", why)
	}
	t.Skipf("%s: cannot check that the committed BPF object matches its source", why)
}

// generateArgs returns the arguments of the //go:generate line in gen.go.
func generateArgs(t testing.TB) []string {
	t.Helper()
	src, err := os.ReadFile("gen.go")
	if err != nil {
		t.Fatal(err)
	}
	var lines [][]string
	for _, l := range strings.Split(string(src), "\n") {
		if rest, ok := strings.CutPrefix(l, "//go:generate "); ok {
			lines = append(lines, strings.Fields(rest))
		}
	}
	if len(lines) != 1 {
		t.Fatalf("gen.go has %d //go:generate lines, want 1", len(lines))
	}
	args := lines[0]
	if len(args) < 4 || args[0] != "go" || args[1] != "tool" || args[2] != "bpf2go" {
		t.Fatalf("gen.go's //go:generate line %q does not run go tool bpf2go", strings.Join(args, " "))
	}
	for _, a := range args {
		if strings.ContainsAny(a, `"'$`) {
			t.Fatalf("gen.go's //go:generate argument %q needs quoting or expansion, which this test does not do", a)
		}
	}
	return args[1:] // without "go"
}

// generatedFiles lists the bpf2go outputs (STEM_<arch>_<endian>.{go,o}) in dir.
func generatedFiles(t testing.TB, dir, stem string) []string {
	t.Helper()
	var out []string
	for _, pat := range []string{stem + "_*_bpf*.go", stem + "_*_bpf*.o"} {
		m, err := filepath.Glob(filepath.Join(dir, pat))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range m {
			if !strings.HasSuffix(f, "_test.go") {
				out = append(out, filepath.Base(f))
			}
		}
	}
	slices.Sort(out)
	return out
}

// Check rebuilds the BPF object and its Go bindings of the package the
// test runs in exactly as `go generate` does (its gen.go's one
// //go:generate line), into a temporary directory, and checks that the
// committed files (STEM_<arch>_<endian>.{go,o}) are byte for byte what the
// source produces. pkg names the package in the hint, e.g.
// "./internal/collect/bpf".
func Check(t testing.TB, stem, pkg string) {
	t.Helper()
	clang, err := exec.LookPath("clang")
	requireTool(t, err == nil, "clang not found")
	_, err = os.Stat("/usr/include/bpf/bpf_helpers.h")
	requireTool(t, err == nil, "libbpf headers (/usr/include/bpf/bpf_helpers.h) not found")
	goBin, err := exec.LookPath("go")
	requireTool(t, err == nil, "go command not found")

	out := t.TempDir()
	args := generateArgs(t)
	// go tool bpf2go -output-dir OUT <the rest of the line>
	args = slices.Concat(args[:2], []string{"-output-dir", out}, args[2:])

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goBin, args...)
	// As go generate runs it: in the package directory, with GOPACKAGE and
	// GOFILE set, and without settings that would change the compiler or its
	// flags.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BPF2GO_") && !strings.HasPrefix(kv, "GOPACKAGE=") && !strings.HasPrefix(kv, "GOFILE=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "GOPACKAGE=bpf", "GOFILE=gen.go")
	start := time.Now()
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	t.Logf("regenerated in %v", time.Since(start).Round(time.Millisecond))

	want := generatedFiles(t, out, stem)
	if len(want) == 0 {
		t.Fatalf("bpf2go wrote nothing to %s", out)
	}
	if have := generatedFiles(t, ".", stem); !slices.Equal(have, want) {
		t.Errorf("committed generated files %v, go generate writes %v", have, want)
	}
	drift := false
	for _, name := range want {
		gen, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		committed, err := os.ReadFile(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			drift = true
			continue
		}
		if !bytes.Equal(gen, committed) {
			t.Errorf("%s differs from what its source generates (%d bytes committed, %d generated)",
				name, len(committed), len(gen))
			drift = true
		}
	}
	if drift {
		ver, _ := exec.Command(clang, "--version").Output()
		first, _, _ := strings.Cut(string(ver), "\n")
		t.Logf("run `go generate %s` and commit the result (compiler: %s)", pkg, first)
	}
}
