package present

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/wallprof/wallprof/internal/profile"
)

// DefaultNodeFraction is the share of the total wall time under which a
// call-tree node is hidden when ReportOptions.NodeFraction is 0, as pprof's
// -nodefraction default.
const DefaultNodeFraction = 0.005

// Tree is the top-down call tree of a profile: each path from a root is a
// stack, outermost frame first, and each node holds the time of the samples
// whose stacks begin with that path.
type Tree struct {
	TotalNS      int64   `json:"total_ns"`      // sampled wall time
	NodeFraction float64 `json:"node_fraction"` // nodes under this share of total_ns are hidden
	HiddenNodes  int     `json:"hidden_nodes"`  // nodes hidden, with their descendants
	Roots        []*Node `json:"roots"`         // sorted like Node.Children
}

// Node is one function on one call path. Times are cumulative (the node
// and its callees) except FlatNS, the wall time with the node at the leaf.
// Children are sorted by wall time, longest first, then by name.
type Node struct {
	Name        string  `json:"name"`
	WallNS      int64   `json:"wall_ns"`
	WallPercent float64 `json:"wall_percent"` // of Tree.TotalNS
	CPUNS       int64   `json:"cpu_ns"`
	OffCPUNS    int64   `json:"offcpu_ns"`
	FlatNS      int64   `json:"flat_ns"`
	Children    []*Node `json:"children,omitempty"`

	index map[string]*Node
}

// NewTree builds the call tree of p, hiding nodes whose wall time is under
// fraction of the total (DefaultNodeFraction if 0, none if negative).
func NewTree(p *profile.Profile, fraction float64) *Tree {
	if fraction == 0 {
		fraction = DefaultNodeFraction
	}
	root := &Node{}
	var names []string
	for _, s := range p.Samples {
		if s.Value == 0 {
			continue
		}
		names = frameNames(names[:0], s.Stack)
		if len(names) == 0 {
			names = append(names, "[no stack]")
		}
		var cpu, off int64
		if s.State == profile.OnCPU {
			cpu = s.Value
		} else {
			off = s.Value
		}
		root.WallNS += s.Value
		n := root
		for i := len(names) - 1; i >= 0; i-- {
			n = n.child(names[i])
			n.WallNS += s.Value
			n.CPUNS += cpu
			n.OffCPUNS += off
		}
		n.FlatNS += s.Value
	}
	t := &Tree{TotalNS: root.WallNS, NodeFraction: max(fraction, 0)}
	t.Roots = t.finish(root.Children, fraction)
	return t
}

func (n *Node) child(name string) *Node {
	if c := n.index[name]; c != nil {
		return c
	}
	if n.index == nil {
		n.index = map[string]*Node{}
	}
	c := &Node{Name: name}
	n.index[name] = c
	n.Children = append(n.Children, c)
	return c
}

// finish sorts nodes, fills in percentages and prunes small nodes.
func (t *Tree) finish(nodes []*Node, fraction float64) []*Node {
	kept := nodes[:0]
	for _, n := range nodes {
		n.index = nil
		if fraction > 0 && float64(n.WallNS) < fraction*float64(t.TotalNS) {
			t.HiddenNodes += countNodes(n)
			continue
		}
		n.WallPercent = pct(n.WallNS, t.TotalNS)
		n.Children = t.finish(n.Children, fraction)
		kept = append(kept, n)
	}
	sort.Slice(kept, func(i, j int) bool {
		if kept[i].WallNS != kept[j].WallNS {
			return kept[i].WallNS > kept[j].WallNS
		}
		return kept[i].Name < kept[j].Name
	})
	if len(kept) == 0 {
		return nil
	}
	return kept
}

func countNodes(n *Node) int {
	c := 1
	for _, ch := range n.Children {
		c += countNodes(ch)
	}
	return c
}

// writeTree prints t indented two spaces per level, like pprof's tree
// views, with the cumulative wall, on-CPU and off-CPU time of each node.
func writeTree(w io.Writer, t *Tree) {
	shown := "every node shown"
	if t.NodeFraction > 0 {
		hidden := "none hidden"
		if t.HiddenNodes > 0 {
			hidden = fmt.Sprintf("%d hidden", t.HiddenNodes)
		}
		shown = fmt.Sprintf("nodes under %s of it: %s", fmtPct(100*t.NodeFraction), hidden)
	}
	fmt.Fprintf(w, "call tree by wall time: total %s; %s\n", fmtDur(t.TotalNS), shown)
	tb := &table{
		header: []string{"wall", "wall%", "on-CPU", "off-CPU", "flat", "function"},
		right:  []bool{true, true, true, true, true, false},
	}
	var walk func(nodes []*Node, depth int)
	walk = func(nodes []*Node, depth int) {
		for _, n := range nodes {
			tb.add(fmtDur(n.WallNS), fmtPct(n.WallPercent), fmtDur(n.CPUNS), fmtDur(n.OffCPUNS), fmtDur(n.FlatNS),
				strings.Repeat("  ", depth)+oneLine(n.Name))
			walk(n.Children, depth+1)
		}
	}
	walk(t.Roots, 0)
	tb.write(w)
}
