package symbolize

import (
	"bufio"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Test binaries are built from testdata/ on first use into one temporary
// folder shared by the tests of this run.
var built struct {
	once sync.Once
	dir  string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// needTool skips (or fails under CI=true) when a build tool is missing.
func needTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		requires(t, false, name+" is not installed")
	}
}

// requires skips the test with reason unless ok; under CI=true a missing
// requirement is a failure instead.
func requires(t *testing.T, ok bool, reason string) {
	t.Helper()
	if ok {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("requirement not met under CI=true: %s", reason)
	}
	t.Skip(reason)
}

// binaries builds every C and C++ test binary once and returns their
// folder.
func binaries(t *testing.T) string {
	t.Helper()
	needTool(t, "gcc")
	needTool(t, "g++")
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "symbolize-test-")
		if built.err == nil {
			built.err = buildAll(built.dir)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.dir
}

func buildAll(dir string) error {
	src, err := filepath.Abs("testdata")
	if err != nil {
		return err
	}
	c, lib := filepath.Join(src, "cprog.c"), []string{"-L" + dir, "-lshared", "-Wl,-rpath," + dir, "-lpthread"}
	cmds := [][]string{
		{"gcc", "-g", "-O2", "-fPIC", "-shared", "-o", filepath.Join(dir, "libshared.so"), filepath.Join(src, "libshared.c")},
		append([]string{"gcc", "-g", "-O2", "-fPIE", "-pie", "-o", filepath.Join(dir, "cprog-pie"), c}, lib...),
		append([]string{"gcc", "-g", "-O2", "-fno-pie", "-no-pie", "-o", filepath.Join(dir, "cprog-nopie"), c}, lib...),
		append([]string{"gcc", "-O2", "-fPIE", "-pie", "-o", filepath.Join(dir, "cprog-nodebug"), c}, lib...),
		append([]string{"gcc", "-g", "-O1", "-fno-omit-frame-pointer", "-o", filepath.Join(dir, "cprog-fp"), c}, lib...),
		append([]string{"gcc", "-g", "-O2", "-o", filepath.Join(dir, "cprog-split"), c}, lib...),
		{"objcopy", "--only-keep-debug", filepath.Join(dir, "cprog-split"), filepath.Join(dir, "cprog-split.debug")},
		{"objcopy", "--strip-debug", "--add-gnu-debuglink=" + filepath.Join(dir, "cprog-split.debug"), filepath.Join(dir, "cprog-split")},
		{"g++", "-g", "-O2", "-o", filepath.Join(dir, "cxxprog"), filepath.Join(src, "cxxprog.cpp")},
		{"gcc", "-g", "-O2", "-o", filepath.Join(dir, "splitprog"), filepath.Join(src, "splitprog.c")},
	}
	for _, args := range cmds {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// openTestObject parses a file through a fresh cache.
func openTestObject(t *testing.T, path string) *object {
	t.Helper()
	c := NewCache()
	t.Cleanup(func() { c.Close() })
	o, err := c.openFile(path, path)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// funcSymbols returns the FUNC symbols of a file by name.
func funcSymbols(t *testing.T, path string) map[string]elf.Symbol {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]elf.Symbol{}
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 {
			out[s.Name] = s
		}
	}
	return out
}

// addr2line runs binutils' addr2line -a -f -i on addrs and returns the
// frames per address, innermost first, with file names reduced to their
// base name and "??" for unknowns.
func addr2line(t *testing.T, bin string, addrs []uint64) map[uint64][]frameText {
	t.Helper()
	needTool(t, "addr2line")
	cmd := exec.Command("addr2line", "-a", "-f", "-i", "-e", bin)
	var in strings.Builder
	for _, a := range addrs {
		fmt.Fprintf(&in, "%#x\n", a)
	}
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("addr2line: %v", err)
	}
	res := map[uint64][]frameText{}
	var cur uint64
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "0x") {
			fmt.Sscanf(line, "0x%x", &cur)
			res[cur] = nil
			continue
		}
		fn := line
		if !sc.Scan() {
			break
		}
		loc := sc.Text()
		if i := strings.Index(loc, " (discriminator"); i >= 0 {
			loc = loc[:i]
		}
		res[cur] = append(res[cur], frameText{fn: fn, loc: filepath.Base(loc)})
	}
	return res
}

type frameText struct{ fn, loc string }

func (f frameText) String() string { return f.fn + "@" + f.loc }

func itoa(i int) string { return fmt.Sprint(i) }

func atoi(s string) int {
	var i int
	fmt.Sscan(s, &i)
	return i
}
