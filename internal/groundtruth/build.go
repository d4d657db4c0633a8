package groundtruth

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

// cFlags are the gcc flags of each C workload, after "gcc".
var cFlags = map[string][]string{
	"cgt":      {"-O1", "-g", "-fno-omit-frame-pointer", "-pthread"},
	"pingpong": {"-O2", "-g", "-fno-omit-frame-pointer", "-pthread"},
	"cpubound": {"-O2", "-g", "-fno-omit-frame-pointer"},
	"flood":    {"-O2", "-g", "-fno-omit-frame-pointer", "-pthread"},
	// Without frame pointers, as distributions build: for the in-kernel
	// unwinder.
	"nofp": {"-O2", "-g", "-fomit-frame-pointer", "-pthread"},
	// A stack that ends at an unreadable page, right above its frames.
	"topstack": {"-O2", "-g", "-fomit-frame-pointer"},
}

// Build compiles the workload name ("cgt", "pingpong", "cpubound", "flood",
// "nofp", "topstack" or "gogt") and returns the path of its binary.
//
// Binaries are cached in a directory under os.TempDir() named by a hash of
// the sources, the flags and the compiler version, so every test of a run
// (and later runs, until something changes) shares one build; builds are
// written to a temporary name and renamed, so concurrent test binaries are
// safe. A missing compiler skips the test, or fails it when CI=true.
func Build(t testing.TB, name string) string {
	t.Helper()
	if name == "gogt" {
		return BuildGo(t, WorkloadDir(t, "gogt"), false, "")
	}
	flags, ok := cFlags[name]
	if !ok {
		t.Fatalf("groundtruth: unknown workload %q", name)
	}
	gcc := requireTool(t, "gcc")
	src := filepath.Join(WorkloadDir(t, name), name+".c")
	version := toolOutput(t, nil, gcc, "--version")
	key := hashKey(t, []string{src}, append([]string{gcc, version}, flags...))
	return cached(t, name, key, func(out string) *exec.Cmd {
		args := append(append([]string{}, flags...), "-o", out, src)
		return exec.Command(gcc, args...)
	})
}

// BuildGo builds the Go main package in dir (a module of its own, such as
// WorkloadDir(t, "gogt")) and returns the path of the binary. stripped
// links with -ldflags="-s -w" (no symbol table, no DWARF; .gopclntab stays).
// toolchain, when not empty, selects the Go toolchain through GOTOOLCHAIN
// ("go1.22.12"); the go command downloads it if it is not cached yet.
func BuildGo(t testing.TB, dir string, stripped bool, toolchain string) string {
	t.Helper()
	goCmd := requireTool(t, "go")
	env := append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
	if toolchain != "" {
		env = append(env, "GOTOOLCHAIN="+toolchain)
	}
	version := toolOutput(t, env, goCmd, "env", "GOVERSION")
	if toolchain != "" && version != toolchain {
		t.Fatalf("groundtruth: GOTOOLCHAIN=%s gives %s", toolchain, version)
	}
	var ldflags []string
	if stripped {
		ldflags = []string{"-ldflags=-s -w"}
	}
	srcs, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(srcs) == 0 {
		t.Fatalf("groundtruth: no Go files in %s", dir)
	}
	srcs = append(srcs, filepath.Join(dir, "go.mod"))
	key := hashKey(t, srcs, append([]string{version}, ldflags...))
	name := filepath.Base(dir) + "-" + version
	if stripped {
		name += "-stripped"
	}
	return cached(t, name, key, func(out string) *exec.Cmd {
		args := append(append([]string{"build", "-o", out}, ldflags...), ".")
		cmd := exec.Command(goCmd, args...)
		cmd.Dir = dir
		cmd.Env = env
		return cmd
	})
}

// WorkloadDir returns the absolute path of testdata/workloads/name in the
// wallprof module, found by walking up from the working directory.
func WorkloadDir(t testing.TB, name string) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatalf("groundtruth: %v", err)
	}
	return filepath.Join(root, "testdata", "workloads", name)
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module github.com/wallprof/wallprof\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of github.com/wallprof/wallprof above the working directory")
		}
		dir = parent
	}
}

// cached returns the binary for key, building it with build(out) if absent.
func cached(t testing.TB, name, key string, build func(out string) *exec.Cmd) string {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "wallprof-groundtruth", key)
	bin := filepath.Join(dir, name)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("groundtruth: %v", err)
	}
	tmp, err := os.CreateTemp(dir, name+".tmp*")
	if err != nil {
		t.Fatalf("groundtruth: %v", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	cmd := build(tmp.Name())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("groundtruth: build %s: %s: %v\n%s", name, strings.Join(cmd.Args, " "), err, out)
	}
	if err := os.Rename(tmp.Name(), bin); err != nil {
		t.Fatalf("groundtruth: %v", err)
	}
	return bin
}

// hashKey hashes the content of files and the strings in extra.
func hashKey(t testing.TB, files, extra []string) string {
	t.Helper()
	h := sha256.New()
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("groundtruth: %v", err)
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(b))
		h.Write(b)
	}
	fmt.Fprintf(h, "%s/%s %q\n", runtime.GOOS, runtime.GOARCH, extra)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// requireTool returns the path of tool, or skips the test (fails it when
// CI=true: CI must exercise every test).
func requireTool(t testing.TB, tool string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		msg := fmt.Sprintf("groundtruth: %s not found in PATH; install it to build the workloads", tool)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

func toolOutput(t testing.TB, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("groundtruth: %s %s: %v", name, strings.Join(args, " "), err)
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return first
}

// Run runs the workload binary bin with args plus --truth FILE (FILE in
// t.TempDir()), fails the test if it fails, and returns its truth.
func Run(t testing.TB, bin string, args ...string) *Truth {
	t.Helper()
	path := filepath.Join(t.TempDir(), "truth.json")
	cmd := exec.Command(bin, append(append([]string{}, args...), "--truth", path)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("groundtruth: %s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
	}
	tr, err := ReadTruth(path)
	if err != nil {
		t.Fatalf("groundtruth: %v", err)
	}
	return tr
}
