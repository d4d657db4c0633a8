package outfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// entries lists a directory's names.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestCommit(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.txt")
	f, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Abandon()
	io.WriteString(f, "hello")
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the file exists before Commit: %v", err)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	f.Abandon() // no effect after Commit
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "hello" {
		t.Fatalf("read %q, %v", b, err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != Mode {
		t.Errorf("mode %v, want %v", st.Mode().Perm(), os.FileMode(Mode))
	}
	if names := entries(t, dir); len(names) != 1 {
		t.Errorf("directory holds %q, want only out.txt", names)
	}
	if err := f.Commit(); err == nil {
		t.Error("a second Commit succeeded")
	}
}

// A failed write leaves nothing, and keeps the file it would replace.
func TestWriteFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.txt")
	os.WriteFile(path, []byte("old"), 0o644)
	err := Write(path, func(w io.Writer) error {
		io.WriteString(w, strings.Repeat("x", 1<<20))
		return errors.New("boom")
	})
	if err == nil || err.Error() != "boom" {
		t.Fatalf("err %v, want boom", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "old" {
		t.Errorf("the old file became %d bytes", len(b))
	}
	if names := entries(t, dir); len(names) != 1 {
		t.Errorf("directory holds %q, want only out.txt", names)
	}
}

func TestCreateChecksDirectory(t *testing.T) {
	_, err := Create(filepath.Join(t.TempDir(), "missing", "out.txt"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err %v, want not exist", err)
	}
}

func TestAbandon(t *testing.T) {
	dir := t.TempDir()
	f, err := Create(filepath.Join(dir, "out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "partial")
	f.Abandon()
	if names := entries(t, dir); len(names) != 0 {
		t.Errorf("directory holds %q after Abandon", names)
	}
}

// The exact path is checked at Create, not at Commit: a directory, or a
// file that cannot be written, fails at once.
func TestCreateChecksPath(t *testing.T) {
	dir := t.TempDir()
	if _, err := Create(dir); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("Create(directory): err %v, want 'is a directory'", err)
	}
	ro := filepath.Join(dir, "ro.txt")
	if err := os.WriteFile(ro, []byte("x"), 0o444); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 { // root writes read-only files
		if _, err := Create(ro); !errors.Is(err, os.ErrPermission) {
			t.Errorf("Create(read-only file): err %v, want permission denied", err)
		}
	}
	if names := entries(t, dir); len(names) != 1 {
		t.Errorf("directory holds %q after failed Creates", names)
	}
}

// Temporary files of the same name whose process is gone (kill -9) are
// removed; those of running processes and of other names are kept.
func TestCreateRemovesStale(t *testing.T) {
	dir := t.TempDir()
	gone := ".out.txt.999999999.123.tmp"    // no such PID
	alive := ".out.txt.1.456.tmp"           // init runs
	other := ".other.txt.999999999.789.tmp" // another file's
	odd := ".out.txt.notapid.tmp"           // not ours
	for _, n := range []string{gone, alive, other, odd} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f, err := Create(filepath.Join(dir, "out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Abandon()
	names := strings.Join(entries(t, dir), " ")
	if strings.Contains(names, gone) {
		t.Errorf("stale %s kept: %s", gone, names)
	}
	for _, n := range []string{alive, other, odd} {
		if !strings.Contains(names, n) {
			t.Errorf("%s removed: %s", n, names)
		}
	}
	if !strings.Contains(names, fmt.Sprintf(".out.txt.%d.", os.Getpid())) {
		t.Errorf("own temporary file not named after the PID: %s", names)
	}
}
