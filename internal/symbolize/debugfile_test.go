package symbolize

import (
	"bytes"
	"debug/elf"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// debugBuild is debugprog.c built with DWARF, and what a distribution makes
// of it: the debug file (objcopy --only-keep-debug), the stripped binary
// with a .gnu_debuglink to it, a stripped binary without one, and one
// carrying MiniDebugInfo (.gnu_debugdata), as Fedora ships them.
type debugBuild struct {
	dir                           string
	full, debug, linked, unlinked string
	mini                          string
	buildID                       string
	static, exported              uint64 // the functions' addresses
}

func run(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func buildDebugProg(t *testing.T) *debugBuild {
	t.Helper()
	for _, tool := range []string{"gcc", "objcopy", "strip", "xz"} {
		needTool(t, tool)
	}
	src, err := filepath.Abs(filepath.Join("testdata", "debugprog.c"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	b := &debugBuild{dir: dir, full: filepath.Join(dir, "full"), debug: filepath.Join(dir, "prog.debug"),
		linked: filepath.Join(dir, "linked"), unlinked: filepath.Join(dir, "unlinked"), mini: filepath.Join(dir, "mini")}
	run(t, dir, "gcc", "-g", "-O1", "-rdynamic", "-Wl,--build-id", "-o", b.full, src)
	run(t, dir, "objcopy", "--only-keep-debug", b.full, b.debug)
	run(t, dir, "cp", b.full, b.unlinked)
	run(t, dir, "strip", "--strip-debug", "--strip-unneeded", b.unlinked)
	run(t, dir, "cp", b.unlinked, b.linked)
	run(t, dir, "objcopy", "--add-gnu-debuglink=prog.debug", b.linked) // reads ./prog.debug for its CRC

	// MiniDebugInfo: the debug file's function symbols that .dynsym lacks,
	// no DWARF, xz-compressed into .gnu_debugdata of a fully stripped binary.
	ef, err := elf.Open(b.full)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	b.buildID = buildID(ef)
	dyn := map[string]bool{}
	dsyms, _ := ef.DynamicSymbols()
	for _, s := range dsyms {
		dyn[s.Name] = true
	}
	syms, err := ef.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Value == 0 {
			continue
		}
		switch s.Name {
		case "debug_marker_static":
			b.static = s.Value
		case "debug_marker_exported":
			b.exported = s.Value
		}
		if !dyn[s.Name] {
			keep = append(keep, s.Name)
		}
	}
	if b.static == 0 || b.exported == 0 || !dyn["debug_marker_exported"] || dyn["debug_marker_static"] {
		t.Fatalf("unexpected symbols: static %#x, exported %#x, dynamic %v", b.static, b.exported, dyn)
	}
	sort.Strings(keep)
	if err := os.WriteFile(filepath.Join(dir, "keep"), []byte(strings.Join(keep, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, dir, "objcopy", "-S", "--remove-section", ".gdb_index", "--remove-section", ".comment",
		"--keep-symbols=keep", "prog.debug", "minidebuginfo")
	run(t, dir, "xz", "-k", "minidebuginfo")
	run(t, dir, "cp", b.full, b.mini)
	run(t, dir, "strip", "--strip-all", b.mini)
	run(t, dir, "objcopy", "--add-section", ".gnu_debugdata=minidebuginfo.xz", b.mini)
	return b
}

// openIn parses bin as if a process whose root directory is root mapped it
// from path.
func openIn(t *testing.T, c *Cache, root fsRoot, path, bin string) *object {
	t.Helper()
	o, err := c.openFileIn(root, path, bin)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// tempRoot returns a folder standing for a container's root, with files
// copied to paths inside it.
func tempRoot(t *testing.T, files map[string]string) *os.Root {
	t.Helper()
	dir := t.TempDir()
	for to, from := range files {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, to)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// checkNamed checks that o names the static function with its source line
// (withLine) or at least its name.
func checkNamed(t *testing.T, o *object, b *debugBuild, withLine bool) {
	t.Helper()
	fr := o.frames(b.static + 4)
	if len(fr) == 0 || fr[len(fr)-1].Function != "debug_marker_static" {
		t.Fatalf("frames at debug_marker_static+4 = %+v", fr)
	}
	if withLine && (filepath.Base(fr[0].File) != "debugprog.c" || fr[0].Line < 10 || fr[0].Line > 15) {
		t.Errorf("frames at debug_marker_static+4 = %+v, want debugprog.c:10-15", fr)
	}
}

func TestDebugFileByBuildIDInRoot(t *testing.T) {
	b := buildDebugProg(t)
	id := b.buildID
	root := tempRoot(t, map[string]string{
		"opt/app/prog": b.unlinked,
		filepath.Join("usr/lib/debug/.build-id", id[:2], id[2:]+".debug"): b.debug,
	})
	c := NewCache()
	defer c.Close()
	checkNamed(t, openIn(t, c, root, "/opt/app/prog", b.unlinked), b, true)

	// Without the debug file, only the exported function has a name.
	c2 := NewCache()
	defer c2.Close()
	o := openIn(t, c2, tempRoot(t, nil), "/opt/app/prog", b.unlinked)
	if fr := o.frames(b.static + 4); len(fr) != 0 && fr[0].Function == "debug_marker_static" {
		t.Errorf("named without debug info: %+v", fr)
	}
	if fr := o.frames(b.exported); len(fr) == 0 || fr[0].Function != "debug_marker_exported" {
		t.Errorf("exported function: %+v", fr)
	}
}

func TestDebugFileByDebuglink(t *testing.T) {
	b := buildDebugProg(t)
	for _, where := range []string{"opt/app/prog.debug", "opt/app/.debug/prog.debug", "usr/lib/debug/opt/app/prog.debug"} {
		c := NewCache()
		root := tempRoot(t, map[string]string{where: b.debug})
		checkNamed(t, openIn(t, c, root, "/opt/app/prog", b.linked), b, true)
		c.Close()
	}

	// A file of that name whose CRC differs is not the debug file, even
	// with the same build ID.
	altered := filepath.Join(b.dir, "altered.debug")
	run(t, b.dir, "objcopy", "--add-section", ".note.extra="+b.full, b.debug, altered)
	c := NewCache()
	defer c.Close()
	o := openIn(t, c, tempRoot(t, map[string]string{"opt/app/prog.debug": altered}), "/opt/app/prog", b.linked)
	if fr := o.frames(b.static + 4); len(fr) != 0 && fr[0].Function == "debug_marker_static" {
		t.Errorf("a debug file with the wrong CRC was used: %+v", fr)
	}
}

func TestDebugMiniDebugInfo(t *testing.T) {
	b := buildDebugProg(t)
	c := NewCache()
	defer c.Close()
	o := openIn(t, c, tempRoot(t, nil), "/opt/app/prog", b.mini)
	checkNamed(t, o, b, false)
	if fr := o.frames(b.exported); len(fr) == 0 || fr[0].Function != "debug_marker_exported" {
		t.Errorf("exported function: %+v", fr)
	}
	if miniDebugInfo(o.elf) == nil || o.debugFile() != nil {
		t.Error("MiniDebugInfo not read, or a debug file found")
	}
}

func TestDebuginfod(t *testing.T) {
	b := buildDebugProg(t)
	debug, err := os.ReadFile(b.debug)
	if err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		if r.URL.Path != "/buildid/"+b.buildID+"/debuginfo" {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "debuginfo", time.Time{}, bytes.NewReader(debug))
	}))
	defer srv.Close()
	cacheDir := t.TempDir()

	c := NewCache()
	defer c.Close()
	o := openIn(t, c, tempRoot(t, nil), "/opt/app/prog", b.unlinked)
	// The unwinder (while recording) and lookups before UseDebuginfod never ask.
	if o.debugFile() != nil {
		t.Fatal("a local debug file was found")
	}
	c.UseDebuginfod(NewDebuginfod([]string{"http://127.0.0.1:1", srv.URL + "/"}, cacheDir))
	checkNamed(t, o, b, true)
	if n := asked.Load(); n != 1 {
		t.Errorf("the server was asked %d times, want 1", n)
	}
	if _, err := os.Stat(filepath.Join(cacheDir, b.buildID, "debuginfo")); err != nil {
		t.Errorf("not cached: %v", err)
	}

	// The next run finds it in the cache directory: the server is not asked.
	c2 := NewCache()
	defer c2.Close()
	c2.UseDebuginfod(NewDebuginfod([]string{srv.URL}, cacheDir))
	checkNamed(t, openIn(t, c2, tempRoot(t, nil), "/opt/app/prog", b.unlinked), b, true)
	if n := asked.Load(); n != 1 {
		t.Errorf("the server was asked %d times, want 1 (the cache should answer)", n)
	}

	// A server that does not have the file: nothing cached, no name.
	d := NewDebuginfod([]string{srv.URL}, t.TempDir())
	if p, err := d.fetch(strings.Repeat("ab", 20)); err == nil {
		t.Errorf("fetch of an unknown build ID = %s", p)
	}
}
