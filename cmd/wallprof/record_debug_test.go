package main

import (
	"bytes"
	"debug/elf"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/profile"
)

// The separate-debug-info tests build a C program with DWARF, strip it as
// a distribution does (objcopy --only-keep-debug, strip --strip-debug
// --strip-unneeded) and record it: the name of its static function and its
// source lines must come from the debug file, found at its build-ID path
// under /usr/lib/debug (where -dbgsym packages install them) or from a
// debuginfod server.

// stripDebugProg builds debugprog.c and returns the stripped binary, its
// debug file and its build ID.
func stripDebugProg(t *testing.T) (bin, debug, id string) {
	t.Helper()
	for _, tool := range []string{"gcc", "objcopy", "strip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed", tool)
		}
	}
	src, err := filepath.Abs(filepath.Join("..", "..", "internal", "symbolize", "testdata", "debugprog.c"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin, debug = filepath.Join(dir, "debugprog"), filepath.Join(dir, "debugprog.debug")
	for _, args := range [][]string{
		{"gcc", "-g", "-O1", "-Wl,--build-id", "-o", bin, src},
		{"objcopy", "--only-keep-debug", bin, debug},
		{"strip", "--strip-debug", "--strip-unneeded", bin},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	ef, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	s := ef.Section(".note.gnu.build-id")
	if s == nil {
		t.Fatal("no build ID")
	}
	note, err := s.Data()
	if err != nil || len(note) < 16+4 {
		t.Fatalf("build ID note: %v", err)
	}
	return bin, debug, hex.EncodeToString(note[16:])
}

// recordDebugProg records the stripped program for a second and checks that
// its on-CPU time is in debug_marker_static, at a line of debugprog.c.
func recordDebugProg(t *testing.T, bin string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "debug.pb.gz")
	code, stderr := wallprof(t, "record", "--duration", "1s", "-o", out, "--", bin, "100000000000")
	if code != 0 {
		t.Fatalf("wallprof record exited %d:\n%s", code, stderr)
	}
	p := readProfile(t, out)
	var all, named, lined int64
	for _, s := range p.Samples {
		if s.State != profile.OnCPU || len(s.Stack) == 0 {
			continue
		}
		all += s.Value
		if fs := s.Stack[0].Frames; len(fs) > 0 && fs[len(fs)-1].Function == "debug_marker_static" {
			named += s.Value
			if filepath.Base(fs[0].File) == "debugprog.c" && fs[0].Line > 0 {
				lined += s.Value
			}
		}
	}
	t.Logf("on-CPU %d ns: %d in debug_marker_static, %d of it with its line", all, named, lined)
	if all == 0 || float64(named) < 0.8*float64(all) || lined != named {
		t.Errorf("debug_marker_static has %d ns of %d on-CPU, %d with a line of debugprog.c", named, all, lined)
		logTop(t, p)
	}
}

// The debug file installed at /usr/lib/debug/.build-id/xx/yyyy.debug, as
// a -dbgsym package puts it (removed after the test).
func TestRecordDebugFileByBuildID(t *testing.T) {
	requireRecording(t)
	bin, debug, id := stripDebugProg(t)
	dst := filepath.Join("/usr/lib/debug/.build-id", id[:2], id[2:]+".debug")
	// Remove what the test creates, the folders it made included.
	var made []string
	for d := filepath.Dir(dst); d != "/usr/lib"; d = filepath.Dir(d) {
		if _, err := os.Stat(d); os.IsNotExist(err) {
			made = append(made, d)
		}
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.Remove(dst)
		for _, d := range made { // innermost first
			os.Remove(d)
		}
	})
	data, err := os.ReadFile(debug)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
	recordDebugProg(t, bin)
}

// The debug file from a debuginfod server (DEBUGINFOD_URLS), downloaded
// into $XDG_CACHE_HOME/wallprof/debuginfod when the profile is built.
func TestRecordDebuginfod(t *testing.T) {
	requireRecording(t)
	bin, debug, id := stripDebugProg(t)
	data, err := os.ReadFile(debug)
	if err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/buildid/"+id+"/debuginfo" {
			http.NotFound(w, r)
			return
		}
		asked.Add(1)
		http.ServeContent(w, r, "debuginfo", time.Time{}, bytes.NewReader(data))
	}))
	defer srv.Close()
	cache := t.TempDir()
	t.Setenv("DEBUGINFOD_URLS", srv.URL)
	t.Setenv("XDG_CACHE_HOME", cache)
	recordDebugProg(t, bin)
	if asked.Load() != 1 {
		t.Errorf("the server was asked for the debug file %d times, want 1", asked.Load())
	}
	if _, err := os.Stat(filepath.Join(cache, "wallprof", "debuginfod", id, "debuginfo")); err != nil {
		t.Errorf("not in the cache: %v", err)
	}
}
