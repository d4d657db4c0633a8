package convert

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/profile"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// samples are the real tools' outputs in testdata (see generate.sh), the
// format each must be detected as, and the options to convert it with.
var samples = []struct {
	file   string
	format Format
	opt    Options
	keep   string // keep only the process of the thread with this name
}{
	{"perf-cpu.txt", Perf, Options{}, ""},
	{"perf-sched.txt", Perf, Options{}, ""},
	{"perf-wall.txt", Perf, Options{}, "w"},
	{"eustack.txt", EuStack, Options{}, ""},
	{"eustack-verbose.txt", EuStack, Options{}, ""},
	{"gdb.txt", GDB, Options{}, ""},
	{"ptpmp.txt", PtPmp, Options{Period: time.Second}, ""},
	{"wallprof.folded", Collapsed, Options{Period: time.Nanosecond}, ""},
}

func readSample(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// summary renders a conversion as text for the goldens: what was read,
// the profile's metadata and threads, then its collapsed stacks per thread
// with state frames, in nanoseconds.
func summary(t *testing.T, r *Result) string {
	t.Helper()
	p := r.Profile
	var b strings.Builder
	fmt.Fprintf(&b, "format: %s\nlines: %d\nskipped: %d\n", r.Format, r.Lines, r.Skipped)
	if r.Skipped > 0 {
		fmt.Fprintf(&b, "%s\n", r.SkippedMessage())
	}
	fmt.Fprintf(&b, "period: %d\nduration: %d\n", p.Period, int64(p.Duration))
	var causes []string
	for c := range p.Lost {
		causes = append(causes, c)
	}
	sort.Strings(causes)
	for _, c := range causes {
		fmt.Fprintf(&b, "lost: %s=%d\n", c, p.Lost[c])
	}
	for _, n := range p.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	for _, th := range p.Threads {
		fmt.Fprintf(&b, "thread: pid=%d tid=%d name=%q samples=%d", th.PID, th.TID, th.Name, th.Samples)
		for s := profile.State(0); s < profile.NumStates; s++ {
			fmt.Fprintf(&b, " %s=%d", s, int64(th.Time[s]))
		}
		b.WriteString("\n")
	}
	totals := p.TotalByState()
	for s := profile.State(0); s < profile.NumStates; s++ {
		fmt.Fprintf(&b, "total: %s=%d\n", s, totals[s])
	}
	b.WriteString("--- collapsed (per thread, states, ns)\n")
	if err := present.WriteCollapsed(&b, p, present.CollapsedOptions{PerThread: true, States: true, KernelSuffix: true}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("missing golden %s (run go test -update): %v", path, err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the conversion (run go test -update if the change is right):\n--- got\n%s", path, got)
	}
}

// pidOf finds the process of the first perf event of the thread named comm.
func pidOf(t *testing.T, data []byte, comm string) int {
	lr := &lineReader{data: data}
	for {
		line, ok := lr.next()
		if !ok {
			t.Fatalf("no perf event of %q", comm)
		}
		if e, ok := parsePerfHeader(line); ok && e.comm == comm && e.hasPID && e.pid > 0 {
			return e.pid
		}
	}
}

// TestGolden converts each real sample and compares it with its golden.
func TestGolden(t *testing.T) {
	for _, s := range samples {
		t.Run(s.file, func(t *testing.T) {
			data := readSample(t, s.file)
			opt := s.opt
			if s.keep != "" {
				opt.PIDs = []int{pidOf(t, data, s.keep)}
			}
			r, err := Import(data, s.format, opt)
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Profile.Validate(); err != nil {
				t.Errorf("invalid profile: %v", err)
			}
			checkGolden(t, s.file+".golden", summary(t, r))
		})
	}
}

// TestDetect checks that each sample is recognised from its content.
func TestDetect(t *testing.T) {
	for _, s := range samples {
		got, ok := Detect(readSample(t, s.file))
		if !ok || got != s.format {
			t.Errorf("Detect(%s) = %q, %v; want %q", s.file, got, ok, s.format)
		}
	}
}
