package flame

import (
	"bufio"
	"encoding/json"
	"io"
	"strconv"

	"github.com/wallprof/wallprof/internal/profile"
)

// JSONVersion is the version of the tree format embedded in the HTML page.
const JSONVersion = 1

// pageInfo is what the page shows besides the tree.
type pageInfo struct {
	Title    string
	Subtitle string
	Weight   string
	Icicle   bool // start with the root at the top
}

// writeJSON writes t in the compact form the page's script reads:
//
//	{"version":1, "title":..., "subtitle":..., "weight":"wall",
//	 ("icicle":true,) "diff":false, "duration":NS, "beforeDuration":NS,
//	 "states":["on-cpu",...], "samples":N, "nodes":N, "dropped":N,
//	 "truncated":N, "minWidth":F,
//	 "names":["all",...],
//	 "tree":[NAME,NCHILDREN,V0..V4(,B0..B4), ...]}
//
// tree lists the nodes in preorder; NAME indexes names (in order of first
// use), NCHILDREN counts the node's children, V are its inclusive
// nanoseconds per state (in profile.State order) and B, in a diff tree, the
// same in the "before" profile. One name and one node per line, so golden
// files diff well. Strings are escaped for HTML (no '<', '>' or '&').
func writeJSON(w io.Writer, t *Tree, info pageInfo) error {
	bw := bufio.NewWriter(w)
	str := func(s string) {
		b, _ := json.Marshal(s) // escapes <, > and & as \u003c...
		bw.Write(b)
	}
	num := func(x int64) { bw.WriteString(strconv.FormatInt(x, 10)) }
	bw.WriteString(`{"version":`)
	num(JSONVersion)
	bw.WriteString(`,"title":`)
	str(info.Title)
	bw.WriteString(`,"subtitle":`)
	str(info.Subtitle)
	bw.WriteString(`,"weight":`)
	str(info.Weight)
	if info.Icicle {
		bw.WriteString(`,"icicle":true`)
	}
	bw.WriteString(`,"diff":` + strconv.FormatBool(t.Diff))
	bw.WriteString(`,"duration":`)
	num(int64(t.Duration))
	bw.WriteString(`,"beforeDuration":`)
	num(int64(t.BeforeDuration))
	bw.WriteString(`,"states":[`)
	for s := profile.State(0); s < profile.NumStates; s++ {
		if s > 0 {
			bw.WriteByte(',')
		}
		str(s.String())
	}
	bw.WriteString(`],"samples":`)
	num(int64(t.Samples))
	bw.WriteString(`,"nodes":`)
	num(int64(t.Nodes))
	bw.WriteString(`,"dropped":`)
	num(int64(t.Dropped))
	bw.WriteString(`,"truncated":`)
	num(int64(t.Truncated))
	bw.WriteString(`,"minWidth":` + strconv.FormatFloat(t.MinWidth, 'g', -1, 64))

	names := map[string]int{}
	var order []string
	t.Root.Walk(func(n *Node) {
		if _, ok := names[n.Name]; !ok {
			names[n.Name] = len(order)
			order = append(order, n.Name)
		}
	})
	bw.WriteString(",\n\"names\":[")
	for i, n := range order {
		if i > 0 {
			bw.WriteString(",\n")
		}
		str(n)
	}
	bw.WriteString("],\n\"tree\":[")
	first := true
	t.Root.Walk(func(n *Node) {
		if !first {
			bw.WriteString(",\n")
		}
		first = false
		num(int64(names[n.Name]))
		bw.WriteByte(',')
		num(int64(len(n.Children)))
		for _, v := range n.Value {
			bw.WriteByte(',')
			num(v)
		}
		if t.Diff {
			for _, v := range n.Before {
				bw.WriteByte(',')
				num(v)
			}
		}
	})
	bw.WriteString("]}\n")
	return bw.Flush()
}
