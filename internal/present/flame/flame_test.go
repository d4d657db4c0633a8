package flame

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/profile"
)

// treeJSON is the data embedded in the page.
func treeJSON(t *testing.T, tr *Tree) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := writeJSON(&b, tr, pageInfo{Title: "test <profile>", Subtitle: "sub", Weight: "wall"}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// embeddedJSON extracts the tree data from a page.
func embeddedJSON(t *testing.T, page string) string {
	t.Helper()
	const open = `<script type="application/json" id="flame-data">`
	i := strings.Index(page, open)
	j := strings.Index(page[i+len(open):], "</script>")
	if i < 0 || j < 0 {
		t.Fatal("page has no embedded data")
	}
	return page[i+len(open) : i+len(open)+j]
}

func TestTreeGolden(t *testing.T) {
	p := testProfile()
	checkGolden(t, "tree.json", treeJSON(t, BuildTree(p, Options{})))
	checkGolden(t, "tree-perthread.json", treeJSON(t, BuildTree(p, Options{PerThread: true})))
	before := testProfile()
	before.Duration = 2 * time.Second
	before.Samples = before.Samples[:4]
	checkGolden(t, "tree-diff.json", treeJSON(t, BuildDiffTree(before, p, Options{})))
}

func TestHTMLEmbedsTree(t *testing.T) {
	p := testProfile()
	var page bytes.Buffer
	if err := WriteHTML(&page, p, Options{Title: "test <profile>"}); err != nil {
		t.Fatal(err)
	}
	s := page.String()
	data := embeddedJSON(t, s)
	var want bytes.Buffer
	writeJSON(&want, BuildTree(p, Options{}), pageInfo{Title: "test <profile>", Subtitle: subtitle(p, BuildTree(p, Options{})), Weight: "wall"})
	if data != want.String() {
		t.Errorf("embedded data differs from writeJSON's")
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		t.Fatalf("embedded data is not JSON: %v", err)
	}
	// Self-contained: no URL the browser would fetch.
	for _, bad := range []string{"http://", "https://", "src=", "href=", "@import", "url("} {
		if strings.Contains(s, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	if strings.Count(s, "</script>") != 2 || !strings.Contains(s, "Content-Security-Policy") {
		t.Error("page structure: want two scripts and a CSP")
	}
	if strings.Contains(data, "<") {
		t.Error("embedded data contains '<'")
	}
}

func TestSVGGolden(t *testing.T) {
	p := testProfile()
	for _, c := range []struct {
		name string
		opt  Options
	}{
		{"flame-wall.svg", Options{Title: "test <profile>"}},
		{"flame-offcpu-perthread.svg", Options{Weight: present.OffCPU, PerThread: true, Width: 800}},
	} {
		var b bytes.Buffer
		if err := WriteSVG(&b, p, c.opt); err != nil {
			t.Fatal(err)
		}
		checkXML(t, b.Bytes())
		checkGolden(t, c.name, b.Bytes())
	}
}

// checkXML checks that b is well-formed XML.
func checkXML(t *testing.T, b []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(b))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
	}
}

func TestTreeTotals(t *testing.T) {
	p := testProfile()
	tr := BuildTree(p, Options{MinWidth: -1})
	if got, want := tr.Root.Value, Values(p.TotalByState()); got != want {
		t.Errorf("root = %v, want the profile's totals %v", got, want)
	}
	// Children never exceed their parent, under every state; inlined
	// frames come caller first.
	var names []string
	tr.Root.Walk(func(n *Node) {
		var sum Values
		for _, c := range n.Children {
			for s := range sum {
				sum[s] += c.Value[s]
			}
			if c.Depth != n.Depth+1 {
				t.Errorf("%s: depth %d under depth %d", c.Name, c.Depth, n.Depth)
			}
		}
		for s := range sum {
			if sum[s] > n.Value[s] {
				t.Errorf("%s: children sum %v > %v", n.Name, sum, n.Value)
			}
		}
		names = append(names, strings.Repeat(" ", n.Depth)+n.Name)
	})
	got := strings.Join(names, "\n")
	for _, want := range []string{"  serve\n   handle\n    read", "  fib\n   fib\n    fib", "  server+0x1400"} {
		if !strings.Contains(got, want) {
			t.Errorf("tree lacks %q:\n%s", want, got)
		}
	}
}

func TestTreeFocus(t *testing.T) {
	p := testProfile()
	tr := BuildTree(p, Options{Focus: regexp.MustCompile(`^read$`)})
	want := 400 + 250 + 350
	if got := tr.Root.Value.Wall(); got != int64(want)*int64(time.Millisecond) {
		t.Errorf("focused wall = %v, want %dms", time.Duration(got), want)
	}
}

func TestTreeDepthCap(t *testing.T) {
	p := testProfile()
	tr := BuildTree(p, Options{MaxDepth: 2})
	tr.Root.Walk(func(n *Node) {
		if n.Depth > 2 {
			t.Errorf("%s at depth %d > 2", n.Name, n.Depth)
		}
	})
	if tr.Truncated == 0 {
		t.Error("no stack reported as cut")
	}
	if got, want := tr.Root.Value, Values(p.TotalByState()); got != want {
		t.Errorf("root = %v, want %v: cutting stacks must keep time", got, want)
	}
}

func TestTreeMinWidth(t *testing.T) {
	p := testProfile()
	// io_schedule is 250ms of 2000ms wall, 0 on-CPU, 250 of 1350ms off-CPU.
	tr := BuildTree(p, Options{MinWidth: 0.2})
	found := false
	tr.Root.Walk(func(n *Node) { found = found || n.Name == "io_schedule" })
	if found {
		t.Error("io_schedule (12.5% of wall, 18.5% of off-CPU) kept under a 20% threshold")
	}
	// A frame narrow in wall but wide in on-CPU time stays.
	tr = BuildTree(p, Options{MinWidth: 0.2})
	found = false
	tr.Root.Walk(func(n *Node) { found = found || n.Name == "std::vector<int>::push_back<&&>()" })
	if !found {
		t.Error("push_back (7.5% of wall but 23% of on-CPU) dropped under a 20% threshold")
	}
}

// bigProfile has n samples of random deep stacks over a few thousand
// functions, in every state.
func bigProfile(n int) *profile.Profile {
	r := rand.New(rand.NewPCG(1, 2))
	exe := &profile.Mapping{ID: 1, File: "/bin/big", Start: 0x1000, Limit: 0x1000000}
	const funcs = 3000
	locs := make([]*profile.Location, funcs)
	for i := range locs {
		locs[i] = &profile.Location{ID: uint64(i + 1), Mapping: exe, Address: uint64(0x1000 + 16*i),
			Frames: []profile.Frame{{Function: fmt.Sprintf("pkg%d.(*Type%d).Method%d", i%37, i%101, i)}}}
	}
	p := &profile.Profile{Duration: 10 * time.Second, Mappings: []*profile.Mapping{exe}, Locs: locs}
	for i := 0; i < n; i++ {
		depth := 5 + r.IntN(60)
		st := make([]*profile.Location, depth)
		f := r.IntN(20) // few roots, then a skewed walk down a call graph
		for d := depth - 1; d >= 0; d-- {
			st[d] = locs[f]
			f = (f*7 + 1 + int(r.ExpFloat64()*3)) % funcs
		}
		p.Samples = append(p.Samples, &profile.Sample{Stack: st, PID: 1, TID: 1 + r.IntN(8), Thread: "t",
			State: profile.State(r.IntN(int(profile.NumStates))), Value: int64(1 + r.IntN(20000000))})
	}
	return p
}

func TestMillionSamplesBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a million-sample profile")
	}
	p := bigProfile(1_000_000)
	start := time.Now()
	var b bytes.Buffer
	if err := WriteHTML(&b, p, Options{}); err != nil {
		t.Fatal(err)
	}
	html := b.Len()
	t.Logf("HTML: %d bytes in %v", html, time.Since(start))
	b.Reset()
	if err := WriteSVG(&b, p, Options{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("SVG: %d bytes", b.Len())
	const limit = 8 << 20
	if html > limit || b.Len() > limit {
		t.Errorf("HTML %d bytes, SVG %d bytes: want both under %d", html, b.Len(), limit)
	}
	tr := BuildTree(p, Options{})
	if tr.Nodes > DefaultMaxNodes {
		t.Errorf("%d nodes kept, want at most %d", tr.Nodes, DefaultMaxNodes)
	}
	if got, want := tr.Root.Value, Values(p.TotalByState()); got != want {
		t.Errorf("root = %v, want %v", got, want)
	}
}

func TestDeterministic(t *testing.T) {
	p := bigProfile(20000)
	var a, b bytes.Buffer
	WriteHTML(&a, p, Options{})
	WriteHTML(&b, p, Options{})
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two renderings of one profile differ")
	}
}
