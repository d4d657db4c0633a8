package present

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	runtimepprof "runtime/pprof"
	"strings"
	"testing"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/wallprof/wallprof/internal/profile"
)

func writePprof(t testing.TB, p *profile.Profile) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := WritePprof(&b, p); err != nil {
		t.Fatalf("WritePprof: %v", err)
	}
	return b.Bytes()
}

func TestPprofRoundTrip(t *testing.T) {
	want := testProfile()
	data := writePprof(t, want)
	got, err := ReadProfile(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("ReadProfile: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("round trip changed the profile")
		diffProfiles(t, got, want)
	}
	// Writing what was read gives the same bytes.
	if again := writePprof(t, got); !bytes.Equal(again, data) {
		t.Errorf("write(read(write(p))) differs from write(p)")
	}
}

// diffProfiles reports which part of two profiles differ.
func diffProfiles(t *testing.T, got, want *profile.Profile) {
	t.Helper()
	g, w := reflect.ValueOf(*got), reflect.ValueOf(*want)
	for i := 0; i < g.NumField(); i++ {
		if !reflect.DeepEqual(g.Field(i).Interface(), w.Field(i).Interface()) {
			t.Errorf("field %s differs:\n got %#v\nwant %#v", g.Type().Field(i).Name, g.Field(i).Interface(), w.Field(i).Interface())
		}
	}
}

func TestPprofDeterministic(t *testing.T) {
	a, b := writePprof(t, testProfile()), writePprof(t, testProfile())
	if !bytes.Equal(a, b) {
		t.Fatal("two writes of the same profile differ")
	}
}

func TestPprofContents(t *testing.T) {
	p := testProfile()
	pp, err := pprof.Parse(bytes.NewReader(writePprof(t, p)))
	if err != nil {
		t.Fatalf("pprof.Parse: %v", err)
	}
	if err := pp.CheckValid(); err != nil {
		t.Fatalf("CheckValid: %v", err)
	}
	var types []string
	for _, st := range pp.SampleType {
		types = append(types, st.Type+"/"+st.Unit)
	}
	if want := []string{"wall/nanoseconds", "cpu/nanoseconds", "offcpu/nanoseconds"}; !reflect.DeepEqual(types, want) {
		t.Errorf("sample types = %v, want %v", types, want)
	}
	if pp.DefaultSampleType != "wall" {
		t.Errorf("default sample type = %q, want wall", pp.DefaultSampleType)
	}
	if pp.PeriodType == nil || pp.PeriodType.Type != "wall" || pp.PeriodType.Unit != "nanoseconds" || pp.Period != p.Period {
		t.Errorf("period = %v %d, want wall/nanoseconds %d", pp.PeriodType, pp.Period, p.Period)
	}
	if pp.DurationNanos != int64(p.Duration) || pp.TimeNanos != p.Start.UnixNano() {
		t.Errorf("duration, time = %d, %d; want %d, %d", pp.DurationNanos, pp.TimeNanos, int64(p.Duration), p.Start.UnixNano())
	}
	if len(pp.Sample) != len(p.Samples) {
		t.Fatalf("%d samples, want %d", len(pp.Sample), len(p.Samples))
	}
	for i, ps := range pp.Sample {
		s := p.Samples[i]
		var cpu, off int64
		if s.State == profile.OnCPU {
			cpu = s.Value
		} else {
			off = s.Value
		}
		if want := []int64{s.Value, cpu, off}; !reflect.DeepEqual(ps.Value, want) {
			t.Errorf("sample %d values = %v, want %v", i, ps.Value, want)
		}
		wantNum := map[string][]int64{"pid": {int64(s.PID)}, "tid": {int64(s.TID)}}
		if !reflect.DeepEqual(ps.NumLabel, wantNum) {
			t.Errorf("sample %d num labels = %v, want %v", i, ps.NumLabel, wantNum)
		}
		wantStr := map[string][]string{"thread": {s.Thread}, "state": {s.State.String()}}
		for k, v := range s.Labels {
			wantStr[k] = []string{v}
		}
		if !reflect.DeepEqual(ps.Label, wantStr) {
			t.Errorf("sample %d labels = %v, want %v", i, ps.Label, wantStr)
		}
	}
	for _, m := range pp.Mapping {
		if !m.HasFunctions || !m.HasFilenames || !m.HasLineNumbers || !m.HasInlineFrames {
			t.Errorf("mapping %d (%s) does not claim symbols: pprof would re-symbolize it", m.ID, m.File)
		}
	}
	if m := pp.Mapping[2]; m.File != "[kernel.kallsyms]" || m.BuildID != "6b65726e656c" {
		t.Errorf("kernel mapping = %q %q", m.File, m.BuildID)
	}
	// Inlined frames: several lines, innermost first.
	if l := pp.Location[1]; len(l.Line) != 2 || l.Line[0].Function.Name != "main.handle" || l.Line[1].Function.Name != "main.serve" || l.Line[0].Line != 42 {
		t.Errorf("inlined location lines = %+v", l.Line)
	}
	// Functions are deduplicated by (name, file).
	seen := map[[2]string]bool{}
	for _, f := range pp.Function {
		k := [2]string{f.Name, f.Filename}
		if seen[k] {
			t.Errorf("function %v appears twice", k)
		}
		seen[k] = true
	}
	comments := strings.Join(pp.Comments, "\n")
	if !strings.Contains(comments, "lost events: odd cause=x=2, ringbuf-full=3, stack-read-failed=1") {
		t.Errorf("comments lack the lost events; they are:\n%s", comments)
	}
	if strings.Contains(comments, "wallprof:v1") {
		t.Errorf("the records are in the comments, which pprof prints on top of every report:\n%s", comments)
	}
	// The records are in functions no location refers to.
	var records []string
	for _, f := range pp.Function {
		if f.SystemName == recordFunction {
			records = append(records, f.Name)
		}
	}
	for _, l := range pp.Location {
		for _, ln := range l.Line {
			if ln.Function.SystemName == recordFunction {
				t.Errorf("location %d refers to a record", l.ID)
			}
		}
	}
	all := strings.Join(records, "\n")
	for _, want := range []string{
		`wallprof:v1 thread pid=100 tid=101 name="worker pool 1" start=0 end=1000000000 exited=false on-cpu=41000000 runnable=49000000 sleeping=780000000 disk=122000000 other=8000000 samples=3`,
		"wallprof:v1 lost cause=ringbuf-full n=3",
		`wallprof:v1 lost cause="odd cause=x" n=2`,
		"wallprof:v1 cost profiler_cpu=12000000 bpf_run=3000000 bpf_runs=12345 target_cpu=1200000000",
		`wallprof:v1 note "a note\nover two lines"`,
		`wallprof:v1 command "./server -addr \":8080\""`,
		"wallprof:v1 kernel mapping=4",
		"wallprof:v1 profile states=on-cpu,runnable,sleeping,disk,other",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("records lack %q; they are:\n%s", want, all)
		}
	}
	for _, c := range pp.Comments {
		if strings.Contains(c, "\n") {
			t.Errorf("comment %q spans lines", c)
		}
	}
}

func TestGoToolPprofTop(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not found: cannot run go tool pprof")
	}
	p := testProfile()
	file := filepath.Join(t.TempDir(), "wall.pb.gz")
	if err := os.WriteFile(file, writePprof(t, p), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(goBin, "tool", "pprof", "-sample_index=wall", "-top", file)
	// No local binaries to find: the file carries its symbols.
	cmd.Env = append(os.Environ(), "PPROF_BINARY_PATH="+t.TempDir(), "PPROF_TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go tool pprof: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`of (\S+) total`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no total in go tool pprof output:\n%s", out)
	}
	total, err := time.ParseDuration(string(m[1]))
	if err != nil {
		t.Fatalf("total %q: %v", m[1], err)
	}
	var want int64
	for _, s := range p.Samples {
		want += s.Value
	}
	if int64(total) != want {
		t.Errorf("go tool pprof total = %v, want %v\n%s", total, time.Duration(want), out)
	}
	if !bytes.Contains(out, []byte("main.fib")) {
		t.Errorf("go tool pprof output lacks main.fib:\n%s", out)
	}
	// The header is for people: a few lines, no machine records.
	if bytes.Contains(out, []byte("wallprof:v1")) {
		t.Errorf("go tool pprof prints wallprof's records:\n%s", out)
	}
}

func TestWritePprofRejects(t *testing.T) {
	for name, mut := range map[string]func(p *profile.Profile){
		"reserved label":      func(p *profile.Profile) { p.Samples[0].Labels = map[string]string{"state": "x"} },
		"unknown state":       func(p *profile.Profile) { p.Samples[0].State = profile.NumStates },
		"location not listed": func(p *profile.Profile) { p.Locs = p.Locs[1:] },
		"mapping not listed":  func(p *profile.Profile) { p.Mappings = p.Mappings[1:] },
		"duplicate loc id":    func(p *profile.Profile) { p.Locs[1].ID = 1 },
		"nil sample":          func(p *profile.Profile) { p.Samples[2] = nil },
	} {
		p := testProfile()
		mut(p)
		if err := WritePprof(&bytes.Buffer{}, p); err == nil {
			t.Errorf("%s: WritePprof succeeded", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// TestReadForeignCPU reads a profile shaped like a Go CPU profile.
func TestReadForeignCPU(t *testing.T) {
	fn := &pprof.Function{ID: 1, Name: "main.spin", Filename: "spin.go"}
	m := &pprof.Mapping{ID: 1, Start: 0x1000, Limit: 0x2000, File: "/bin/spin"}
	l := &pprof.Location{ID: 1, Mapping: m, Address: 0x1010, Line: []pprof.Line{{Function: fn, Line: 3}}}
	l2 := &pprof.Location{ID: 2, Mapping: m, Address: 0x1020}
	pp := &pprof.Profile{
		SampleType: []*pprof.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &pprof.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     10_000_000,
		Sample: []*pprof.Sample{
			{Location: []*pprof.Location{l, l2}, Value: []int64{3, 30_000_000}, Label: map[string][]string{"request": {"a"}}},
		},
		Mapping: []*pprof.Mapping{m}, Location: []*pprof.Location{l, l2}, Function: []*pprof.Function{fn},
		Comments: []string{"recorded by a test"},
	}
	var b bytes.Buffer
	if err := pp.Write(&b); err != nil {
		t.Fatal(err)
	}
	p, err := ReadProfile(&b)
	if err != nil {
		t.Fatalf("ReadProfile: %v", err)
	}
	if len(p.Samples) != 1 || p.Samples[0].Value != 30_000_000 || p.Samples[0].State != profile.OnCPU {
		t.Fatalf("samples = %+v", p.Samples)
	}
	if got := p.Samples[0].Labels; !reflect.DeepEqual(got, map[string]string{"request": "a"}) {
		t.Errorf("labels = %v", got)
	}
	if p.Period != 10_000_000 || len(p.Threads) != 0 || p.Lost != nil || p.Cost != nil {
		t.Errorf("period %d threads %v lost %v cost %v", p.Period, p.Threads, p.Lost, p.Cost)
	}
	if len(p.Notes) != 2 || p.Notes[0] != "recorded by a test" || !strings.Contains(p.Notes[1], "not written by wallprof") {
		t.Errorf("notes = %q", p.Notes)
	}
	if got := frameNames(nil, p.Samples[0].Stack); !reflect.DeepEqual(got, []string{"main.spin", "spin+0x20"}) {
		t.Errorf("frames = %q", got)
	}
}

func TestReadForeignNotTime(t *testing.T) {
	pp := &pprof.Profile{SampleType: []*pprof.ValueType{{Type: "inuse_space", Unit: "bytes"}}}
	var b bytes.Buffer
	if err := pp.Write(&b); err != nil {
		t.Fatal(err)
	}
	_, err := ReadProfile(&b)
	var fe *FormatError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v, want a *FormatError", err)
	}
	t.Log(err)
}

func TestReadCorrupt(t *testing.T) {
	good := writePprof(t, testProfile())
	var raw bytes.Buffer
	pp, err := pprof.ParseData(good)
	if err != nil {
		t.Fatal(err)
	}
	if err := pp.WriteUncompressed(&raw); err != nil {
		t.Fatal(err)
	}
	random := make([]byte, 4096)
	x := uint32(1)
	for i := range random {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		random[i] = byte(x)
	}
	cases := map[string][]byte{
		"empty":                     nil,
		"truncated gzip":            good[:len(good)/2],
		"gzip header only":          good[:10],
		"truncated protobuf":        raw.Bytes()[:raw.Len()/2],
		"random":                    random,
		"gzip magic then junk":      append([]byte{0x1f, 0x8b}, random[:100]...),
		"text":                      []byte("hello, world\n"),
		"newer wallprof":            rewriteComment(t, pp, "wallprof:v2 thread pid=1"),
		"bad wallprof thread field": rewriteComment(t, pp, "wallprof:v1 thread pid=x"),
		"bad wallprof note":         rewriteComment(t, pp, "wallprof:v1 note unquoted"),
	}
	for name, data := range cases {
		_, err := ReadProfile(bytes.NewReader(data))
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Errorf("%s: err = %v, want a *FormatError", name, err)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "input is not a pprof profile: ") || strings.Contains(msg, "\n") {
			t.Errorf("%s: error %q is not one sentence naming the input", name, msg)
		}
		t.Logf("%s: %v", name, err)
	}
	file := filepath.Join(t.TempDir(), "app.pb.gz")
	if err := os.WriteFile(file, good[:len(good)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = ReadProfileFile(file)
	if err == nil || !strings.HasPrefix(err.Error(), file+" is not a pprof profile: ") {
		t.Errorf("ReadProfileFile error = %v, want it to name the file", err)
	}
}

// rewriteComment returns pp, gzipped, with one more comment.
func rewriteComment(t *testing.T, pp *pprof.Profile, c string) []byte {
	t.Helper()
	cp := pp.Copy()
	cp.Comments = append(cp.Comments, c)
	var b bytes.Buffer
	if err := cp.Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func FuzzReadProfile(f *testing.F) {
	good := writePprof(f, testProfile())
	f.Add(good)
	f.Add(good[:len(good)/3])
	f.Add([]byte{})
	f.Add([]byte{0x1f, 0x8b, 0x08})
	f.Add([]byte("--- contention:\ncycles/second=1\n"))
	if pp, err := pprof.ParseData(good); err == nil {
		var raw bytes.Buffer
		if pp.WriteUncompressed(&raw) == nil {
			f.Add(raw.Bytes())
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ReadProfile(bytes.NewReader(data))
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *FormatError", err)
			}
			return
		}
		// Whatever was read can be presented.
		if err := WriteCollapsed(&bytes.Buffer{}, p, CollapsedOptions{PerThread: true, States: true}); err != nil {
			t.Fatalf("WriteCollapsed: %v", err)
		}
		if err := WriteReport(&bytes.Buffer{}, p, ReportOptions{}); err != nil {
			t.Fatalf("WriteReport: %v", err)
		}
	})
}

// TestReadGoCPUProfile reads a real CPU profile from runtime/pprof.
func TestReadGoCPUProfile(t *testing.T) {
	var b bytes.Buffer
	if err := runtimepprof.StartCPUProfile(&b); err != nil {
		t.Skipf("cannot start a CPU profile: %v", err)
	}
	x := 0
	for end := time.Now().Add(100 * time.Millisecond); time.Now().Before(end); {
		x++
	}
	runtimepprof.StopCPUProfile()
	data := b.Bytes()
	pp, err := pprof.ParseData(data)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ReadProfile(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("ReadProfile: %v", err)
	}
	if len(p.Samples) != len(pp.Sample) || p.Period != pp.Period || p.Duration != time.Duration(pp.DurationNanos) {
		t.Errorf("got %d samples, period %d, duration %v; want %d, %d, %v",
			len(p.Samples), p.Period, p.Duration, len(pp.Sample), pp.Period, time.Duration(pp.DurationNanos))
	}
	for i, s := range p.Samples {
		if s.State != profile.OnCPU || s.Value != pp.Sample[i].Value[1] {
			t.Errorf("sample %d: state %v value %d, want on-cpu %d", i, s.State, s.Value, pp.Sample[i].Value[1])
		}
	}
	if len(p.Threads) != 0 || len(p.Notes) == 0 {
		t.Errorf("threads %v notes %q", p.Threads, p.Notes)
	}
	// And it can be written back as a wallprof pprof.
	if err := WritePprof(&bytes.Buffer{}, p); err != nil {
		t.Errorf("WritePprof of a read Go profile: %v", err)
	}
}

func TestPprofRoundTripEmpty(t *testing.T) {
	want := &profile.Profile{Duration: time.Second, Period: 1e7}
	got, err := ReadProfile(bytes.NewReader(writePprof(t, want)))
	if err != nil {
		t.Fatalf("ReadProfile: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		diffProfiles(t, got, want)
	}
}

// How the recording was made survives a round trip, and people see it in
// the comments and at the top of the report.
func TestPprofRecorderRoundTrip(t *testing.T) {
	for _, rec := range []profile.Recorder{
		{Accounting: profile.AccountResumption, Kernel: "6.18.44-fc-v657"},
		{Accounting: profile.AccountSwitchTime, Kernel: "6.1.0-28-amd64"},
		{Accounting: profile.AccountSwitchTime}, // kernel unknown
	} {
		want := testProfile()
		want.Recorder = &rec
		data := writePprof(t, want)
		got, err := ReadProfile(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("ReadProfile: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			diffProfiles(t, got, want)
		}
		pp, err := pprof.Parse(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		text := strings.Join(pp.Comments, "\n")
		var b bytes.Buffer
		if err := WriteReport(&b, got, ReportOptions{}); err != nil {
			t.Fatal(err)
		}
		wantWords := map[string]string{profile.AccountResumption: "resumption (sched_exit_tp)", profile.AccountSwitchTime: "context switch (sched_switch)"}[rec.Accounting]
		for _, out := range []string{text, b.String()} {
			if !strings.Contains(out, wantWords) || !strings.Contains(out, rec.Kernel) {
				t.Errorf("%+v: want %q and the kernel in:\n%s", rec, wantWords, out)
			}
		}
	}
}

// goProfile is testProfile with a goroutine view.
func goProfile() *profile.Profile {
	p := testProfile()
	p.Goroutines = []*profile.GoSample{
		{Stack: p.Samples[0].Stack, PID: p.Samples[0].PID, GoID: 7, State: profile.GWaiting, WaitReason: "chan receive",
			CreatedBy: "main.start", Func: "main.worker", Labels: map[string]string{"handler": "search"}, Value: 3e6},
		{Stack: p.Samples[1].Stack, PID: p.Samples[1].PID, State: profile.GRunning, Func: "main.worker", CreatedBy: "main.start", Value: 2e6},
		{Stack: p.Samples[0].Stack, PID: p.Samples[0].PID, GoID: 1, State: profile.GRunnable, Func: "main.main", Value: 1e6},
	}
	p.GoInfo = &profile.GoInfo{Version: "go1.26.0", Snapshots: 99, Interval: 10 * time.Millisecond, MaxGoroutines: 12, Dropped: 2, Retried: 5,
		Covered: 990 * time.Millisecond, LongestGap: 12 * time.Millisecond}
	return p
}

// The goroutine view survives a round trip, and it is a sample type of its
// own: the thread types do not count it, and it is the default.
func TestPprofGoroutinesRoundTrip(t *testing.T) {
	want := goProfile()
	want.GoInfo.Before = 40 * time.Millisecond
	data := writePprof(t, want)
	got, err := ReadProfile(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Error("round trip changed the profile")
		diffProfiles(t, got, want)
	}
	pp, err := pprof.ParseData(data)
	if err != nil {
		t.Fatal(err)
	}
	if pp.DefaultSampleType != "goroutine" || len(pp.SampleType) != 4 || pp.SampleType[3].Type != "goroutine" {
		t.Fatalf("sample types %v, default %q", pp.SampleType, pp.DefaultSampleType)
	}
	var thread, gor int64
	for _, s := range pp.Sample {
		thread += s.Value[0]
		gor += s.Value[3]
		if s.Value[0] != 0 && s.Value[3] != 0 {
			t.Errorf("a sample counts in both views: %v", s.Value)
		}
	}
	var wantThread int64
	for _, s := range want.Samples {
		wantThread += s.Value
	}
	if thread != wantThread || gor != 6e6 {
		t.Errorf("wall %d (want %d), goroutine %d (want 6e6)", thread, wantThread, gor)
	}
	// pprof's own tag filter sees the labels.
	for _, s := range pp.Sample {
		if s.Value[3] == 3e6 && (s.Label["wait_reason"][0] != "chan receive" || s.NumLabel["goid"][0] != 7 || s.Label["handler"][0] != "search") {
			t.Errorf("labels %v %v", s.Label, s.NumLabel)
		}
	}
}

// pprof names a profile after its first mapping ("File:" in go tool pprof):
// that must be the program's, named as it was run (Profile.Program), even
// when a library was mapped first and the command line's first word is not
// the file's name (a rewritten process title, a symlink).
func TestPprofMainMappingIsProgram(t *testing.T) {
	p := testProfile()
	p.Mappings[0], p.Mappings[1] = p.Mappings[1], p.Mappings[0] // libc first
	p.Command = "server: worker process"
	p.NameProgram("/usr/bin/server", "/usr/bin/server")
	data := writePprof(t, p)
	pp, err := pprof.Parse(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if got := pp.Mapping[0].File; got != "/usr/bin/server" {
		t.Errorf("main mapping = %s, want /usr/bin/server", got)
	}
	got, err := ReadProfile(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if got.Program != p.Program {
		t.Errorf("Program after a round trip = %q, want %q", got.Program, p.Program)
	}
	// Profiles that do not name their program: the command's first word.
	p.Program, p.Command = "", "/usr/bin/server --port 1"
	if pp, err = pprof.Parse(bytes.NewReader(writePprof(t, p))); err != nil {
		t.Fatal(err)
	}
	if got := pp.Mapping[0].File; got != "/usr/bin/server" {
		t.Errorf("main mapping without Program = %s, want /usr/bin/server", got)
	}
}
