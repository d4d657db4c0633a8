package runreport

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/wallprof/wallprof/internal/goruntime/gctrace"
	"github.com/wallprof/wallprof/internal/load"
	"github.com/wallprof/wallprof/internal/present"
)

const logText = `gc 1 @0.010s 2%: 0.010+1.0+0.020 ms clock, 0.020+0.5/1.0/0.3+0.040 ms cpu, 4->5->2 MB, 5 MB goal, 0 MB stacks, 0 MB globals, 2 P
listening on :8080
gc 2 @1.000s 1%: 0.010+1.0+0.020 ms clock, 0.020+0.5/1.0/0.3+0.040 ms cpu, 4->4->1 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P (forced)
gc 3 @1.500s 3%: 0.100+2.0+0.200 ms clock, 0.200+1.0/2.0/0.5+0.400 ms cpu, 8->9->3 MB, 9 MB goal, 0 MB stacks, 0 MB globals, 2 P
gc 4 @2.000s 4%: 0.100+2.0+0.200 ms clock, 0.200+1.0/2.0/0.5+0.400 ms cpu, 8->9->3 MB, 9 MB goal, 0 MB stacks, 0 MB globals, 2 P
gc 5 @2.450s 4%: 0.100+2.0+0.200 ms clock, 0.200+1.0/2.0/0.5+0.400 ms cpu, 6->6->2 MB, 6 MB goal, 0 MB stacks, 0 MB globals, 2 P
gc 6 @2.990s 4%: 0.010+1.0+0.020 ms clock, 0.020+0.5/1.0/0.3+0.040 ms cpu, 4->4->1 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P (forced)
gc 7 @4.000s 3%: 0.010+1.0+0.020 ms clock, 0.020+0.5/1.0/0.3+0.040 ms cpu, 4->4->1 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P
`

func TestBuildGCWindow(t *testing.T) {
	l, err := gctrace.Parse(strings.NewReader(logText))
	if err != nil {
		t.Fatal(err)
	}
	// The load ran from 1.02s to 3.0s: collections 3, 4 and 5 are in it;
	// 2 is before, and 6 is the forced one wallprof asked for at the end.
	g, err := BuildGC(l, 1020*time.Millisecond, 3000*time.Millisecond, 300)
	if err != nil {
		t.Fatal(err)
	}
	s := g.Summary
	if s.Collections != 3 || g.Before != 2 || g.After != 2 || g.InLog != 7 {
		t.Fatalf("collections in window %d, before %d, after %d, in log %d; want 3, 2, 2, 7", s.Collections, g.Before, g.After, g.InLog)
	}
	if s.RequestsPerGC != 100 || g.PerKRequests != 10 {
		t.Errorf("requests per GC %.2f, per 1000 requests %.2f; want 100 and 10", s.RequestsPerGC, g.PerKRequests)
	}
	if want := 3 * 300 * time.Microsecond; s.STW != want {
		t.Errorf("STW %s, want %s", s.STW, want)
	}
	if s.HeapBefore.Max != 8 || s.HeapBefore.Min != 6 {
		t.Errorf("heap before %+v", s.HeapBefore)
	}
	if len(g.Timeline) != 7 || g.Timeline[0].CPUPercent != -1 {
		t.Fatalf("timeline %+v", g.Timeline)
	}
	// Cycle 4: 0.2+1.0+2.0+0.5+0.4 ms of CPU, idle 0.5 excluded: 3.6 ms
	// over 0.5 s on 2 Ps.
	if got, want := g.Timeline[3].CPUPercent, 100*3.6e-3/(0.5*2); got < want-1e-9 || got > want+1e-9 {
		t.Errorf("cycle 4 GC CPU %.4f%%, want %.4f%%", got, want)
	}
	// A window without collections is a zero summary, not an error.
	g, err = BuildGC(l, 5*time.Second, 6*time.Second, 10)
	if err != nil || g.Summary.Collections != 0 || g.PerKRequests != 0 {
		t.Errorf("empty window: %+v, %v", g, err)
	}
	if _, err := BuildGC(&gctrace.Log{}, 0, time.Second, 1); err != gctrace.ErrNoCycles {
		t.Errorf("empty log: %v", err)
	}
}

// allocProfile is a heap profile with one stack per site and the given
// alloc_space values.
func allocProfile(vals map[string]int64, at int64) *profile.Profile {
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "alloc_objects", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"},
			{Type: "inuse_objects", Unit: "count"}, {Type: "inuse_space", Unit: "bytes"}},
		PeriodType: &profile.ValueType{Type: "space", Unit: "bytes"}, Period: 512 * 1024, TimeNanos: at,
	}
	id := uint64(1)
	for _, name := range []string{"main.a", "main.b", "main.c", "main.d"} {
		v, ok := vals[name]
		if !ok {
			continue
		}
		fn := &profile.Function{ID: id, Name: name, Filename: "/src/" + name[5:] + ".go"}
		alloc := &profile.Function{ID: id + 100, Name: "runtime.mallocgc", Filename: "malloc.go"}
		loc := &profile.Location{ID: id, Line: []profile.Line{{Function: alloc, Line: 1}, {Function: fn, Line: int64(10 * id)}}}
		p.Function = append(p.Function, fn, alloc)
		p.Location = append(p.Location, loc)
		p.Sample = append(p.Sample, &profile.Sample{Location: []*profile.Location{loc}, Value: []int64{v / 100, v, v / 200, v / 2}})
		id++
	}
	return p
}

func TestDeltaAndTotals(t *testing.T) {
	before := allocProfile(map[string]int64{"main.a": 1000, "main.b": 500}, 1e9)
	after := allocProfile(map[string]int64{"main.a": 1000, "main.b": 2500, "main.c": 700}, 3e9)
	d, err := Delta(before, after)
	if err != nil {
		t.Fatal(err)
	}
	bytes, objects := Totals(d, "alloc_space", "alloc_objects")
	if bytes != 2700 || objects != 20+7 {
		t.Errorf("delta totals %d bytes, %d objects; want 2700 and 27", bytes, objects)
	}
	if len(d.Sample) != 2 {
		t.Errorf("delta keeps %d stacks; main.a did not change and must go", len(d.Sample))
	}
	if d.DurationNanos != 2e9 {
		t.Errorf("delta duration %d", d.DurationNanos)
	}
	if b, _ := Totals(before, "alloc_space", "alloc_objects"); b != 1500 {
		t.Errorf("Delta changed its input: %d", b)
	}
	if b, o := Totals(d, "nope", "nada"); b != 0 || o != 0 {
		t.Errorf("missing types sum to %d, %d", b, o)
	}
}

func TestHeapSeries(t *testing.T) {
	snaps := []HeapSnapshot{
		{At: time.Second, Profile: allocProfile(map[string]int64{"main.a": 100, "main.b": 10, "main.c": 1}, 1)},
		{At: 2 * time.Second, Profile: allocProfile(map[string]int64{"main.a": 50, "main.b": 300, "main.d": 4}, 2)},
	}
	h := BuildHeapSeries(snaps, 2, 1)
	// inuse_space is half the value; the sites are ranked by their peak.
	want := []string{"main.b (b.go:20)", "main.a (a.go:10)", Other}
	if strings.Join(h.Sites, "|") != strings.Join(want, "|") {
		t.Fatalf("sites %q, want %q", h.Sites, want)
	}
	if got := h.Bytes; got[0][0] != 5 || got[0][1] != 50 || got[0][2] != 0 || got[1][0] != 150 || got[1][1] != 25 || got[1][2] != 2 {
		t.Errorf("bytes %v", got)
	}
	if h.Failed != 1 || len(h.At) != 2 {
		t.Errorf("series %+v", h)
	}
}

func TestTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		want   string
	}{
		{0, 10, "[0 5 10]"},
		{0, 33, "[0 10 20 30]"},
		{1.3, 2.9, "[1.4 1.6 1.8 2 2.2 2.4 2.6 2.8]"},
	} {
		n := 4
		if tc.lo == 1.3 {
			n = 8
		}
		var b strings.Builder
		b.WriteString("[")
		for i, v := range ticks(tc.lo, tc.hi, n) {
			if i > 0 {
				b.WriteString(" ")
			}
			b.WriteString(strconv.FormatFloat(v, 'f', -1, 64))
		}
		b.WriteString("]")
		if b.String() != tc.want {
			t.Errorf("ticks(%v, %v) = %s, want %s", tc.lo, tc.hi, b.String(), tc.want)
		}
	}
}

// The page is self-contained: no external URL, script or stylesheet; every
// section is there, and text from the report is escaped.
func TestWriteHTML(t *testing.T) {
	l, _ := gctrace.Parse(strings.NewReader(logText))
	g, _ := BuildGC(l, time.Second, 3*time.Second, 300)
	r := &Report{Format: Format, Command: []string{"./server", "--name=<script>"}, LoadStart: time.Second, LoadEnd: 3 * time.Second,
		Load: &load.Result{Requests: 300, Successes: 300, SuccessRatio: 1, Throughput: 150, Targets: []string{"GET http://x/"},
			StatusCodes: map[string]int64{"200": 300}},
		GC:        g,
		Alloc:     &Alloc{Bytes: 3 << 20, Objects: 3000, BytesPerRequest: 10485.76, ObjectsPerRequest: 10},
		Heap:      BuildHeapSeries([]HeapSnapshot{{At: time.Second, Profile: allocProfile(map[string]int64{"main.a": 100}, 1)}, {At: 2 * time.Second, Profile: allocProfile(map[string]int64{"main.a": 300}, 2)}}, 8, 0),
		Artefacts: map[string]string{"report data (JSON)": "r.json"}}
	var b bytes.Buffer
	if err := WriteHTML(&b, r, Page{Flame: []byte(`<!DOCTYPE html><p class="x">"flame" & co</p>`)}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{`id="gc-collections">3<`, `id="bytes-per-request">10.2 KiB<`, `<svg class="chart"`, `srcdoc="&lt;!DOCTYPE html&gt;&lt;p class=&#34;x&#34;&gt;&#34;flame&#34; &amp; co&lt;/p&gt;"`,
		`--name=&lt;script&gt;`, `href="r.json"`, "main.a (a.go:10)"} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	for _, bad := range []string{"<script", "http://", "https://", "<link"} {
		if i := strings.Index(page, bad); i >= 0 && !(bad == "http://" && strings.Contains(page[i-30:i+30], "http://x/")) && !strings.Contains(page[max(0, i-20):i], "xmlns=") {
			t.Errorf("the page has %q near %q", bad, page[max(0, i-40):min(len(page), i+40)])
		}
	}
}

// The goroutine section says what share of the recording the goroutine
// view covers, and warns when it is low.
func TestWriteHTMLGoroutineCoverage(t *testing.T) {
	pc := 17.2
	gr := &present.GoroutineReport{Format: present.GoroutinesFormat, Snapshots: 30, RecordingNs: int64(5 * time.Second),
		CoveredNs: int64(860 * time.Millisecond), Coverage: &pc, Warnings: []string{"the goroutine view covers only 17% of the recording"},
		Groups: []present.GoroutineGroup{{Group: "created by net/http.(*Server).Serve", Goroutines: 8, TimeNs: 1e9, Share: 100, Waiting: 100}}}
	r := &Report{Format: Format, Command: []string{"./server"}, Load: &load.Result{}, Goroutines: gr, Artefacts: map[string]string{}}
	var b bytes.Buffer
	if err := WriteHTML(&b, r, Page{Flame: []byte("<p>flame</p>")}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"read 30 times, covering 860.00ms of the 5.00s recording (17.2%)",
		`<p class="note" id="goroutines-warning">⚠ the goroutine view covers only 17% of the recording</p>`} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}

func TestSiteSkipsLibraries(t *testing.T) {
	fn := func(name, file string) profile.Line {
		return profile.Line{Function: &profile.Function{Name: name, Filename: file}, Line: 7}
	}
	s := &profile.Sample{Location: []*profile.Location{
		{Line: []profile.Line{fn("runtime.mallocgc", "malloc.go"), fn("strings.(*Builder).WriteByte", "/go/src/strings/builder.go")}},
		{Line: []profile.Line{fn("main.genBody", "/src/corpus.go")}},
	}}
	if got := Site(s); got != "main.genBody (corpus.go:7)" {
		t.Errorf("site %q", got)
	}
	s.Location = s.Location[:1]
	if got := Site(s); got != "strings.(*Builder).WriteByte (builder.go:7)" {
		t.Errorf("site without user code %q", got)
	}
}

func TestDropProfiler(t *testing.T) {
	p := allocProfile(map[string]int64{"main.a": 100, "main.b": 50}, 1)
	p.Sample[1].Location[0].Line = append(p.Sample[1].Location[0].Line,
		profile.Line{Function: &profile.Function{Name: "net/http/pprof.handler.ServeHTTP"}})
	if got := DropProfiler(p, "alloc_space"); got != 50 || len(p.Sample) != 1 {
		t.Errorf("dropped %d bytes, %d samples left", got, len(p.Sample))
	}
}
