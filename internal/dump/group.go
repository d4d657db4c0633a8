package dump

import (
	"encoding/binary"
	"sort"

	"github.com/wallprof/wallprof/internal/collect"
	"github.com/wallprof/wallprof/internal/goruntime/goroutines"
	"github.com/wallprof/wallprof/internal/profile"
)

// symbolizer names the addresses of the target (collect.StackSymbolizer).
type symbolizer interface {
	Stack(t *collect.ThreadSnapshot) (kernel, user []*profile.Location)
	User(pid int, addr uint64, exact bool) *profile.Location
}

// buildGo groups the goroutines of snap (nowNs: CLOCK_MONOTONIC now, the
// runtime's clock, for their waitsince). A running goroutine's saved
// registers are stale: its stack is its thread's, from threads.
func buildGo(pid int, version string, snap *goroutines.Snapshot, threads []collect.ThreadSnapshot, sym symbolizer, opts Options, nowNs uint64) *Go {
	out := &Go{Version: version, Dropped: snap.Dropped, Groups: []Group{}}
	byTID := map[int]*collect.ThreadSnapshot{}
	for i := range threads {
		byTID[threads[i].TID] = &threads[i]
	}
	groups := map[string]*Group{}
	var order []*Group
	var key []byte
	for i := range snap.Goroutines {
		g := &snap.Goroutines[i]
		if g.System {
			out.System++
			continue
		}
		out.Goroutines++
		var stack []*profile.Location
		fromThread := false
		if len(g.Stack) > 0 {
			for j, pc := range g.Stack {
				// Stack[0] is where it resumes (an exact pc); the
				// others are return addresses.
				stack = append(stack, sym.User(pid, pc, j == 0))
			}
		} else if t := byTID[g.TID]; t != nil && g.TID != 0 {
			_, stack = sym.Stack(t)
			fromThread = true
		}
		key = key[:0]
		if opts.All {
			key = binary.LittleEndian.AppendUint64(key, g.ID)
		}
		key = append(key, g.Status.String()...)
		key = append(key, 0)
		key = append(key, g.WaitReason...)
		key = append(key, 0)
		key = binary.LittleEndian.AppendUint64(key, g.GoPC)
		for _, l := range g.Labels {
			key = append(key, l.Key...)
			key = append(key, 0)
			key = append(key, l.Value...)
			key = append(key, 0)
		}
		key = append(key, 0)
		for _, l := range stack {
			key = binary.LittleEndian.AppendUint64(key, l.ID)
		}
		gr := groups[string(key)]
		if gr == nil {
			gr = &Group{State: g.Status.String(), WaitReason: g.WaitReason, StackFromThread: fromThread,
				Frames: framesOf(stack, false), CreatedBy: creator(pid, g, sym)}
			if gr.Frames == nil {
				gr.Frames = []Frame{}
			}
			if len(g.Labels) > 0 {
				gr.Labels = map[string]string{}
				for _, l := range g.Labels {
					gr.Labels[l.Key] = l.Value
				}
			}
			groups[string(key)] = gr
			order = append(order, gr)
		}
		gr.Count++
		gr.IDs = append(gr.IDs, g.ID)
		if g.TID != 0 {
			gr.Threads = append(gr.Threads, g.TID)
		}
		if g.WaitSince > 0 && uint64(g.WaitSince) <= nowNs {
			w := int64(nowNs - uint64(g.WaitSince))
			if gr.WaitMinNs == nil {
				lo, hi := w, w
				gr.WaitMinNs, gr.WaitMaxNs = &lo, &hi
			} else {
				*gr.WaitMinNs = min(*gr.WaitMinNs, w)
				*gr.WaitMaxNs = max(*gr.WaitMaxNs, w)
			}
		}
	}
	for _, gr := range order {
		sort.Slice(gr.IDs, func(i, j int) bool { return gr.IDs[i] < gr.IDs[j] })
		sort.Ints(gr.Threads)
		out.Groups = append(out.Groups, *gr)
	}
	if opts.All {
		// One goroutine each: by id, as the runtime lists them.
		sort.Slice(out.Groups, func(i, j int) bool { return out.Groups[i].IDs[0] < out.Groups[j].IDs[0] })
	} else {
		sort.SliceStable(out.Groups, func(i, j int) bool { return less(&out.Groups[i], &out.Groups[j]) })
	}
	return out
}

// less orders groups: largest first, then by state, wait reason, first
// function and first goroutine id.
func less(a, b *Group) bool {
	if a.Count != b.Count {
		return a.Count > b.Count
	}
	if a.State != b.State {
		return a.State < b.State
	}
	if a.WaitReason != b.WaitReason {
		return a.WaitReason < b.WaitReason
	}
	if fa, fb := firstFunc(a), firstFunc(b); fa != fb {
		return fa < fb
	}
	return len(a.IDs) > 0 && len(b.IDs) > 0 && a.IDs[0] < b.IDs[0]
}

func firstFunc(g *Group) string {
	if len(g.Frames) == 0 {
		return ""
	}
	return g.Frames[0].Function
}

// creator names the go statement that created g (nil for the main
// goroutine, or when unknown).
func creator(pid int, g *goroutines.Goroutine, sym symbolizer) *Creator {
	if g.GoPC == 0 {
		return nil
	}
	l := sym.User(pid, g.GoPC, false)
	if len(l.Frames) == 0 {
		return nil
	}
	f := l.Frames[0]
	if g.ID == 1 { // the main goroutine: runtime.Stack names no creator
		return nil
	}
	return &Creator{Function: f.Function, File: f.File, Line: f.Line, Goroutine: g.ParentID}
}
