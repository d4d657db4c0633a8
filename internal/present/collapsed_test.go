package present

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestCollapsedGolden(t *testing.T) {
	for _, tc := range []struct {
		golden string
		opt    CollapsedOptions
	}{
		{"collapsed-wall.folded", CollapsedOptions{}},
		{"collapsed-cpu.folded", CollapsedOptions{Weight: CPU}},
		{"collapsed-offcpu-states.folded", CollapsedOptions{Weight: OffCPU, States: true}},
		{"collapsed-wall-perthread-states-kernel-ms.folded", CollapsedOptions{PerThread: true, States: true, KernelSuffix: true, Unit: time.Millisecond}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteCollapsed(&b, testProfile(), tc.opt); err != nil {
				t.Fatal(err)
			}
			checkCollapsedSyntax(t, b.String())
			checkGolden(t, tc.golden, b.Bytes())
		})
	}
}

// checkCollapsedSyntax checks the folded format: "frames value" per line,
// sorted, no empty frames.
func checkCollapsedSyntax(t *testing.T, out string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for i, l := range lines {
		sp := strings.LastIndexByte(l, ' ')
		if sp < 0 {
			t.Fatalf("line %q has no value", l)
		}
		if _, err := strconv.ParseInt(l[sp+1:], 10, 64); err != nil {
			t.Errorf("line %q: bad value: %v", l, err)
		}
		for _, f := range strings.Split(l[:sp], ";") {
			if f == "" {
				t.Errorf("line %q has an empty frame", l)
			}
		}
		if i > 0 && lines[i-1] >= l {
			t.Errorf("lines not sorted: %q before %q", lines[i-1], l)
		}
	}
}

func TestCollapsedTotals(t *testing.T) {
	p := testProfile()
	for _, w := range []Weight{Wall, CPU, OffCPU} {
		var want int64
		for _, s := range p.Samples {
			want += w.of(s)
		}
		var b bytes.Buffer
		if err := WriteCollapsed(&b, p, CollapsedOptions{Weight: w}); err != nil {
			t.Fatal(err)
		}
		var got int64
		for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
			v, _ := strconv.ParseInt(l[strings.LastIndexByte(l, ' ')+1:], 10, 64)
			got += v
		}
		if got != want {
			t.Errorf("%v: collapsed total %d, want %d", w, got, want)
		}
	}
}

func TestCollapsedFrameOrder(t *testing.T) {
	var b bytes.Buffer
	if err := WriteCollapsed(&b, testProfile(), CollapsedOptions{Weight: CPU}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	// Root first, inlined callee after its caller, ';' in names replaced.
	for _, want := range []string{
		"main.main;main.fib;main.fib;main.fib 50000000\n",
		"main.main;main.serve;main.handle;std::vector<",
		"main.main;pkg.Map[go:shape] 5000000\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
