package linux

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// kernelCallers are the packages besides this one that may import
// golang.org/x/sys/unix or syscall; the package doc says why each does.
var kernelCallers = map[string]bool{
	"internal/linux":                true,
	"cmd/wallprof":                  true,
	"internal/collect":              true,
	"internal/goruntime/goroutines": true,
	"internal/load":                 true,
	"internal/symbolize":            true,
}

// TestKernelCallsStayHere fails when a package of wallprof that is not in
// kernelCallers imports golang.org/x/sys/unix or syscall (test files,
// testdata, examples and benchmarks aside): kernel calls belong here, or in
// the package doc's list with a reason.
func TestKernelCallsStayHere(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	importers := map[string][]string{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch {
			case rel == ".":
				return nil
			case strings.HasPrefix(d.Name(), "."), d.Name() == "testdata", rel == "examples", rel == "bench":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == "syscall" || p == "golang.org/x/sys/unix" {
				dir := filepath.ToSlash(filepath.Dir(rel))
				importers[dir] = append(importers[dir], filepath.Base(path)+": "+p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for dir := range importers {
		dirs = append(dirs, dir)
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		if !kernelCallers[dir] {
			t.Errorf("%s imports %s: make the kernel call in internal/linux, or add the package to its doc's list with a reason (and to kernelCallers)",
				dir, strings.Join(importers[dir], ", "))
		}
	}
	if len(importers["internal/linux"]) == 0 {
		t.Error("found no import of x/sys/unix in internal/linux itself: the walk is broken")
	}
}
