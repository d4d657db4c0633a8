package present

import (
	"strings"
	"testing"

	"github.com/wallprof/wallprof/internal/profile"
)

// wallOf sums the wall time of the samples whose stacks hold fn.
func leafNames(p *profile.Profile) map[string]int64 {
	out := map[string]int64{}
	for _, s := range p.Samples {
		names := frameNames(nil, s.Stack)
		out[strings.Join(names, ";")] += s.Value
	}
	return out
}

func TestFilterFocusIgnoreHide(t *testing.T) {
	const ms = 1_000_000
	for _, c := range []struct {
		name                string
		focus, ignore, hide string
		wantTotal           int64
		wantSamples         int
		wantStack           string // a stack (innermost first) that must be present, "" for none
		absent              string // a function no stack may hold
		warnings            int
	}{
		{name: "focus", focus: "fib", wantTotal: 50 * ms, wantSamples: 2, wantStack: "main.fib;main.fib;main.fib;main.main"},
		// Focus matches file names too, like pprof.
		{name: "focus file", focus: `handler\.go`, wantTotal: 410 * ms, wantSamples: 4},
		// And mapping file names: libc.so.6 holds __libc_read and the unknown address.
		{name: "focus mapping", focus: `libc\.so`, wantTotal: 330 * ms, wantSamples: 3},
		{name: "ignore", ignore: "ext4|schedule", wantTotal: 155 * ms, wantSamples: 6, absent: "schedule"},
		// Ignore wins over focus on the same location.
		{name: "ignore beats focus", focus: "main.main", ignore: "main.main", wantTotal: 0, wantSamples: 0, warnings: 1},
		{name: "focus and ignore", focus: "handle", ignore: "schedule", wantTotal: 210 * ms, wantSamples: 3, absent: "schedule"},
		{name: "hide frames", hide: `^main\.(serve|main)$`, wantTotal: 475 * ms, wantSamples: 8,
			wantStack: "schedule;do_syscall_64;__libc_read;main.handle", absent: "main.serve"},
		// Hiding a mapping's file removes its locations, symbolized or not.
		{name: "hide mapping", hide: `kallsyms`, wantTotal: 475 * ms, wantSamples: 8,
			wantStack: "__libc_read;main.handle;main.serve;main.main", absent: "do_syscall_64"},
		// A sample whose every frame is hidden is dropped.
		{name: "hide all", hide: ".", wantTotal: 0, wantSamples: 0},
		{name: "no match", focus: "nothing-like-this", ignore: "nor-this", hide: "nor-that", wantTotal: 0, wantSamples: 0, warnings: 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := testProfile()
			before := leafNames(p)
			f, err := CompileFilter(c.focus, c.ignore, c.hide)
			if err != nil {
				t.Fatal(err)
			}
			q, warnings := f.Apply(p)
			if len(warnings) != c.warnings {
				t.Errorf("warnings %q, want %d", warnings, c.warnings)
			}
			var total int64
			for _, s := range q.Samples {
				total += s.Value
			}
			if total != c.wantTotal || len(q.Samples) != c.wantSamples {
				t.Errorf("kept %d samples, %dms; want %d, %dms", len(q.Samples), total/ms, c.wantSamples, c.wantTotal/ms)
			}
			got := leafNames(q)
			if c.wantStack != "" && got[c.wantStack] == 0 {
				t.Errorf("no stack %q in %v", c.wantStack, got)
			}
			for stack := range got {
				if c.absent != "" && strings.Contains(";"+stack+";", ";"+c.absent+";") {
					t.Errorf("stack %q still holds %s", stack, c.absent)
				}
			}
			for _, l := range q.Locs {
				for _, fr := range l.Frames {
					if c.absent != "" && fr.Function == c.absent && c.hide != "" {
						t.Errorf("Locs still hold a hidden frame %s", c.absent)
					}
				}
			}
			// The input is left as it was.
			if after := leafNames(p); len(after) != len(before) {
				t.Errorf("Apply modified its input")
			}
			if len(p.Samples) != 8 || len(p.Locs[1].Frames) != 2 {
				t.Errorf("Apply modified its input")
			}
		})
	}
}

func TestCompileFilterError(t *testing.T) {
	_, err := CompileFilter("", "a(", "")
	if err == nil || !strings.Contains(err.Error(), "parsing ignore regexp") {
		t.Errorf("err = %v, want a parsing ignore regexp error", err)
	}
	f, err := CompileFilter("", "", "")
	if err != nil || !f.IsZero() {
		t.Errorf("empty expressions: %v %v", f, err)
	}
	p := testProfile()
	if q, w := f.Apply(p); q != p || w != nil {
		t.Errorf("a zero filter changed the profile")
	}
}

// The tree's nodes add up: a node's wall time is its flat time plus its
// children's, and wall = on-CPU + off-CPU.
func TestTreeSums(t *testing.T) {
	tr := NewTree(testProfile(), -1)
	if tr.TotalNS != 475_000_000 || tr.HiddenNodes != 0 {
		t.Fatalf("total %d hidden %d", tr.TotalNS, tr.HiddenNodes)
	}
	var check func(n *Node)
	check = func(n *Node) {
		sum := n.FlatNS
		for _, c := range n.Children {
			sum += c.WallNS
			check(c)
		}
		if sum != n.WallNS || n.CPUNS+n.OffCPUNS != n.WallNS {
			t.Errorf("%s: wall %d, flat+children %d, cpu+offcpu %d", n.Name, n.WallNS, sum, n.CPUNS+n.OffCPUNS)
		}
	}
	for _, r := range tr.Roots {
		check(r)
	}
	if len(tr.Roots) != 1 || tr.Roots[0].Name != "main.main" || tr.Roots[0].WallPercent != 100 {
		t.Errorf("roots = %+v", tr.Roots)
	}
}
