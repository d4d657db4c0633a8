package convert

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/wallprof/wallprof/internal/golden"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/profile"
)

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
	golden.Check(t, name, []byte(got))
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

// TestFrom checks that --from forces a format: each sample read as another
// format gives nothing or skips lines, and read as its own format skips none.
func TestFrom(t *testing.T) {
	for _, s := range samples {
		data := readSample(t, s.file)
		r, err := Import(data, s.format, s.opt)
		if err != nil || r.Skipped != 0 {
			t.Errorf("%s as %s: err %v, skipped %d", s.file, s.format, err, r.Skipped)
		}
		for _, other := range []Format{Perf, PtPmp, EuStack, GDB, Collapsed, Pprof} {
			if other == s.format {
				continue
			}
			r, err := Import(data, other, s.opt)
			if err == nil && r.Skipped == 0 {
				t.Errorf("%s read as %s without complaint", s.file, other)
			}
		}
	}
}

func TestSkippedMessage(t *testing.T) {
	data := readSample(t, "perf-cpu.txt")
	lines := bytes.SplitAfter(data, []byte("\n"))
	bad := append([][]byte{}, lines[:3]...)
	bad = append(bad, []byte("garbage here\n"), []byte("\tnot a frame\n"))
	bad = append(bad, lines[3:]...)
	r, err := Import(bytes.Join(bad, nil), "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`skipped 2 of %d lines that are not perf script output; the first, line 4: "garbage here"`, len(bad)-1)
	if got := r.SkippedMessage(); got != want || r.Format != Perf {
		t.Errorf("got %q (format %s), want %q", got, r.Format, want)
	}
}

func TestNothingRead(t *testing.T) {
	for _, f := range []Format{Perf, PtPmp, EuStack, GDB, Collapsed} {
		_, err := Import([]byte("hello\nworld\n"), f, Options{})
		var nd *NoDataError
		// gdb takes what comes before a dump's first thread for its chatter.
		if !errors.As(err, &nd) || f != GDB && !strings.Contains(err.Error(), `line 1: "hello"`) {
			t.Errorf("%s: err = %v", f, err)
		}
	}
	if _, err := Import([]byte("hello"), Pprof, Options{}); err == nil {
		t.Error("pprof: no error")
	}
	if _, err := Import([]byte("   \n"), "", Options{}); err == nil || err.Error() != "the input is empty" {
		t.Errorf("empty: %v", err)
	}
}

// TestCollapsedConventions checks the thread root frame, state leaf frame
// and kernel suffix of collapsed stacks, and pprof through the converter.
func TestCollapsedConventions(t *testing.T) {
	in := "my app-10/11;main;read_[k];[sleeping] 3\nmain;work 2\n"
	r, err := Import([]byte(in), "", Options{Period: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Format != Collapsed || len(r.Profile.Samples) != 2 || len(r.Profile.Threads) != 1 {
		t.Fatalf("format %s, %d samples, %d threads", r.Format, len(r.Profile.Samples), len(r.Profile.Threads))
	}
	s := r.Profile.Samples[0]
	if s.PID != 10 || s.TID != 11 || s.Thread != "my app" || s.State != profile.Sleeping || s.Value != 3e6 ||
		s.Stack[0].Frames[0].Function != "read" || !s.Stack[0].Mapping.Kernel {
		t.Errorf("sample = %+v, leaf %+v", s, s.Stack[0])
	}
	var buf bytes.Buffer
	if err := present.WritePprof(&buf, r.Profile); err != nil {
		t.Fatal(err)
	}
	back, err := Import(buf.Bytes(), "", Options{})
	if err != nil || back.Format != Pprof || back.Profile.TotalByState() != r.Profile.TotalByState() {
		t.Errorf("pprof round trip: %v, format %v", err, back)
	}
}

// perf script -F +pid right-aligns the command name, so that event lines
// A switch-in missing from the input, as perf records on a kernel that
// does not trace the switch out of one CPU's idle task (Linux 6.18 on a
// Firecracker VM, CPU 1; lines from perf record -a -g -e cpu-clock -e
// sched:sched_switch of a shell that sleeps and computes, trimmed): the
// off-CPU interval ends a sample period before the thread's next sample,
// or, with no sample before its next switch-out, a period before that.
func TestPerfMissingSwitchIn(t *testing.T) {
	in := `sh 30563/30563 [001]  9694.760069: sched:sched_switch: prev_comm=sh prev_pid=30563 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
	ffffffff81399a71 __schedule ([kernel.kallsyms])
	ffffffff8226a1b5 do_nanosleep ([kernel.kallsyms])

swapper 0/0 [000]  9694.800000:     250000 cpu-clock: 
	ffffffff81399a71 default_idle ([kernel.kallsyms])

sh 30563/30563 [001]  9694.890400:     250000 cpu-clock: 
	            11aa spin_inner+0x21 (/bin/sh)

sh 30563/30563 [001]  9694.906651: sched:sched_switch: prev_comm=sh prev_pid=30563 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
	ffffffff81399a71 __schedule ([kernel.kallsyms])
	ffffffff8226a1b5 do_nanosleep ([kernel.kallsyms])

sh 30563/30563 [001]  9695.010156: sched:sched_switch: prev_comm=sh prev_pid=30563 prev_prio=120 prev_state=R ==> next_comm=rcu_preempt next_pid=15 next_prio=120
	ffffffff81399a71 __schedule ([kernel.kallsyms])

`
	r, err := Import([]byte(in), "", Options{PIDs: []int{30563}})
	if err != nil {
		t.Fatal(err)
	}
	var sleeping int64
	for _, s := range r.Profile.Samples {
		if s.TID == 30563 && s.State == profile.Sleeping {
			sleeping += s.Value
		}
	}
	// 9694.760069 to 9694.890150 (the sample less its 250 µs), then
	// 9694.906651 to 9695.009906 (the switch-out less a period).
	if want := int64(130081000 + 103255000); sleeping < want-1000 || sleeping > want+1000 {
		t.Errorf("sh slept %dns, want %d", sleeping, want)
	}
	if r.Profile.Lost["switch-in-not-seen"] != 2 || !slices.ContainsFunc(r.Profile.Notes, func(n string) bool {
		return strings.Contains(n, "2 switch-outs had no switch-in") && strings.Contains(n, "a sample period before")
	}) {
		t.Errorf("lost %v, notes %q", r.Profile.Lost, r.Profile.Notes)
	}

	// With no cpu-clock samples, a run between two switch-outs is not
	// bounded: that interval is left out, and the note says so. A
	// switch-in in the input still ends its interval.
	var noSamples strings.Builder
	for _, ev := range strings.SplitAfter(in, "\n\n") {
		if !strings.Contains(ev, "cpu-clock") {
			noSamples.WriteString(ev)
		}
	}
	noSamples.WriteString("swapper 0/0 [000]  9695.020000: sched:sched_switch: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=sh next_pid=30563 next_prio=120\n\tffffffff81399a71 __schedule ([kernel.kallsyms])\n\n")
	r, err = Import([]byte(noSamples.String()), Perf, Options{PIDs: []int{30563}})
	if err != nil {
		t.Fatal(err)
	}
	var runnable int64
	for _, s := range r.Profile.Samples {
		if s.TID == 30563 && s.State == profile.Sleeping {
			t.Errorf("a sleeping sample of %dns with nothing to bound it", s.Value)
		}
		if s.TID == 30563 && s.State == profile.Runnable {
			runnable += s.Value
		}
	}
	if runnable != 9844000 {
		t.Errorf("sh runnable %dns, want 9844000 (its preemption to its switch-in)", runnable)
	}
	if !slices.ContainsFunc(r.Profile.Notes, func(n string) bool { return strings.Contains(n, "their off-CPU time is left out") }) {
		t.Errorf("notes %q", r.Profile.Notes)
	}
}

// are indented like frames; they are events all the same. Without ip in
// its -F fields perf prints no call chain, and the conversion says which
// fields to ask for. (Lines from 'perf record -e sched:sched_switch -g'
// of a shell that computes and sleeps, on Linux 6.18.)
func TestPerfIndentedEvents(t *testing.T) {
	noChains := `              sh 23740/23740 [001]  9301.814679: sched:sched_switch: prev_comm=sh prev_pid=23740 prev_prio=120 prev_state=R ==> next_comm=kworker/1:0 next_pid=4552 next_prio=120
              sh 23740/23740 [001]  9301.888348: sched:sched_switch: prev_comm=sh prev_pid=23740 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
           sleep 23742/23742 [000]  9301.889378: sched:sched_switch: prev_comm=sleep prev_pid=23742 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
         swapper     0/0     [001]  9302.344700: sched:sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=sh next_pid=23740 next_prio=120
`
	if f, ok := Detect([]byte(noChains)); !ok || f != Perf {
		t.Fatalf("Detect = %q, %v; want perf", f, ok)
	}
	r, err := Import([]byte(noChains), "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Skipped != 0 || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "no event had a call chain") ||
		!strings.Contains(r.Warnings[0], "-F +pid,+ip,+sym,+dso") {
		t.Errorf("skipped %d (%q), warnings %q", r.Skipped, r.FirstSkipped, r.Warnings)
	}
	// sh slept from 9301.888348 to its switch-in at 9302.344700.
	var sleeping int64
	for _, s := range r.Profile.Samples {
		if s.TID == 23740 && s.PID == 23740 && s.State == profile.Sleeping {
			sleeping += s.Value
		}
	}
	if want := int64(456352000); sleeping < want-1000 || sleeping > want+1000 {
		t.Errorf("sh slept %dns, want %d", sleeping, want)
	}

	withChains := `              sh 23740/23740 [001]  9301.888348: sched:sched_switch: prev_comm=sh prev_pid=23740 prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
	ffffffff82265488 __schedule ([kernel.kallsyms])
	ffffffff82265df3 schedule ([kernel.kallsyms])
	ffffffff8226a1b5 do_nanosleep ([kernel.kallsyms])
	          0e64d3 clock_nanosleep@GLIBC_2.2.5 (/usr/lib/x86_64-linux-gnu/libc.so.6)

         swapper     0/0     [001]  9302.344700: sched:sched_switch: prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=sh next_pid=23740 next_prio=120
	ffffffff82265488 __schedule ([kernel.kallsyms])

`
	r, err = Import([]byte(withChains), "", Options{PIDs: []int{23740}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Skipped != 0 || len(r.Warnings) != 0 || len(r.Profile.Samples) != 1 || len(r.Profile.Samples[0].Stack) != 4 {
		t.Errorf("skipped %d (%q), warnings %q, samples %d", r.Skipped, r.FirstSkipped, r.Warnings, len(r.Profile.Samples))
	}

	// Without PIDs, --pid cannot tell the processes: say which fields.
	noPID := strings.ReplaceAll(strings.ReplaceAll(withChains, "23740/23740", "23740"), "0/0    ", "0")
	r, _ = Import([]byte(noPID), "", Options{PIDs: []int{23740}})
	if r == nil || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "--pid could not tell") {
		t.Errorf("without PIDs: warnings %v", r.Warnings)
	}
}
