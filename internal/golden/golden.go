// Package golden compares a test's output with a file under testdata, the
// way every golden test in wallprof does: byte for byte; a missing file
// fails; `go test -update` rewrites the files instead of comparing.
//
// Only tests import it: it registers the -update flag.
package golden

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// Check compares got with testdata/name, or writes it there with -update.
func Check(t testing.TB, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file: %v (create it with 'go test -update')", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (run 'go test -update' if the change is intended):\n--- got\n%s\n--- want\n%s",
			path, got, want)
	}
}
