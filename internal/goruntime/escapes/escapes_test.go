package escapes

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	goldenfile "github.com/wallprof/wallprof/internal/golden"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	goldenfile.Check(t, name, got)
}

// The parse of captured 'go build -gcflags=-m=2' output of testdata/app
// (by Go 1.26.8), with the reason of every allocating diagnostic.
func TestParseDiagnosticsGolden(t *testing.T) {
	in, err := os.ReadFile(filepath.Join("testdata", "app-go1.26.8.m2.txt"))
	if err != nil {
		t.Fatal(err)
	}
	ds, err := ParseDiagnostics(bytes.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Diagnostic
		Reason string `json:"reason,omitempty"`
	}
	rows := make([]row, len(ds))
	for i, d := range ds {
		rows[i].Diagnostic = d
		if d.Allocates() {
			rows[i].Reason = d.Reason()
		}
	}
	got, err := json.MarshalIndent(rows, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "app-go1.26.8.m2.json", append(got, '\n'))
}

// Explanations as older compilers printed them, and reasons without one.
func TestReason(t *testing.T) {
	for _, c := range []struct {
		d    Diagnostic
		want string
	}{
		{Diagnostic{Message: "moved to heap: x"}, "moved to heap: x"},
		{Diagnostic{Message: "s escapes to heap", Flow: []string{
			"flow: {heap} = &{storage for s}:",
			"from s (spill) at ./a.go:3:14",
			"from s (interface-converted) at ./a.go:3:14",
			"from fmt.Fprintf(os.Stdout, \"%s\", s) (passed to call[argument content escapes]) at ./a.go:3:13",
		}}, "s escapes to heap: passed to interface parameter in call to fmt.Fprintf"},
		{Diagnostic{Message: "moved to heap: x", Func: "f", Flow: []string{"flow: ~r0 ← &x:", "from &x (address-of) at a.go:2:9", "from return &x (return) at a.go:2:2"}},
			"moved to heap: x (its address is returned from f)"},
		{Diagnostic{Message: "make([]int, n) escapes to heap", Flow: []string{"from make([]int, n) (non-constant size) at a.go:4:11"}},
			"make([]int, n) escapes to heap: non-constant size"},
		{Diagnostic{Message: "&T{} escapes to heap", Flow: []string{"flow: {heap} ← &{storage for &T{}}:", "from global = &T{} (assign) at a.go:5:9"}},
			"&T{} escapes to heap: assigned to global"},
		{Diagnostic{Message: "leaking param: p"}, "leaking param: p"},
	} {
		if got := c.d.Reason(); got != c.want {
			t.Errorf("%q: reason %q, want %q", c.d.Message, got, c.want)
		}
	}
}

// needGo skips when the go command is missing, except in CI.
func needGo(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI needs the go command: %v", err)
		}
		t.Skipf("the go command is not on PATH: %v", err)
	}
}

// The real compiler, run on testdata/app, explains its known escapes.
func TestAnalyzeApp(t *testing.T) {
	needGo(t)
	ds, err := Analyze(context.Background(), appDir(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[int][]string{}
	for _, d := range ds {
		if d.File == "main.go" && d.Allocates() {
			reasons[d.Line] = append(reasons[d.Line], d.Reason())
		}
	}
	for line, want := range map[int]string{
		18: "moved to heap: p (its address is returned from newPoint)",
		24: "n escapes to heap: passed to interface parameter in call to fmt.Sprintf",
		29: "moved to heap: c (captured by a closure)",
		38: "make([]byte, n) escapes to heap: returned from buffer",
	} {
		if !contains(reasons[line], want) {
			t.Errorf("main.go:%d: reasons %q lack %q", line, reasons[line], want)
		}
	}
	if _, err := Analyze(context.Background(), appDir(t), []string{"./nope"}); err == nil || !strings.Contains(err.Error(), "go build ./nope failed: ") || strings.Contains(err.Error(), "\n") {
		t.Errorf("bad package: error %v", err)
	}
}

// A real allocation profile of testdata/app ranks the strings.ToLower line
// of search first, with its reason, and the escapes on their lines.
func TestJoinRealProfile(t *testing.T) {
	needGo(t)
	path := appProfile(t)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := Analyze(context.Background(), appDir(t), []string{"."})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []Sample{"alloc_space", "alloc_objects"} {
		stacks, err := Stacks(p, s)
		if err != nil {
			t.Fatal(err)
		}
		rep := Join(stacks, ds, Options{Dir: appDir(t), Sample: s, Top: 10})
		top := rep.Sites[0]
		if top.File != "main.go" || top.Line != 45 || top.Func != "main.search" || !top.InLoop || top.Percent < 90 {
			t.Fatalf("%s: top site %+v", s, top)
		}
		want := "strings.ToLower allocates its result (inside a loop); called from main.go:45 (search)"
		if !contains(top.Reasons, want) {
			t.Errorf("%s: top reasons %q lack %q", s, top.Reasons, want)
		}
		bySite := map[int]Site{}
		for _, st := range rep.Sites {
			if st.File == "main.go" {
				bySite[st.Line] = st
			}
		}
		for line, want := range map[int]string{
			18: "moved to heap: p (its address is returned from newPoint)",
			38: "make([]byte, n) escapes to heap: returned from buffer",
			24: "fmt.Sprintf allocates its result; called from main.go:24 (label)",
		} {
			if !contains(bySite[line].Reasons, want) {
				t.Errorf("%s: main.go:%d reasons %q lack %q", s, line, bySite[line].Reasons, want)
			}
		}
		var text bytes.Buffer
		if err := WriteText(&text, rep); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(text.String(), "   1 ") || !strings.Contains(text.String(), "main.go:45 main.search\n") {
			t.Errorf("text report:\n%s", text.String())
		}

		// Without the sources, the same sites in the same order: the
		// binary's build information says which packages are the program's.
		bi, err := buildinfo.ReadFile(filepath.Join(filepath.Dir(path), "app"))
		if err != nil {
			t.Fatal(err)
		}
		bare := Join(stacks, nil, Options{Sample: s, Top: 10, Build: bi})
		if got, want := siteKeys(bare.Sites), siteKeys(rep.Sites); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: sites without the sources\n%s\nwant, as with them,\n%s", s, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if want := "strings.ToLower allocates its result; called from main.go:45 (search)"; !contains(bare.Sites[0].Reasons, want) {
			t.Errorf("%s: top reasons without the sources %q lack %q", s, bare.Sites[0].Reasons, want)
		}
	}
}

// siteKeys lists the sites' places, functions and weights, in rank order.
func siteKeys(sites []Site) []string {
	var out []string
	for _, s := range sites {
		out = append(out, fmt.Sprintf("%d %s:%d %s %dB %d objects", s.Rank, s.File, s.Line, s.Func, s.Bytes, s.Objects))
	}
	return out
}

// The ranking does not depend on whether the sources were given: without
// diagnostics, the program's own packages (its build information) choose
// each stack's line, as the diagnostics of its module do. Here, as in
// examples/searchserver, two lines call strings.ToLower, the second with
// most of the bytes, and the first line's stack comes first; a dependency
// and a package of the module below its root are told apart too.
func TestJoinSameSitesWithoutSources(t *testing.T) {
	toLower := func(fn, file string, line int, bytes int64) Stack {
		return Stack{Alloc: "internal/bytealg.MakeNoZero", Bytes: bytes, Objects: bytes / 16, Frames: []Frame{
			{Func: "strings.(*Builder).grow", File: "/usr/local/go/src/strings/builder.go", Line: 67},
			{Func: "strings.(*Builder).Grow", File: "/usr/local/go/src/strings/builder.go", Line: 81},
			{Func: "strings.ToLower", File: "/usr/local/go/src/strings/strings.go", Line: 700},
			{Func: fn, File: file, Line: line},
			{Func: "main.(*Index).Search", File: "/build/app/cmd/srv/index.go", Line: 90},
		}}
	}
	stacks := []Stack{
		toLower("main.(*Index).count-range1", "/build/app/cmd/srv/index.go", 58, 9000),
		toLower("main.(*Index).count-range2", "/build/app/cmd/srv/index.go", 62, 88000),
		{Bytes: 2000, Objects: 2, Frames: []Frame{
			{Func: "github.com/dep/cache.(*LRU).Add", File: "/root/go/pkg/mod/github.com/dep/cache@v1.0.0/lru.go", Line: 12},
			{Func: "example.com/app/internal/rank.Score", File: "/build/app/internal/rank/rank.go", Line: 30},
		}},
		{Bytes: 1000, Objects: 1, Alloc: "runtime.newobject", Frames: []Frame{
			{Func: "example.com/app/internal/rank.newHeap", File: "/build/app/internal/rank/heap.go", Line: 7},
		}},
		{Bytes: 500, Objects: 5, Frames: []Frame{{Func: "net/http.readRequest", File: "/usr/local/go/src/net/http/request.go", Line: 1083}}},
	}
	diags := []Diagnostic{
		{File: "cmd/srv/index.go", Line: 58, Col: 3, Message: "inlining call to strings.ToLower"},
		{File: "cmd/srv/index.go", Line: 62, Col: 3, Message: "inlining call to strings.ToLower"},
		{File: "internal/rank/rank.go", Line: 30, Col: 2, Message: "can inline Score"},
		{File: "internal/rank/heap.go", Line: 7, Col: 9, Message: "&heap{} escapes to heap"},
	}
	bi := &debug.BuildInfo{Path: "example.com/app/cmd/srv", Main: debug.Module{Path: "example.com/app"}}
	with := Join(stacks, diags, Options{Dir: "/build/app", Sample: "alloc_space", Build: bi})
	without := Join(stacks, nil, Options{Sample: "alloc_space", Build: bi})
	if got, want := siteKeys(without.Sites), siteKeys(with.Sites); !reflect.DeepEqual(got, want) {
		t.Errorf("sites without the sources\n%s\nwant, as with them,\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if top := without.Sites[0]; top.File != "cmd/srv/index.go" || top.Line != 62 || !top.User {
		t.Errorf("top site without the sources: %+v", top)
	}
	if r := without.Sites[3].Reasons; len(r) != 1 || r[0] != "allocates here (runtime.newobject; no escape analysis was run)" {
		t.Errorf("reasons of a direct allocation without the sources: %q", r)
	}

	// Without build information: every package outside the standard
	// library is the program's (the dependency's line is its own site),
	// with the paths of the profile.
	unknown := Join(stacks, nil, Options{Sample: "alloc_space"})
	var got []string
	for _, s := range unknown.Sites {
		got = append(got, fmt.Sprintf("%s:%d", s.File, s.Line))
	}
	want := []string{"/build/app/cmd/srv/index.go:62", "/build/app/cmd/srv/index.go:58",
		"/root/go/pkg/mod/github.com/dep/cache@v1.0.0/lru.go:12", "/build/app/internal/rank/heap.go:7", "/usr/local/go/src/net/http/request.go:1083"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("sites without build information %q, want %q", got, want)
	}
}

// A profile without allocation samples, or without the asked-for pair.
func TestStacksErrors(t *testing.T) {
	cpu := &profile.Profile{SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}}}
	if _, err := Stacks(cpu, "alloc_space"); !errors.Is(err, ErrNoAllocSamples) {
		t.Errorf("cpu profile: %v", err)
	}
	inuse := &profile.Profile{SampleType: []*profile.ValueType{{Type: "inuse_objects", Unit: "count"}, {Type: "inuse_space", Unit: "bytes"}}}
	if _, err := Stacks(inuse, "alloc_space"); err == nil || !strings.Contains(err.Error(), "try --sample inuse_objects") {
		t.Errorf("inuse profile: %v", err)
	}
	if _, err := Stacks(inuse, "space"); err == nil || !strings.Contains(err.Error(), `unknown sample "space"`) {
		t.Errorf("bad sample: %v", err)
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1023: "1023B", 1536: "1.5KiB", 9 << 20: "9.0MiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func FuzzParseDiagnostics(f *testing.F) {
	if in, err := os.ReadFile(filepath.Join("testdata", "app-go1.26.8.m2.txt")); err == nil {
		f.Add(string(in))
	}
	f.Add("./a.go:1:2: x escapes to heap in f:\n./a.go:1:2:   flow: {heap} ← &x:\n./a.go:1:2:     from x (captured by a closure) at ./a.go:3:4\n./a.go:1:2: moved to heap: x\n")
	f.Add("a.go:1:1: parameter a.b leaks to {heap} for f with derefs=0:\na.go:1:1: leaking param: b\n")
	f.Add("x:0:0:  escapes to heap: \n:1:1: : \n")
	f.Fuzz(func(t *testing.T, in string) {
		ds, err := ParseDiagnostics(strings.NewReader(in))
		if err != nil {
			return
		}
		again, _ := ParseDiagnostics(strings.NewReader(in))
		if len(again) != len(ds) {
			t.Fatalf("parse is not deterministic: %d then %d", len(ds), len(again))
		}
		for _, d := range ds {
			if d.Line < 0 || d.Col < 0 {
				t.Errorf("negative position in %+v", d)
			}
			r := d.Reason()
			if !strings.HasPrefix(r, d.Message) {
				t.Errorf("reason %q does not start with the message %q", r, d.Message)
			}
			_ = d.Subject()
		}
	})
}

func contains(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

func appDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.Abs(filepath.Join("testdata", "app"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// appProfile builds and runs testdata/app, which writes its allocation
// profile (MemProfileRate 1, so every allocation is in it). It returns the
// profile's path; the binary is "app" next to it.
func appProfile(t *testing.T) string {
	t.Helper()
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "app")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = appDir(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build testdata/app: %v\n%s", err, out)
	}
	path := filepath.Join(tmp, "allocs.pb.gz")
	if out, err := exec.Command(bin, path).CombinedOutput(); err != nil {
		t.Fatalf("run testdata/app: %v\n%s", err, out)
	}
	return path
}

// Synthetic stacks: a binary built elsewhere (paths matched by suffix), a
// library allocation with no caller in the packages, and ranking by objects.
func TestJoinSynthetic(t *testing.T) {
	ds := []Diagnostic{
		{File: "srv/h.go", Line: 10, Col: 2, Message: "moved to heap: buf"},
		{File: "srv/h.go", Line: 20, Col: 6, Message: "can inline f"},
	}
	stacks := []Stack{
		{Frames: []Frame{{Func: "example.com/x/srv.handle", File: "/build/x/srv/h.go", Line: 10}}, Bytes: 100, Objects: 1},
		{Frames: []Frame{
			{Func: "bytes.growSlice", File: "/go/src/bytes/buffer.go", Line: 249},
			{Func: "bytes.(*Buffer).grow", File: "/go/src/bytes/buffer.go", Line: 151},
			{Func: "encoding/json.Marshal", File: "/go/src/encoding/json/encode.go", Line: 160},
			{Func: "example.com/x/lib.Do", File: "/mod/lib/do.go", Line: 7},
		}, Bytes: 50, Objects: 5},
	}
	rep := Join(stacks, ds, Options{Dir: "/elsewhere", Sample: "alloc_objects"})
	if len(rep.Sites) != 2 || rep.TotalBytes != 150 || rep.TotalObjects != 6 {
		t.Fatalf("report %+v", rep)
	}
	lib, user := rep.Sites[0], rep.Sites[1]
	if lib.User || lib.Rank != 1 || lib.Reasons[0] != "bytes.growSlice allocates outside the analysed packages (library code, or packages not named); called from json.Marshal (/go/src/encoding/json/encode.go:160)" {
		t.Errorf("library site %+v", lib)
	}
	if !user.User || user.File != "srv/h.go" || user.Line != 10 || user.Reasons[0] != "moved to heap: buf" {
		t.Errorf("user site %+v", user)
	}
}

// A line the compiler said nothing about is explained by the runtime
// function that allocated: an append's growth has no escape diagnostic.
func TestJoinRuntimeReason(t *testing.T) {
	mk := func(line int64, fns ...string) []*profile.Location {
		var locs []*profile.Location
		for i, fn := range fns {
			locs = append(locs, &profile.Location{ID: uint64(i + 1), Line: []profile.Line{
				{Function: &profile.Function{Name: fn, Filename: "/build/x/srv/h.go"}, Line: line}}})
		}
		return locs
	}
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "alloc_objects", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"}}}
	p.Sample = []*profile.Sample{
		{Location: mk(30, "runtime.mallocgc", "runtime.growslice", "example.com/x/srv.tokens"), Value: []int64{3, 300}},
		{Location: mk(40, "runtime.mallocgc", "runtime.slicebytetostring", "example.com/x/srv.name"), Value: []int64{1, 100}},
		{Location: mk(50, "example.com/x/srv.mystery"), Value: []int64{1, 10}},
	}
	stacks, err := Stacks(p, "alloc_space")
	if err != nil {
		t.Fatal(err)
	}
	if stacks[0].Alloc != "runtime.growslice" || len(stacks[0].Frames) != 1 {
		t.Fatalf("stack %+v", stacks[0])
	}
	rep := Join(stacks, []Diagnostic{{File: "srv/h.go", Line: 99, Message: "moved to heap: z"}}, Options{Dir: "/elsewhere", Sample: "alloc_space"})
	want := []string{
		"append grows the slice (runtime.growslice); the compiler reports no escape for that",
		"converting a []byte to a string copies it (runtime.slicebytetostring)",
		"allocates here, but the compiler reported no escape on this line (is the profile from this source?)",
	}
	for i, s := range rep.Sites {
		if len(s.Reasons) != 1 || s.Reasons[0] != want[i] {
			t.Errorf("site %d %s:%d: reasons %q, want %q", i, s.File, s.Line, s.Reasons, want[i])
		}
	}
}

func TestIsStdFunc(t *testing.T) {
	for fn, want := range map[string]bool{
		"net/http.(*conn).readRequest": true, "strings.ToLower": true, "internal/poll.(*FD).Read": true,
		"main.handler": false, "example.com/x/srv.handle": false, "github.com/a/b.F": false,
		"command-line-arguments.f": false, "": false,
	} {
		if got := IsStdFunc(fn); got != want {
			t.Errorf("IsStdFunc(%q) = %v, want %v", fn, got, want)
		}
	}
}

// net/http's server.go is not the analysed package's server.go.
func TestJoinSameFileNameInStd(t *testing.T) {
	ds := []Diagnostic{{File: "server.go", Line: 1043, Col: 2, Message: "moved to heap: x"}}
	stacks := []Stack{{Frames: []Frame{{Func: "net/http.(*conn).readRequest", File: "/usr/local/go/src/net/http/server.go", Line: 1043}}, Bytes: 10, Objects: 1}}
	rep := Join(stacks, ds, Options{Dir: "/elsewhere", Sample: "alloc_space"})
	if len(rep.Sites) != 1 || rep.Sites[0].User {
		t.Errorf("net/http's server.go matched the user's: %+v", rep.Sites)
	}
}
