package bench

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"
)

// stepRuns are 12 commits of BenchmarkSearch, 5 samples each, the last 6
// at 130 ns/op instead of 100, and 1.5 KiB allocated per op throughout.
func stepRuns() []*Run {
	var runs []*Run
	for i := range 12 {
		base := 100e-9
		if i >= 6 {
			base = 130e-9
		}
		r := &Run{Commit: fmt.Sprintf("%040x", 0xabc0+i), Dirty: i == 11, Time: time.Unix(int64(1e9+i*3600), 0)}
		for k := range 5 {
			r.Results = append(r.Results, Result{Pkg: "example.com/h", Name: "Search-2", Iters: 1000,
				Values: []Value{{base * (1 + float64((k*7+i*3)%5-2)/100), "sec/op"}, {1536, "B/op"}}})
		}
		runs = append(runs, r)
	}
	return runs
}

func parsePage(t *testing.T, p Page) (string, *html.Node) {
	t.Helper()
	var b bytes.Buffer
	if err := WritePage(&b, p); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(b.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	return b.String(), doc
}

// find returns the elements named tag whose class attribute is class ("":
// any), in document order.
func find(n *html.Node, tag, class string) []*html.Node {
	var out []*html.Node
	for c := range n.Descendants() {
		if c.Type == html.ElementNode && c.Data == tag && (class == "" || attr(c, "class") == class) {
			out = append(out, c)
		}
	}
	return out
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The change point the history finds is drawn between the last commit
// before it and its own commit, labelled with the medians before and after.
func TestPageChangePointMarker(t *testing.T) {
	hs := Histories(stepRuns(), "BenchmarkSearch", "sec/op", 0.01, 199)
	if len(hs) != 1 || !hs[0].Points[6].ChangePoint {
		t.Fatalf("the history has no change point at commit 6: %+v", hs)
	}
	_, doc := parsePage(t, Page{Title: "history", Histories: hs})
	svgs := find(doc, "svg", "trend")
	if len(svgs) != 1 {
		t.Fatalf("%d trend charts; want 1", len(svgs))
	}
	marks := find(svgs[0], "g", "cp")
	if len(marks) != 1 {
		t.Fatalf("%d change point markers; want 1", len(marks))
	}
	if c := attr(marks[0], "data-commit"); c != Short(hs[0].Points[6].Commit) {
		t.Errorf("the marker is at commit %s; want %s", c, Short(hs[0].Points[6].Commit))
	}
	circles := find(svgs[0], "circle", "")
	if len(circles) != 12 {
		t.Fatalf("%d points; want 12", len(circles))
	}
	x := num(t, attr(find(marks[0], "line", "")[0], "x1"))
	if x5, x6 := num(t, attr(circles[5], "cx")), num(t, attr(circles[6], "cx")); !(x5 < x && x < x6) {
		t.Errorf("the marker at x=%g is not between commit 5 (%g) and commit 6 (%g)", x, x5, x6)
	}
	label := find(marks[0], "text", "")[0].FirstChild.Data
	if want := FormatValue(100e-9, "sec/op") + " → " + FormatValue(130e-9, "sec/op"); label != want {
		t.Errorf("the marker's label is %q; want %q", label, want)
	}
	// Medians grow, so the later point is drawn higher (smaller y).
	if y0, y11 := num(t, attr(circles[0], "cy")), num(t, attr(circles[11], "cy")); y11 >= y0 {
		t.Errorf("130 ns drawn at y=%g, not above 100 ns at y=%g", y11, y0)
	}
	xt := find(svgs[0], "text", "xtick")
	if len(xt) != 12 || xt[0].FirstChild.Data != hs[0].Points[0].Commit[:7] || xt[11].FirstChild.Data != hs[0].Points[11].Commit[:7]+"+" {
		t.Errorf("x labels: want the 12 short hashes, the dirty one marked +")
	}
}

// Values are formatted as the text output formats them, in their unit.
func TestPageUnits(t *testing.T) {
	hs := Histories(stepRuns(), "Search", "", 0.01, 199)
	if len(hs) != 2 {
		t.Fatalf("%d histories; want sec/op and B/op", len(hs))
	}
	_, doc := parsePage(t, Page{Histories: hs})
	svgs := find(doc, "svg", "trend")
	if len(svgs) != 2 {
		t.Fatalf("%d charts; want 2", len(svgs))
	}
	for i, h := range hs {
		var ticks []string
		for _, n := range find(svgs[i], "text", "ytick") {
			ticks = append(ticks, n.FirstChild.Data)
		}
		// The first point's tooltip holds the value as WriteHistory prints it.
		tip := find(svgs[i], "title", "")
		var point string
		for _, n := range tip {
			if n.Parent.Data == "circle" {
				point = n.FirstChild.Data
				break
			}
		}
		want := FormatValue(h.Points[0].Summary.Center, h.Unit) + " " + h.Unit
		if !strings.Contains(point, want) {
			t.Errorf("%s: the first point's tooltip %q lacks %q", h.Unit, point, want)
		}
		if len(ticks) != 5 {
			t.Errorf("%s: y ticks %q", h.Unit, ticks)
		}
		for _, tk := range ticks {
			suffix := map[string]string{"sec/op": "n", "B/op": "Ki"}[h.Unit]
			if !strings.HasSuffix(tk, suffix) {
				t.Errorf("%s: y tick %q is not scaled as benchstat scales it (…%s)", h.Unit, tk, suffix)
			}
		}
	}
}

// A benchmark named to inject a script does not, and a flame graph
// document reaches its iframe whole.
func TestPageEscapes(t *testing.T) {
	evil := "Bad<script>alert(1)</script>&\"'"
	s := Series{Pkg: "example.com/<b>", Name: evil, Unit: "sec/op"}
	flame := `<!DOCTYPE html><html><body><div id="x" title="a&quot;b">&lt;</div><script>var a = "</p>";</script></body></html>`
	rep := &Report{Runs: []RunInfo{{Commit: "<c>"}, {Commit: "d"}},
		Deltas:       []Delta{{Series: s, Base: Summary{1, 1, 1, 6}, New: Summary{2, 2, 2, 6}, Significant: true, Change: 1, Regression: true}},
		Explanations: []*Explanation{{Series: s, CPU: []Growth{{Function: "f<script>", Base: 1, New: 2}}, Profiles: []string{"<p>.pprof"}}},
	}
	h := History{Series: s, Points: []Point{{Commit: "<script>", Summary: Summary{1, 1, 1, 6}}}}
	page, doc := parsePage(t, Page{Title: evil, Report: rep, Histories: []History{h}, Flames: []string{flame}})
	if strings.Contains(strings.ToLower(page), "<script") || len(find(doc, "script", "")) != 0 {
		t.Errorf("the page has a script element:\n%s", page)
	}
	if n := len(find(doc, "b", "")) + len(find(doc, "c", "")); n != 0 {
		t.Errorf("%d elements were injected by names", n)
	}
	codes := map[string]bool{}
	for _, c := range find(doc, "code", "") {
		codes[c.FirstChild.Data] = true
	}
	if !codes["<p>.pprof"] || !codes["<c>"] {
		t.Errorf("a profile's or a commit's name is not shown as text: %v", codes)
	}
	frames := find(doc, "iframe", "flame")
	if len(frames) != 1 || attr(frames[0], "srcdoc") != flame {
		t.Errorf("the iframe's document is not the flame graph's: %q", attr(frames[0], "srcdoc"))
	}
	rows := find(doc, "tr", "regression")
	if len(rows) != 1 || rows[0].FirstChild.FirstChild.Data != s.Pkg+"."+evil {
		t.Errorf("the regression's row does not show its name as text")
	}
	if title := find(doc, "title", "")[0].FirstChild.Data; title != evil {
		t.Errorf("title %q", title)
	}
}

// A series that is zero throughout (no allocation) and a commit with too
// few samples for an interval still make a chart with numbers.
func TestPageZeroSeries(t *testing.T) {
	inf := math.Inf(1)
	h := History{Series: Series{Pkg: "p", Name: "X-2", Unit: "B/op"}, Points: []Point{
		{Commit: "a", Summary: Summary{0, 0, 0, 6}}, {Commit: "b", Summary: Summary{0, -inf, inf, 2}}}}
	page, doc := parsePage(t, Page{Histories: []History{h}})
	if strings.Contains(page, "NaN") || strings.Contains(page, "Inf") {
		t.Errorf("the chart has NaN or Inf coordinates")
	}
	if ticks := find(doc, "text", "ytick"); len(ticks) != 5 || ticks[0].FirstChild.Data != FormatValue(0, "B/op") {
		t.Errorf("y ticks of a zero series: want 5 from %s", FormatValue(0, "B/op"))
	}
	if n := len(find(doc, "line", "ci")); n != 1 {
		t.Errorf("%d whiskers; want 1, none for the unbounded interval", n)
	}
}

// The off-CPU growth of a regression is on the page, or why it is not.
func TestPageOffCPU(t *testing.T) {
	s := Series{Pkg: "example.com/x", Name: "BenchmarkWait", Unit: "sec/op"}
	for _, skipped := range []string{"", "needs root"} {
		ex := &Explanation{Series: s, CPU: []Growth{{Function: "example.com/x.spin", Base: 1, New: 2}}}
		if skipped == "" {
			ex.OffCPU = []Growth{{Function: "example.com/x.wait", Base: 0, New: 1e6}}
		} else {
			ex.OffCPUSkipped = skipped
		}
		rep := &Report{Runs: []RunInfo{{Commit: "a"}, {Commit: "b"}}, Explanations: []*Explanation{ex}}
		page, doc := parsePage(t, Page{Title: "t", Report: rep})
		fns := map[string]bool{}
		for _, c := range find(doc, "td", "fn") {
			fns[c.FirstChild.Data] = true
		}
		if skipped == "" && (!fns["example.com/x.wait"] || !strings.Contains(page, "off-CPU time")) {
			t.Errorf("the off-CPU growth of example.com/x.wait is not on the page: %v", fns)
		}
		if skipped != "" && (fns["example.com/x.wait"] || !strings.Contains(page, "Not recorded: needs root.")) {
			t.Errorf("the page does not say why there is no off-CPU growth")
		}
	}
}
