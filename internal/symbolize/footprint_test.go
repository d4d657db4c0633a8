package symbolize

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// TestCacheSweep: the files of a process that was closed are closed and
// forgotten once idle, those another open process maps are kept, and the
// closed process's root directory is closed at once (a system-wide agent
// opened one per process and never closed it).
func TestCacheSweep(t *testing.T) {
	sleep := exec.Command("sleep", "30")
	if err := sleep.Start(); err != nil {
		t.Skipf("cannot start sleep: %v", err)
	}
	defer sleep.Process.Kill()
	time.Sleep(100 * time.Millisecond) // exec'ed
	c := NewCache()
	defer c.Close()
	self, err := c.NewProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	other, err := c.NewProcess(sleep.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	before, closers := len(c.all), len(c.closers)
	if n := c.Sweep(0); n != 0 {
		t.Fatalf("swept %d files that open processes map", n)
	}
	other.Close()
	if len(c.closers) != closers-2 {
		t.Errorf("%d closers after closing a process, want %d (its root and JIT files closed)", len(c.closers), closers-2)
	}
	if n := c.Sweep(time.Hour); n != 0 {
		t.Errorf("swept %d files idle for less than an hour", n)
	}
	n := c.Sweep(0)
	if n == 0 || len(c.all) != before-n {
		t.Errorf("swept %d of %d files after the sleep closed, %d left: want its own ones gone", n, before, len(c.all))
	}
	for _, o := range c.all {
		if o.refs <= 0 {
			t.Errorf("%s kept with %d references", o.name, o.refs)
		}
	}
	// The test binary's own file is still there, and resolves.
	pc := uint64(reflect.ValueOf(TestCacheSweep).Pointer())
	if _, f := self.Resolve(pc); len(f) == 0 || f[0].Function != "github.com/wallprof/wallprof/internal/symbolize.TestCacheSweep" {
		t.Errorf("after the sweep, own pc resolves to %+v", f)
	}
}

// TestStaticGoSkipsDWARF: an address in no function of a static Go binary
// is not looked up in its DWARF, which costs 20 MB to index for a binary
// of wallprof's size and names no function .gopclntab does not.
func TestStaticGoSkipsDWARF(t *testing.T) {
	normal, _ := buildGo(t) // CGO_ENABLED=0: static
	o := openTestObject(t, normal)
	if o.dynamic() || o.goTable() == nil || !hasDWARF(o.elf) {
		t.Fatalf("%s: want a static Go binary with DWARF (dynamic %v)", normal, o.dynamic())
	}
	var text *elf.Section
	for _, s := range o.elf.Sections {
		if s.Name == ".text" {
			text = s
		}
	}
	if text == nil {
		t.Fatal("no .text")
	}
	o.frames(text.Addr + text.Size + 64) // past every function
	if o.dw != nil {
		t.Error("the DWARF of a static Go binary was indexed")
	}
}

// TestGoSkipsDebugFrame: a Go binary's .debug_frame (its Go functions,
// unwound from .gopclntab) is not parsed.
func TestGoSkipsDebugFrame(t *testing.T) {
	normal, _ := buildGo(t)
	o := openTestObject(t, normal)
	if o.elf.Section(".debug_frame") == nil {
		t.Fatalf("%s has no .debug_frame to skip", normal)
	}
	if o.elf.Section(".eh_frame") != nil {
		t.Skipf("%s has an .eh_frame (linked externally)", normal)
	}
	if n := len(o.cfiTables()); n != 0 {
		t.Errorf("%d CFI tables parsed for a Go binary without .eh_frame, want none (its .debug_frame skipped)", n)
	}
}

// TestSkipDWARF: a cache that skips DWARF (the agent's) names the C code
// of a cgo program from its symbol table and never indexes the DWARF; a
// plain cache indexes it for that code.
func TestSkipDWARF(t *testing.T) {
	needTool(t, "gcc")
	dir := t.TempDir()
	src := "package main\n\n// int twice(int x) { return 2 * x; }\nimport \"C\"\n\nfunc main() { println(C.twice(2)) }\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module cgoprog\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "cgoprog")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "CGO_ENABLED=1", "GOTOOLCHAIN=local")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	pc := uint64(0)
	for name, s := range funcSymbols(t, bin) {
		if name == "twice" {
			pc = s.Value
		}
	}
	if pc == 0 {
		t.Fatal("no symbol twice")
	}
	for _, skip := range []bool{false, true} {
		c := NewCache()
		if skip {
			c.SkipDWARF()
		}
		o, err := c.openFile(bin, bin)
		if err != nil {
			t.Fatal(err)
		}
		if !o.dynamic() || o.goTable() == nil {
			t.Fatalf("%s: want a dynamic Go program", bin)
		}
		fr := o.frames(pc)
		if len(fr) == 0 || fr[len(fr)-1].Function != "twice" {
			t.Errorf("skip %v: frames %+v, want twice", skip, fr)
		}
		if indexed := o.dw != nil; indexed == skip {
			t.Errorf("skip %v: DWARF indexed %v", skip, indexed)
		}
		c.Close()
	}
}
