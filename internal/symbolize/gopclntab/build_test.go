package gopclntab

import (
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Toolchains the tests build testdata/prog with. "" is the installed go;
// the others are downloaded by the go command (GOTOOLCHAIN) on first use.
var oldToolchains = []string{"go1.24.13", "go1.22.12", "go1.20.14", "go1.18.10", "go1.16.15"}

// buildDir holds the binaries built in this test run, shared by all tests.
var buildDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gopclntab-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buildDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// Build modes of testdata/prog.
const (
	modeNormal   = ""
	modeStripped = "stripped" // -ldflags=-s -w
	modePIE      = "pie"      // -buildmode=pie -ldflags=-s -w
	// External linking puts C start-up code before runtime.text.
	modeExtPIE         = "extpie"          // -buildmode=pie -ldflags=-linkmode=external
	modeExtPIEStripped = "extpie-stripped" // the same, with -s -w
)

type buildKey struct {
	toolchain string
	mode      string
}

type buildResult struct {
	path string
	err  error
}

var builds = struct {
	sync.Mutex
	m map[buildKey]*buildResult
}{m: map[buildKey]*buildResult{}}

// buildProg builds testdata/prog with the given toolchain ("" for the
// installed one) in the given mode, once per test run. A toolchain that
// cannot be downloaded skips the test.
func buildProg(t testing.TB, toolchain, mode string) string {
	t.Helper()
	key := buildKey{toolchain, mode}
	builds.Lock()
	r, ok := builds.m[key]
	if !ok {
		r = &buildResult{}
		r.path, r.err = runBuild(toolchain, mode)
		builds.m[key] = r
	}
	builds.Unlock()
	if r.err != nil {
		if strings.HasPrefix(mode, modeExtPIE) {
			t.Skipf("external linking unavailable (no C toolchain?): %v", r.err)
		}
		if toolchain != "" {
			t.Skipf("toolchain %s unavailable (download from the module proxy failed?): %v", toolchain, r.err)
		}
		t.Fatal(r.err)
	}
	return r.path
}

func runBuild(toolchain, mode string) (string, error) {
	out := filepath.Join(buildDir, "prog-"+toolchainName(toolchain)+"-"+mode)
	args := []string{"build", "-o", out}
	switch mode {
	case modeStripped:
		args = append(args, "-ldflags=-s -w")
	case modePIE:
		args = append(args, "-buildmode=pie", "-ldflags=-s -w")
	case modeExtPIE:
		args = append(args, "-buildmode=pie", "-ldflags=-linkmode=external")
	case modeExtPIEStripped:
		args = append(args, "-buildmode=pie", "-ldflags=-linkmode=external -s -w")
	}
	cgo := "CGO_ENABLED=0"
	if strings.HasPrefix(mode, modeExtPIE) {
		cgo = "CGO_ENABLED=1"
	}
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Dir = filepath.Join("testdata", "prog")
	env := append(os.Environ(), cgo, "GOFLAGS=-mod=mod")
	if toolchain != "" {
		env = append(env, "GOTOOLCHAIN="+toolchain)
	} else {
		env = append(env, "GOTOOLCHAIN=local")
	}
	cmd.Env = env
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s (toolchain %q): %v\n%s", strings.Join(args, " "), toolchain, err, b)
	}
	return out, nil
}

// openELF opens path and registers its closing.
func openELF(t testing.TB, path string) *elf.File {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// toolchainsFor returns the toolchains to test: all in a full run, only the
// installed one with -short.
func toolchainsFor(t *testing.T) []string {
	if testing.Short() {
		return []string{""}
	}
	return append([]string{""}, oldToolchains...)
}

func toolchainName(tc string) string {
	if tc == "" {
		return "local"
	}
	return tc
}
