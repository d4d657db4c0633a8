package rtlayout

import (
	"debug/dwarf"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/wallprof/wallprof/internal/groundtruth"
)

func TestMinor(t *testing.T) {
	for in, want := range map[string]string{
		"go1.22.12":               "go1.22",
		"go1.26rc1":               "go1.26",
		"go1.21.0 X:boringcrypto": "go1.21",
		"go1.20":                  "go1.20",
		"devel go1.27-abcdef":     "",
		"go2.0":                   "",
		"":                        "",
		"go1.":                    "",
		"go1.100.1":               "go1.100",
	} {
		if got := Minor(in); got != want {
			t.Errorf("Minor(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestForVersionUnsupported(t *testing.T) {
	for _, v := range []string{"go1.18.10", "go1.27.0", "devel +abc"} {
		_, err := ForVersion(v)
		if !errors.Is(err, ErrUnsupportedVersion) {
			t.Fatalf("ForVersion(%q) error = %v, want ErrUnsupportedVersion", v, err)
		}
		if !strings.Contains(err.Error(), "supported: 1.19–1.26") {
			t.Errorf("ForVersion(%q) error %q does not list the supported versions", v, err)
		}
	}
	_, err := ForVersion("go1.18.10")
	if want := "Go 1.18 is not supported; supported: 1.19–1.26"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not contain %q", err, want)
	}
}

// TestTables checks every committed table for what the reader relies on.
func TestTables(t *testing.T) {
	want := []string{"go1.19", "go1.20", "go1.21", "go1.22", "go1.23", "go1.24", "go1.25", "go1.26"}
	if got := SupportedVersions(); !slices.Equal(got, want) {
		t.Fatalf("SupportedVersions() = %q, want %q", got, want)
	}
	for _, v := range want {
		l, err := ForVersion(v + ".1")
		if err != nil {
			t.Fatal(err)
		}
		if l.Version != v {
			t.Errorf("%s: Version = %q", v, l.Version)
		}
		o := l.Offsets
		words := map[string]int{"stack.lo": o.GStackLo, "stack.hi": o.GStackHi, "sched.sp": o.GSchedSP,
			"sched.pc": o.GSchedPC, "sched.bp": o.GSchedBP, "m": o.GM, "goid": o.GGoid, "gopc": o.GGopc,
			"startpc": o.GStartpc, "labels": o.GLabels}
		for name, off := range words {
			if off < 0 || off%8 != 0 || off+8 > o.GSize {
				t.Errorf("%s: g.%s at %d (g is %d bytes)", v, name, off, o.GSize)
			}
		}
		if (o.GParentGoid >= 0) != (v != "go1.19" && v != "go1.20") {
			t.Errorf("%s: g.parentGoid at %d; it exists from Go 1.21", v, o.GParentGoid)
		}
		if o.GAtomicstatus%4 != 0 || o.GWaitreason >= o.GSize || o.MProcid%8 != 0 || o.MCurg%8 != 0 {
			t.Errorf("%s: implausible offsets %+v", v, o)
		}
		if l.WaitReasons[0] != "" {
			t.Errorf("%s: waitReasonZero is %q", v, l.WaitReasons[0])
		}
		for _, r := range []string{"chan receive", "chan send", "select", "sleep", "IO wait", "sync.Mutex.Lock", "semacquire", "GC worker (idle)"} {
			if r == "sync.Mutex.Lock" && v == "go1.19" {
				continue // from Go 1.20; a contended Lock was "semacquire" before
			}
			if !slices.Contains(l.WaitReasons, r) {
				t.Errorf("%s: no wait reason %q", v, r)
			}
		}
	}
	// The order differs between versions: that is why there is one table
	// per version.
	a, _ := ForVersion("go1.20")
	b, _ := ForVersion("go1.26")
	if slices.Index(a.WaitReasons, "sleep") == slices.Index(b.WaitReasons, "sleep") &&
		slices.Equal(a.WaitReasons, b.WaitReasons[:len(a.WaitReasons)]) {
		t.Errorf("wait reasons of go1.20 and go1.26 agree; the tables look wrong")
	}
	if got := b.WaitReason(255); got != "waitReason(255)" {
		t.Errorf("WaitReason(255) = %q", got)
	}
}

// TestDrift checks the committed table of the local Go toolchain against
// the DWARF of a program it builds and against the wait reasons of its
// GOROOT: a new toolchain that moved a field or a wait reason fails here
// until the tables are regenerated (go run ./internal/goruntime/rtlayout/gen).
// (Test binaries themselves are linked without DWARF.)
func TestDrift(t *testing.T) {
	bin := groundtruth.BuildGo(t, groundtruth.WorkloadDir(t, "goparked"), false, "")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := f.DWARF()
	if err != nil {
		t.Fatal(err)
	}
	got, err := FromDWARF(d)
	if err != nil {
		t.Fatal(err)
	}
	l, err := ForVersion(runtime.Version())
	if err != nil {
		t.Fatal(err)
	}
	if got != l.Offsets {
		t.Errorf("offsets from DWARF of %s:\n%+v\ncommitted table:\n%+v\nregenerate with go run ./internal/goruntime/rtlayout/gen", runtime.Version(), got, l.Offsets)
	}
	if off, ok := fieldOffset(gType(t, d), "waitsince"); !ok || off != l.Offsets.GWaitsince() {
		t.Errorf("g.waitsince at %d (found: %v), want right before g.waitreason (%d)", off, ok, l.Offsets.GWaitsince())
	}
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(goroot)), "src", "runtime", "runtime2.go"))
	if err != nil {
		t.Fatalf("runtime sources not available: %v", err)
	}
	reasons, err := ParseWaitReasons(src)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(reasons, l.WaitReasons) {
		t.Errorf("wait reasons of the local GOROOT differ from the committed table:\n%q\n%q", reasons, l.WaitReasons)
	}
}

func TestParseWaitReasons(t *testing.T) {
	src := `package runtime
type waitReason uint8
const (
	waitReasonZero waitReason = iota // ""
	waitReasonB
	_
	waitReasonD
)
var waitReasonStrings = [...]string{
	waitReasonZero: "",
	waitReasonD:    "d d",
	waitReasonB:    "b",
}
`
	got, err := ParseWaitReasons([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"", "b", "", "d d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	missing := strings.Replace(src, "waitReasonB:    \"b\",\n", "", 1)
	if _, err := ParseWaitReasons([]byte(missing)); err == nil {
		t.Error("no error for a constant without a string")
	}
	if _, err := ParseWaitReasons([]byte("package runtime\n")); err == nil {
		t.Error("no error for a file without wait reasons")
	}
}

// gType returns the DWARF type of runtime.g.
func gType(t *testing.T, d *dwarf.Data) *dwarf.StructType {
	t.Helper()
	types, err := structTypes(d, "runtime.g")
	if err != nil {
		t.Fatal(err)
	}
	return types["runtime.g"]
}
