package present

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/wallprof/wallprof/internal/profile"
)

// lowCoverageProfile is goProfile with snapshots that stopped early: 17
// reads covering 172 ms of the 1 s recording.
func lowCoverageProfile() *profile.Profile {
	p := goProfile()
	p.GoInfo.Snapshots, p.GoInfo.Covered, p.GoInfo.LongestGap = 17, 172*time.Millisecond, 828*time.Millisecond
	return p
}

func TestGoroutineReportGolden(t *testing.T) {
	for _, tc := range []struct {
		golden string
		p      *profile.Profile
		json   bool
	}{
		{"goroutines.txt", goProfile(), false},
		{"goroutines.json", goProfile(), true},
		{"goroutines-low-coverage.txt", lowCoverageProfile(), false},
		{"goroutines-low-coverage.json", lowCoverageProfile(), true},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			r, err := NewGoroutineReport(tc.p, nil)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := WriteGoroutineReport(&b, r, tc.json); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tc.golden, b.Bytes())
		})
	}
}

// The coverage travels in the profile, and a low one is warned about in
// the report, its JSON and the comments pprof shows.
func TestGoroutineCoverage(t *testing.T) {
	p, err := ReadProfile(bytes.NewReader(writePprof(t, lowCoverageProfile())))
	if err != nil {
		t.Fatal(err)
	}
	if g := p.GoInfo; g.Covered != 172*time.Millisecond || g.LongestGap != 828*time.Millisecond || !g.LowCoverage(p.Duration) {
		t.Fatalf("GoInfo after a round trip: %+v", g)
	}
	w := GoCoverageWarning(p)
	for _, want := range []string{"covers only 17% of the recording", "172.00ms of 1.00s", "read 17 times", "longest gap 828.00ms"} {
		if !strings.Contains(w, want) {
			t.Errorf("warning %q lacks %q", w, want)
		}
	}
	r, err := NewGoroutineReport(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Coverage == nil || *r.Coverage != 17.2 || r.CoveredNs != int64(172*time.Millisecond) || len(r.Warnings) != 1 || r.Warnings[0] != w {
		t.Errorf("report coverage %v, covered %d, warnings %q", r.Coverage, r.CoveredNs, r.Warnings)
	}
	if GoCoverageWarning(goProfile()) != "" {
		t.Error("a warning for a view that covers 99% of the recording")
	}
	pp, err := pprof.ParseData(writePprof(t, goProfile()))
	if err != nil {
		t.Fatal(err)
	}
	if c := strings.Join(pp.Comments, "\n"); !strings.Contains(c, "covering 990.00ms of the 1.00s recording (99%)") {
		t.Errorf("comments do not say what the goroutine view covers:\n%s", c)
	}
}

// Profiles written before the coverage was measured read as before: no
// coverage, no warning.
func TestGoroutineCoverageUnknown(t *testing.T) {
	pp, err := pprof.ParseData(writePprof(t, lowCoverageProfile()))
	if err != nil {
		t.Fatal(err)
	}
	strip := regexp.MustCompile(` covered=\d+ longest_gap=\d+`)
	n := 0
	for _, f := range pp.Function {
		if f.SystemName == recordFunction && strings.Contains(f.Name, " goroutines ") {
			f.Name = strip.ReplaceAllString(f.Name, "")
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d goroutines records", n)
	}
	var b bytes.Buffer
	if err := pp.Write(&b); err != nil {
		t.Fatal(err)
	}
	p, err := ReadProfile(&b)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.GoInfo.Coverage(p.Duration); ok || p.GoInfo.Snapshots != 17 || GoCoverageWarning(p) != "" {
		t.Errorf("GoInfo of an older profile: %+v", p.GoInfo)
	}
	r, err := NewGoroutineReport(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	var js bytes.Buffer
	if err := WriteGoroutineReport(&js, r, true); err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(js.Bytes(), &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"coverage_percent", "covered_ns", "longest_gap_ns", "warnings"} {
		if _, ok := m[k]; ok {
			t.Errorf("JSON of an older profile has %s: %v", k, m[k])
		}
	}
	var text bytes.Buffer
	if err := WriteGoroutineReport(&text, r, false); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(text.String(), "covering") || strings.Contains(text.String(), "warning") {
		t.Errorf("text report of an older profile:\n%s", text.String())
	}
}
