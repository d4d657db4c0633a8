package symbolize

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wallprof/wallprof/internal/profile"
)

// ourFrames renders our frames like addr2line's (base file names).
func ourFrames(fr []profile.Frame, withLines bool) []frameText {
	out := make([]frameText, len(fr))
	for i, f := range fr {
		loc := "??:?"
		if withLines {
			if f.File != "" {
				loc = fmt.Sprintf("%s:%d", filepath.Base(f.File), f.Line)
			} else {
				loc = "??:0"
			}
		}
		out[i] = frameText{fn: f.Function, loc: loc}
	}
	return out
}

// compareWithAddr2line checks every address of the named functions of bin
// against addr2line: same inline chain, names, files and lines.
func compareWithAddr2line(t *testing.T, bin string, o *object, funcs []string, withLines bool) {
	t.Helper()
	syms := funcSymbols(t, bin)
	if len(syms) == 0 {
		// A stripped file: take the symbols from the unstripped build.
		t.Fatalf("%s has no symbols", bin)
	}
	var addrs []uint64
	for _, name := range funcs {
		s, ok := syms[name]
		if !ok || s.Size == 0 {
			t.Fatalf("%s: no sized symbol %s", bin, name)
		}
		for a := s.Value; a < s.Value+s.Size; a++ {
			addrs = append(addrs, a)
		}
	}
	truth := addr2line(t, bin, addrs)
	bad := 0
	for _, a := range addrs {
		want := truth[a]
		if !withLines {
			for i := range want {
				want[i].loc = "??:?"
			}
		}
		got := ourFrames(o.frames(a), withLines)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			if bad++; bad <= 10 {
				t.Errorf("%s %#x: got %v, addr2line says %v", filepath.Base(bin), a, got, want)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d addresses differ from addr2line", filepath.Base(bin), bad, len(addrs))
	}
}

func TestDWARFMatchesAddr2line(t *testing.T) {
	dir := binaries(t)
	funcs := []string{"static_outer", "read_pipe", "do_sleep", "wait_cond", "main"}
	for _, tc := range []struct {
		bin       string
		withLines bool
	}{
		{"cprog-pie", true},
		{"cprog-nopie", true},
		{"cprog-fp", true},
		{"cprog-split", true}, // DWARF from the .gnu_debuglink file
		{"cprog-nodebug", false},
	} {
		t.Run(tc.bin, func(t *testing.T) {
			bin := filepath.Join(dir, tc.bin)
			compareWithAddr2line(t, bin, openTestObject(t, bin), funcs, tc.withLines)
		})
	}
	t.Run("libshared.so", func(t *testing.T) {
		bin := filepath.Join(dir, "libshared.so")
		compareWithAddr2line(t, bin, openTestObject(t, bin), []string{"shared_fn", "shared_helper"}, true)
	})
}

// TestInlineFrames checks the inline chain explicitly: somewhere in
// static_outer, inl_leaf is inlined into inl_mid inlined into static_outer.
func TestInlineFrames(t *testing.T) {
	bin := filepath.Join(binaries(t), "cprog-pie")
	o := openTestObject(t, bin)
	s := funcSymbols(t, bin)["static_outer"]
	for a := s.Value; a < s.Value+s.Size; a++ {
		fr := o.frames(a)
		if len(fr) == 3 && fr[0].Function == "inl_leaf" && fr[1].Function == "inl_mid" && fr[2].Function == "static_outer" {
			if filepath.Base(fr[0].File) != "cprog.c" || fr[1].Line == 0 || fr[2].Line == 0 {
				t.Errorf("%#x: incomplete inline frames %+v", a, fr)
			}
			return
		}
	}
	t.Errorf("no address in static_outer has the inline chain inl_leaf < inl_mid < static_outer")
}

// TestPartialInliningFrames: GCC's partial inlining makes DWARF say that
// split_me is inlined into split_me, called from split_me's declaration
// line; addr2line shows split_me twice. That is one frame, with the line of
// the pc; recurse inlined into itself (called from its body) stays a frame
// per call. Everything else is as addr2line says.
func TestPartialInliningFrames(t *testing.T) {
	bin := filepath.Join(binaries(t), "splitprog")
	src, err := os.ReadFile(filepath.Join("testdata", "splitprog.c"))
	if err != nil {
		t.Fatal(err)
	}
	decl := 0
	for i, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(line, "long split_me(") {
			decl = i + 1
		}
	}
	artifact := frameText{fn: "split_me", loc: fmt.Sprintf("splitprog.c:%d", decl)}
	syms := funcSymbols(t, bin)
	var addrs []uint64
	for _, name := range []string{"split_me", "split_caller1", "split_caller2", "recurse_outer"} {
		s := syms[name]
		for a := s.Value; a < s.Value+s.Size; a++ {
			addrs = append(addrs, a)
		}
	}
	truth := addr2line(t, bin, addrs)
	o := openTestObject(t, bin)
	splits, recursions, bad := 0, 0, 0
	for _, a := range addrs {
		var want []frameText
		for i, f := range truth[a] {
			if i > 0 && f == artifact && truth[a][i-1].fn == "split_me" {
				splits++
				continue
			}
			want = append(want, f)
		}
		got := ourFrames(o.frames(a), true)
		for i := 1; i < len(got); i++ {
			if got[i].fn == "recurse" && got[i-1].fn == "recurse" {
				recursions++
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			if bad++; bad <= 10 {
				t.Errorf("%#x: got %v, want %v (addr2line: %v)", a, got, want, truth[a])
			}
		}
	}
	requires(t, splits > 0, "gcc did not inline split_me's split tail back into split_me: nothing to test")
	if recursions == 0 {
		t.Errorf("no address shows recurse inlined into recurse")
	}
	t.Logf("%d addresses, %d with split_me inlined into itself, %d recursive inline frames", len(addrs), splits, recursions)
}

func TestCXXDemangling(t *testing.T) {
	needTool(t, "c++filt")
	bin := filepath.Join(binaries(t), "cxxprog")
	o := openTestObject(t, bin)
	checked := 0
	for name, s := range funcSymbols(t, bin) {
		if !strings.Contains(name, "5outer5inner") {
			continue
		}
		out, err := exec.Command("c++filt", name).Output()
		if err != nil {
			t.Fatal(err)
		}
		want := strings.TrimSpace(string(out))
		if got := o.symbols().lookup(s.Value); got != want {
			t.Errorf("symbol %s: got %q, c++filt says %q", name, got, want)
		}
		// DWARF names the source function, without the clone suffix.
		source, _, _ := strings.Cut(want, " [clone")
		fr := o.frames(s.Value)
		if len(fr) == 0 || fr[len(fr)-1].Function != source {
			t.Errorf("DWARF frames at %s: got %+v, want outermost %q", name, fr, source)
		}
		checked++
	}
	if checked < 2 {
		t.Errorf("checked only %d outer:: functions", checked)
	}
}

func TestDemangleName(t *testing.T) {
	for in, want := range map[string]string{
		"_ZN2ns3fooEi":                           "ns::foo(int)",
		"plain_c":                                "plain_c",
		"_ZN4core3fmt5write17h0123456789abcdefE": "core::fmt::write", // the hash is dropped, as rustfilt does
	} {
		if got := demangleName(in); got != want {
			t.Errorf("demangleName(%q) = %q, want %q", in, got, want)
		}
	}
}
