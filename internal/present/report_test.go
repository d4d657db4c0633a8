package present

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/profile"
)

func TestReportGolden(t *testing.T) {
	for _, tc := range []struct {
		golden string
		opt    ReportOptions
	}{
		{"report.txt", ReportOptions{}},
		{"report-top3.txt", ReportOptions{Top: 3}},
		{"report.json", ReportOptions{JSON: true}},
		{"report-tree.txt", ReportOptions{Tree: true}},
		{"report-tree-all.txt", ReportOptions{Tree: true, NodeFraction: -1}},
		{"report-tree-fraction20.txt", ReportOptions{Tree: true, NodeFraction: 0.2}},
		{"report-threads.txt", ReportOptions{Threads: true}},
		{"report-states.txt", ReportOptions{States: true}},
		{"report-states-threads-top2.txt", ReportOptions{States: true, Threads: true, ShowTop: true, Top: 2}},
		{"report-focus-handle.txt", ReportOptions{Filter: mustFilter("handle", "", "")}},
		{"report-ignore-fib-tree.txt", ReportOptions{Tree: true, Filter: mustFilter("", "fib", "")}},
		{"report-hide-kernel-tree.txt", ReportOptions{Tree: true, Filter: mustFilter("", "", `kallsyms|\.ko$`)}},
		{"report-focus-nomatch.txt", ReportOptions{States: true, Filter: mustFilter("nosuchfunction", "", "")}},
		{"report-all-views.json", ReportOptions{JSON: true, Tree: true, Threads: true, States: true, ShowTop: true, Top: 3,
			Filter: mustFilter("main", "ext4", `^main\.serve$`)}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteReport(&b, testProfile(), tc.opt); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tc.golden, b.Bytes())
		})
	}
}

func TestReportNeverTruncates(t *testing.T) {
	var b bytes.Buffer
	if err := WriteReport(&b, testProfile(), ReportOptions{}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), longCxx+"\n") {
		t.Errorf("report does not show the long C++ name in full")
	}
}

// TestReportCumRecursion checks that a recursive function counts once per
// sample in cum, and that flat is the leaf only.
func TestReportCumRecursion(t *testing.T) {
	r := NewReport(testProfile(), -1)
	rows := map[string]FuncRow{}
	for _, row := range r.Top[0].Rows {
		rows[row.Name] = row
	}
	const ms = 1_000_000
	if f := rows["main.fib"]; f.FlatNS != 50*ms || f.CumNS != 50*ms {
		t.Errorf("main.fib flat %d cum %d, want 50ms each", f.FlatNS, f.CumNS)
	}
	if f := rows["main.main"]; f.FlatNS != 0 || f.CumNS != r.Top[0].TotalNS || f.CumPercent != 100 {
		t.Errorf("main.main = %+v, want cum = total %d", f, r.Top[0].TotalNS)
	}
	if f := rows["main.serve"]; f.CumNS != 410*ms {
		t.Errorf("main.serve cum %d, want 410ms", f.CumNS)
	}
	if r.Top[0].TotalNS != 475*ms || r.Top[1].TotalNS != 95*ms || r.Top[2].TotalNS != 380*ms {
		t.Errorf("totals = %d %d %d", r.Top[0].TotalNS, r.Top[1].TotalNS, r.Top[2].TotalNS)
	}
	if last := r.Top[0].Rows[len(r.Top[0].Rows)-1]; last.SumPercent != 100 {
		t.Errorf("sum%% of the last row = %v, want 100", last.SumPercent)
	}
}

func TestReportJSONFields(t *testing.T) {
	var b bytes.Buffer
	if err := WriteReport(&b, testProfile(), ReportOptions{JSON: true, Top: 2}); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"format", "command", "start", "duration_ns", "period_ns", "frequency_hz", "samples", "states", "lost", "cost", "notes", "top", "threads"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("JSON report lacks %q", k)
		}
	}
	if doc["format"] != ReportFormat {
		t.Errorf("format = %v", doc["format"])
	}
}

func TestReportForeign(t *testing.T) {
	p := testProfile()
	p.Threads, p.Lost, p.Cost, p.Notes, p.Command, p.Period = nil, nil, nil, nil, "", 0
	var b bytes.Buffer
	if err := WriteReport(&b, p, ReportOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"command:      (unknown)", "frequency:    unknown", "threads: no exact thread totals"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

func mustFilter(focus, ignore, hide string) Filter {
	f, err := CompileFilter(focus, ignore, hide)
	if err != nil {
		panic(err)
	}
	return f
}

// The header says how many of the distinct samples are time with no stack
// taken: a walked thread that waited all along, or ran less than a period,
// has one, and the distinct count can then exceed the stacks taken.
func TestReportCountsPlaceholders(t *testing.T) {
	leaf := &profile.Location{ID: 1, Address: 0x401000, Frames: []profile.Frame{{Function: "spin"}}}
	unseen := &profile.Location{ID: 2, Frames: []profile.Frame{{Function: "[off-CPU, stack not seen yet]"}}}
	p := &profile.Profile{
		Period:   10_000_000,
		Duration: time.Second,
		Samples: []*profile.Sample{
			{Stack: []*profile.Location{leaf}, PID: 1, TID: 1, State: profile.OnCPU, Value: 1e9},
			{Stack: []*profile.Location{unseen}, PID: 1, TID: 2, State: profile.Sleeping, Value: 1e9},
		},
		Threads: []*profile.Thread{{PID: 1, TID: 1, Samples: 1}, {PID: 1, TID: 2}},
	}
	r := NewReport(p, 0)
	if r.Samples != 2 || r.StackSamples != 1 || r.Placeholders != 1 {
		t.Fatalf("samples %d, stacks taken %d, placeholders %d; want 2, 1, 1", r.Samples, r.StackSamples, r.Placeholders)
	}
	var b strings.Builder
	if err := WriteReport(&b, p, ReportOptions{}); err != nil {
		t.Fatal(err)
	}
	if want := "1 stacks taken, 2 distinct (thread, state, stack), 1 of them time with no stack taken"; !strings.Contains(b.String(), want) {
		t.Errorf("report does not say %q:\n%s", want, b.String())
	}
}
