// Package flame draws wallprof profiles as flame graphs: a self-contained
// interactive HTML page (WriteHTML), a standalone interactive SVG (WriteSVG)
// and a differential flame graph of two profiles (WriteDiffHTML).
//
// Contract:
//   - Every output is built from one merged call tree (BuildTree): frames
//     from the root to the leaf, inlined functions expanded caller first,
//     and per node the inclusive time in each scheduler state, so one page
//     can switch between the wall, on-CPU and off-CPU weights.
//   - Output is bounded: a node is kept only when, under at least one of the
//     three weights, it is at least Options.MinWidth of that weight's total;
//     stacks deeper than Options.MaxDepth are cut there; when more than
//     Options.MaxNodes nodes would remain, the width threshold is doubled
//     until they fit. Dropped time stays in the callers' totals (it shows
//     as their self time) and the page says how many frames were dropped.
//   - Output is deterministic: children are sorted by name and colours
//     derive from a hash of the frame's name, so the same input gives the
//     same bytes.
//   - Pages make no network request: scripts, styles and data are inline,
//     and a Content-Security-Policy forbids anything else.
package flame

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/profile"
)

// Defaults for the zero values of Options.
const (
	DefaultMinWidth = 0.0001 // 0.01% of the total
	DefaultMaxDepth = 512
	DefaultMaxNodes = 60000
	DefaultSVGWidth = 1200
)

// Options configures the flame graphs.
type Options struct {
	// Title is shown above the graph (default: "Flame graph" and the
	// profile's command).
	Title string
	// Weight is the weight shown first (the HTML page can switch) or the
	// only weight drawn (SVG): Wall (the zero value), CPU or OffCPU.
	Weight present.Weight
	// MinWidth is the smallest node kept, as a fraction of the total
	// (0: DefaultMinWidth; negative: keep every node).
	MinWidth float64
	// MaxDepth is the deepest level kept below the root (0: DefaultMaxDepth).
	MaxDepth int
	// MaxNodes bounds the number of nodes kept (0: DefaultMaxNodes;
	// negative: no bound).
	MaxNodes int
	// Icicle starts the HTML page with the root at the top (the page can
	// switch).
	Icicle bool
	// PerThread puts one root frame per thread, "comm-pid/tid".
	PerThread bool
	// Focus, when set, keeps only the samples with a frame whose function
	// name matches it.
	Focus *regexp.Regexp
	// Width is the SVG's width in pixels (0: DefaultSVGWidth).
	Width int
}

func (o Options) minWidth() float64 {
	switch {
	case o.MinWidth == 0:
		return DefaultMinWidth
	case o.MinWidth < 0:
		return 0
	}
	return o.MinWidth
}

func (o Options) maxDepth() int {
	if o.MaxDepth <= 0 {
		return DefaultMaxDepth
	}
	return o.MaxDepth
}

func (o Options) maxNodes() int {
	switch {
	case o.MaxNodes == 0:
		return DefaultMaxNodes
	case o.MaxNodes < 0:
		return int(^uint(0) >> 1)
	}
	return o.MaxNodes
}

// Values is time in nanoseconds per scheduler state.
type Values [profile.NumStates]int64

// Wall is the sum over all states.
func (v *Values) Wall() int64 {
	var s int64
	for _, x := range v {
		s += x
	}
	return s
}

// Blocked is the time in the blocked states.
func (v *Values) Blocked() int64 {
	return v[profile.Sleeping] + v[profile.Disk] + v[profile.Other]
}

// Of is the time counted under weight w.
func (v *Values) Of(w present.Weight) int64 {
	switch w {
	case present.CPU:
		return v[profile.OnCPU]
	case present.OffCPU:
		return v.Wall() - v[profile.OnCPU]
	}
	return v.Wall()
}

// Node is one frame of the merged call tree.
type Node struct {
	Name     string
	Depth    int     // 0 for the root
	Value    Values  // inclusive time
	Before   Values  // inclusive time in the "before" profile (diff trees only)
	Children []*Node // sorted by name
}

// Tree is a merged call tree, root to leaf.
type Tree struct {
	Root *Node // named "all"
	// Diff is set for a tree built by BuildDiffTree: Node.Before holds the
	// first profile's time.
	Diff bool
	// Duration is the recording's length; BeforeDuration the first
	// profile's in a diff tree.
	Duration, BeforeDuration time.Duration
	Samples                  int     // samples counted
	Nodes                    int     // nodes kept, root included
	Dropped                  int     // call paths left out as too narrow (each with its callees)
	Truncated                int     // samples whose stack was cut at MaxDepth
	MinWidth                 float64 // the width threshold finally applied (fraction of the total)
}

// BuildTree merges p's samples into a call tree, bounded as opt says.
func BuildTree(p *profile.Profile, opt Options) *Tree {
	b := newBuilder(opt)
	t := b.build(p)
	t.Duration = p.Duration
	return t
}

// BuildDiffTree merges after's samples into a call tree (its shape and
// bounds come from after alone) and records, for each of its nodes, the
// time the same call path had in before. Time before spent in call paths
// that the tree does not have counts in their nearest caller that it has.
func BuildDiffTree(before, after *profile.Profile, opt Options) *Tree {
	b := newBuilder(opt)
	t := b.build(after)
	b.addBefore(before, t)
	t.Diff = true
	t.Duration, t.BeforeDuration = after.Duration, before.Duration
	return t
}

// builder merges samples level by level: at each depth it groups the
// samples still in play by (parent node, function), keeps the groups wide
// enough and lets the samples of the others go. Memory and time stay
// proportional to what is kept plus one level's groups, even when every
// sample's stack is unique.
type builder struct {
	opt       Options
	names     []string
	nameIdx   map[string]int32
	locFrames map[*profile.Location][]int32 // outermost first
	noStack   int32
}

func newBuilder(opt Options) *builder {
	b := &builder{opt: opt, nameIdx: map[string]int32{}, locFrames: map[*profile.Location][]int32{}}
	b.intern("all")
	b.noStack = b.intern("[no stack]")
	return b
}

func (b *builder) intern(name string) int32 {
	if i, ok := b.nameIdx[name]; ok {
		return i
	}
	i := int32(len(b.names))
	b.names = append(b.names, name)
	b.nameIdx[name] = i
	return i
}

// path returns s's frames, root first, as interned names.
func (b *builder) path(dst []int32, s *profile.Sample) []int32 {
	if b.opt.PerThread {
		dst = append(dst, b.intern(threadFrame(s)))
	}
	for i := len(s.Stack) - 1; i >= 0; i-- {
		loc := s.Stack[i]
		if loc == nil {
			continue
		}
		fr, ok := b.locFrames[loc]
		if !ok {
			fr = b.frames(loc)
			b.locFrames[loc] = fr
		}
		dst = append(dst, fr...)
	}
	if len(s.Stack) == 0 {
		dst = append(dst, b.noStack)
	}
	return dst
}

// frames interns the functions of loc, outermost first.
func (b *builder) frames(loc *profile.Location) []int32 {
	if len(loc.Frames) == 0 {
		return []int32{b.intern(loc.UnknownName())}
	}
	out := make([]int32, 0, len(loc.Frames))
	for j := len(loc.Frames) - 1; j >= 0; j-- {
		name := loc.Frames[j].Function
		if name == "" {
			name = "[unknown]"
		}
		out = append(out, b.intern(name))
	}
	return out
}

// cursor is a sample still in play: its path and the node it has reached.
type cursor struct {
	s    *profile.Sample
	off  int32 // start of its path in the shared path buffer
	n    int32 // path length (capped at MaxDepth)
	node *Node
}

// samples returns the samples that count (positive value, known state,
// focused), their paths in one buffer, and how many were cut at MaxDepth.
func (b *builder) samples(p *profile.Profile) ([]cursor, []int32, int) {
	var buf []int32
	var cs []cursor
	var match map[int32]bool
	if b.opt.Focus != nil {
		match = map[int32]bool{}
	}
	maxDepth := b.opt.maxDepth()
	trunc := 0
	for _, s := range p.Samples {
		if s.Value <= 0 || s.State >= profile.NumStates {
			continue
		}
		off := len(buf)
		buf = b.path(buf, s)
		if match != nil && !b.focused(buf[off:], match) {
			buf = buf[:off]
			continue
		}
		n := len(buf) - off
		if n > maxDepth {
			n = maxDepth
			trunc++
			buf = buf[:off+n]
		}
		cs = append(cs, cursor{s: s, off: int32(off), n: int32(n)})
	}
	return cs, buf, trunc
}

// focused reports whether a frame of path matches the focus regexp.
func (b *builder) focused(path []int32, cache map[int32]bool) bool {
	for _, fn := range path {
		m, ok := cache[fn]
		if !ok {
			m = b.opt.Focus.MatchString(b.names[fn])
			cache[fn] = m
		}
		if m {
			return true
		}
	}
	return false
}

// thresholds are the smallest kept values under the wall, on-CPU and
// off-CPU weights.
type thresholds [3]int64

var weights = [3]present.Weight{present.Wall, present.CPU, present.OffCPU}

func newThresholds(total *Values, minW float64) thresholds {
	var th thresholds
	for i, w := range weights {
		th[i] = int64(minW * float64(total.Of(w)))
	}
	return th
}

// wide reports whether v is kept: at least the threshold under one weight.
func (th *thresholds) wide(v *Values) bool {
	for i, w := range weights {
		if x := v.Of(w); x > 0 && x >= th[i] {
			return true
		}
	}
	return false
}

// build makes the bounded tree of p's samples.
func (b *builder) build(p *profile.Profile) *Tree {
	cs, buf, trunc := b.samples(p)
	root := &Node{Name: "all"}
	for i := range cs {
		root.Value[cs[i].s.State] += cs[i].s.Value
		cs[i].node = root
	}
	minW := b.opt.minWidth()
	th := newThresholds(&root.Value, minW)
	t := &Tree{Root: root, Samples: len(cs), Truncated: trunc}
	type key struct {
		parent *Node
		fn     int32
	}
	groups := map[key]*Node{}
	for depth := 0; len(cs) > 0; depth++ {
		clear(groups)
		live := cs[:0]
		for _, c := range cs {
			if int(c.n) > depth {
				live = append(live, c)
			}
		}
		cs = live
		for _, c := range cs {
			k := key{c.node, buf[int(c.off)+depth]}
			g := groups[k]
			if g == nil {
				g = &Node{Name: b.names[k.fn], Depth: depth + 1}
				groups[k] = g
			}
			g.Value[c.s.State] += c.s.Value
		}
		for k, g := range groups {
			if th.wide(&g.Value) {
				k.parent.Children = append(k.parent.Children, g)
			} else {
				groups[k] = nil
				t.Dropped++
			}
		}
		live = cs[:0]
		for _, c := range cs {
			if g := groups[key{c.node, buf[int(c.off)+depth]}]; g != nil {
				c.node = g
				live = append(live, c)
			}
		}
		cs = live
	}
	t.Nodes = sortCount(root)
	for maxNodes := b.opt.maxNodes(); t.Nodes > maxNodes && minW < 1; {
		if minW == 0 {
			minW = 1e-7
		}
		minW *= 2
		th = newThresholds(&root.Value, minW)
		t.Dropped += prune(root, &th)
		t.Nodes = sortCount(root)
	}
	t.MinWidth = minW
	return t
}

// sortCount sorts every node's children by name and counts the nodes.
func sortCount(n *Node) int {
	sort.Slice(n.Children, func(i, j int) bool { return n.Children[i].Name < n.Children[j].Name })
	c := 1
	for _, k := range n.Children {
		c += sortCount(k)
	}
	return c
}

// prune removes the descendants of n below the thresholds and returns how
// many subtrees it removed.
func prune(n *Node, th *thresholds) int {
	dropped := 0
	kept := n.Children[:0]
	for _, c := range n.Children {
		if th.wide(&c.Value) {
			kept = append(kept, c)
			dropped += prune(c, th)
		} else {
			dropped++
		}
	}
	clear(n.Children[len(kept):])
	n.Children = kept
	return dropped
}

// addBefore adds the time of before's samples to Node.Before along each
// sample's path, as far as the path exists in t.
func (b *builder) addBefore(before *profile.Profile, t *Tree) {
	type key struct {
		parent *Node
		fn     string
	}
	kids := map[key]*Node{}
	t.Root.Walk(func(n *Node) {
		for _, c := range n.Children {
			kids[key{n, c.Name}] = c
		}
	})
	cs, buf, _ := b.samples(before)
	for _, c := range cs {
		n := t.Root
		n.Before[c.s.State] += c.s.Value
		for _, fn := range buf[c.off : c.off+c.n] {
			n = kids[key{n, b.names[fn]}]
			if n == nil {
				break
			}
			n.Before[c.s.State] += c.s.Value
		}
	}
}

// threadFrame names a thread's root frame as stackcollapse-perf.pl --tid does.
func threadFrame(s *profile.Sample) string {
	return fmt.Sprintf("%s-%d/%d", strings.ReplaceAll(s.Thread, " ", "_"), s.PID, s.TID)
}

// Walk calls f for n and its descendants, depth first, children in order.
func (n *Node) Walk(f func(*Node)) {
	f(n)
	for _, c := range n.Children {
		c.Walk(f)
	}
}
