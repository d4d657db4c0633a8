package exectrace

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/trace"
	"strings"
	"testing"
	"time"
)

// truth is what testdata/tracegt measures of itself.
type truth struct {
	GCPeriodMs  float64 `json:"gc_period_ms"`
	ForcedGCs   int     `json:"forced_gcs"`
	MutexWaitMs float64 `json:"mutex_wait_ms"`
	ChanWaitMs  float64 `json:"chan_wait_ms"`
	SleepMs     float64 `json:"sleep_ms"`
}

// runGroundTruth builds and runs testdata/tracegt for 3 s and returns its
// trace's summary and its own measurements.
func runGroundTruth(t *testing.T) (*Summary, truth) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs a traced program for 3 s")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "tracegt")
	build := exec.Command("go", "build", "-o", bin, "./testdata/tracegt")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build tracegt: %v\n%s", err, out)
	}
	tracePath := filepath.Join(dir, "trace.out")
	out, err := exec.Command(bin, "-o", tracePath, "-d", "3s").Output()
	if err != nil {
		t.Fatalf("run tracegt: %v", err)
	}
	var gt truth
	if err := json.Unmarshal(out, &gt); err != nil {
		t.Fatalf("tracegt printed %q: %v", out, err)
	}
	f, err := os.Open(tracePath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := Analyze(f, Options{Name: "tracegt"})
	if err != nil {
		t.Fatalf("Analyze: %v", err)
	}
	if s.Truncated != "" {
		t.Fatalf("a complete trace read as truncated: %s", s.Truncated)
	}
	sameAsOneReader(t, tracePath, s)
	return s, gt
}

func groupMs(s *Summary, reason string, groups ...string) float64 {
	var total float64
	for _, r := range s.Blocking {
		if r.Reason != reason {
			continue
		}
		for _, g := range r.Groups {
			for _, want := range groups {
				if g.Group == want {
					total += g.Ms
				}
			}
		}
	}
	return total
}

// TestTraceGroundTruth checks the analysis against a program that
// measures itself.
//
// Tolerances: the period of the forced collections within 5% of the
// program's ticker (the ticker is exact; a pause starts a few µs after
// the tick). Blocking within 5% of the program's own measurement: the
// program times each wait from user code, so its figure also holds the
// spinning before a goroutine parks and the scheduling latency after it
// is woken, which the trace counts apart (tens of µs per wait on a busy
// 2-CPU machine, against waits of 3 to 20 ms: under 2% in all).
func TestTraceGroundTruth(t *testing.T) {
	s, gt := runGroundTruth(t)
	t.Logf("truth %+v", gt)

	var forced *PauseKind
	for i, k := range s.Pauses.Kinds {
		if k.Site == "main.gcLoop" {
			forced = &s.Pauses.Kinds[i]
		}
	}
	if forced == nil || forced.Period == nil {
		t.Fatalf("no pause kind from main.gcLoop with a period: %+v", s.Pauses.Kinds)
	}
	if !forced.Period.Periodic || math.Abs(forced.Period.MedianMs-gt.GCPeriodMs) > 0.05*gt.GCPeriodMs {
		t.Errorf("forced GC pauses: period %+v, want %.0f ms ±5%%", *forced.Period, gt.GCPeriodMs)
	}
	if forced.Count < int64(gt.ForcedGCs)-1 || forced.Count > int64(gt.ForcedGCs)+1 {
		t.Errorf("forced GC pauses: %d, the program called runtime.GC %d times", forced.Count, gt.ForcedGCs)
	}
	for _, c := range []struct {
		reason string
		groups []string
		want   float64
	}{
		{"sync", []string{"main.mutexHolder", "main.mutexWaiter"}, gt.MutexWaitMs},
		{"channel", []string{"main.producer", "main.consumer"}, gt.ChanWaitMs},
		{"sleep", []string{"main.sleeper"}, gt.SleepMs},
	} {
		got := groupMs(s, c.reason, c.groups...)
		t.Logf("%s in %v: trace %.1f ms, program %.1f ms", c.reason, c.groups, got, c.want)
		if c.want <= 0 || math.Abs(got-c.want) > 0.05*c.want {
			t.Errorf("%s blocking in %v: %.1f ms, the program measured %.1f ms (want within 5%%)", c.reason, c.groups, got, c.want)
		}
	}
	if len(s.Regions) != 1 || s.Regions[0].Type != "forced-gc" || s.Regions[0].Count != int64(gt.ForcedGCs) {
		t.Errorf("regions %+v, want %d forced-gc", s.Regions, gt.ForcedGCs)
	}
	if s.GC.Cycles < gt.ForcedGCs || s.GC.WorkerCPUPct <= 0 {
		t.Errorf("GC %+v, want at least %d cycles and some worker CPU", s.GC, gt.ForcedGCs)
	}
	// tracegt starts 200 goroutines a second.
	if s.Goroutines.CreatedPerS < 150 || s.Goroutines.CreatedPerS > 250 {
		t.Errorf("goroutines created per second: %.1f, want about 200", s.Goroutines.CreatedPerS)
	}
	var buf bytes.Buffer
	if err := WriteText(&buf, s); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "recur every") {
		t.Errorf("the text report states no period:\n%s", buf.String())
	}
}

// smallTrace is a trace of this test process doing a little work.
func smallTrace(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("cannot trace: %v", err)
	}
	done := make(chan bool)
	for i := 0; i < 4; i++ {
		go func() {
			for j := 0; j < 20; j++ {
				time.Sleep(time.Millisecond)
				_ = make([]byte, 1<<16)
			}
			done <- true
		}()
	}
	for i := 0; i < 4; i++ {
		<-done
	}
	trace.Stop()
	return buf.Bytes()
}

func TestTraceBadInput(t *testing.T) {
	full := smallTrace(t)
	for _, c := range []struct {
		name string
		data []byte
		want error // nil: a summary with Truncated set
	}{
		{"empty", nil, ErrEmpty},
		{"text", []byte("hello, this is not a trace at all\n"), ErrNotTrace},
		{"header only", []byte("go 1.26 trace\x00\x00\x00"), ErrNotTrace},
		{"go1.21", []byte("go 1.21 trace\x00\x00\x00\x01\x02\x03"), ErrOldTrace},
		{"go1.99", []byte("go 1.99 trace\x00\x00\x00\x01\x02\x03"), ErrNewTrace},
		{"cut at 100 bytes", full[:100], ErrTruncated},
		{"cut in half", full[:len(full)/2], nil},
		{"garbled", append(append([]byte{}, full[:len(full)/2]...), bytes.Repeat([]byte{0xff}, 1000)...), nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := Analyze(bytes.NewReader(c.data), Options{Name: c.name})
			if c.want != nil {
				if !errors.Is(err, c.want) {
					t.Fatalf("err = %v, want %v", err, c.want)
				}
				if strings.Contains(err.Error(), "\n") {
					t.Errorf("error spans lines: %q", err)
				}
				return
			}
			if err != nil {
				// A cut that lands before the first complete batch.
				if errors.Is(err, ErrTruncated) {
					return
				}
				t.Fatalf("err = %v", err)
			}
			if s.Truncated == "" || s.Events == 0 {
				t.Errorf("events %d, truncated %q: want a summary of what was read and where it stopped", s.Events, s.Truncated)
			}
		})
	}
}

// FuzzAnalyze checks that no input makes the analysis panic.
func FuzzAnalyze(f *testing.F) {
	f.Add([]byte("go 1.26 trace\x00\x00\x00"))
	f.Add([]byte("go 1.23 trace\x00\x00\x00\x00\x01\x02"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Analyze(bytes.NewReader(b), Options{})
		if err == nil {
			var buf bytes.Buffer
			_ = WriteText(&buf, s)
			_ = WriteJSON(&buf, s)
			_ = WriteHTML(&buf, s, nil)
		}
	})
}

func TestTraceOutputs(t *testing.T) {
	s, err := Analyze(bytes.NewReader(smallTrace(t)), Options{Name: "small"})
	if err != nil {
		t.Fatal(err)
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, s); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back["format"] != "wallprof.trace/v1" {
		t.Fatalf("JSON format %v, err %v", back["format"], err)
	}
	var page bytes.Buffer
	if err := WriteHTML(&page, s, nil); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"<script", "<link", "src=", `href="http`, "url("} {
		if strings.Contains(page.String(), bad) {
			t.Errorf("the page refers outside itself: %q", bad)
		}
	}
	paths, err := WriteProfiles(s, filepath.Join(t.TempDir(), "x."))
	if err != nil || len(paths) != 3 {
		t.Fatalf("profiles %v, err %v", paths, err)
	}
}

func TestPeriod(t *testing.T) {
	var ts []int64
	for i := 0; i < 20; i++ {
		ts = append(ts, int64(i)*200e6+int64(i%3)*1e6)
	}
	p := periodOf(ts)
	if p == nil || !p.Periodic || math.Abs(p.MedianMs-200) > 2 {
		t.Errorf("period %+v, want 200 ms", p)
	}
}

// sameAsOneReader checks that the summary of a trace read one generation
// at a time (genEvents) is the one a single trace.Reader gives.
func sameAsOneReader(t *testing.T, path string, s *Summary) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	one, err := Analyze(f, Options{Name: s.Name, oneReader: true})
	if err != nil {
		t.Fatalf("Analyze with one Reader: %v", err)
	}
	if s.Generations < 2 {
		t.Errorf("the trace has %d generations: too few to compare reading them one at a time", s.Generations)
	}
	var a, b bytes.Buffer
	if err := WriteJSON(&a, s); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&b, one); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Errorf("the summary read one generation at a time differs from one Reader's:\n%s\n---\n%s", a.Bytes(), b.Bytes())
	}
}
