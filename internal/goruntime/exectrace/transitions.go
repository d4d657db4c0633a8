package exectrace

import (
	"strings"
	"time"

	"golang.org/x/exp/trace"
)

// blockCategory maps the runtime's wait reason to the categories a user
// asks about.
func blockCategory(reason string) string {
	switch reason {
	case "chan receive", "chan send":
		return "channel"
	case "select":
		return "select"
	case "sync":
		return "sync" // sync.Mutex, RWMutex, WaitGroup
	case "sync.(*Cond).Wait":
		return "sync.Cond"
	case "network":
		return "network"
	case "sleep":
		return "sleep"
	case "GC mark assist wait for work", "GC background sweeper wait", "wait until GC ends":
		return "GC"
	case "system goroutine wait", "forever", "wait for debug call", "preempted":
		return "runtime"
	}
	if reason == "" {
		return "unknown" // waiting when the trace started
	}
	return reason
}

func (a *analyzer) goTransition(ev *trace.Event, st *trace.StateTransition, t trace.Time) {
	id := st.Resource.Goroutine()
	from, to := st.Goroutine()
	g := a.gs.get(id)
	if g == nil {
		if to == trace.GoNotExist {
			return
		}
		g = &gstate{group: -1, state: from, since: t}
		a.gs.put(id, g)
		a.live++
		if from == trace.GoNotExist {
			a.created++
			a.tl.at(t).created++
			g.learnCreation(a, ev, st)
		}
	} else if from == trace.GoUndetermined {
		// A known goroutine restated at a generation boundary.
		if g.state != to {
			g.state, g.since = to, t
		}
		return
	}
	if g.state == to {
		// Waiting → Waiting and the like: the same wait goes on.
		return
	}
	a.leave(ev, g, id, to, t)
	if g.state == trace.GoRunning && to != trace.GoRunning {
		stk := st.Stack // the event's own stack, for every transition from running that has one
		if stk == trace.NoStack {
			stk = ev.Stack()
		}
		var s stackID
		if stk == g.lastStk && stk != trace.NoStack {
			s = g.lastID
		} else {
			s = a.st.intern(stk)
			g.lastStk, g.lastID = stk, s
		}
		if s != 0 {
			g.stack = s
		}
		a.learnGroup(g, s)
		a.running--
	}
	if to == trace.GoRunning && g.state != trace.GoRunning {
		a.running++
	}
	if to == trace.GoRunnable && g.state != trace.GoRunnable {
		a.runnable++
	} else if to != trace.GoRunnable && g.state == trace.GoRunnable {
		a.runnable--
	}
	if to == trace.GoWaiting {
		g.reason = a.rs.id(st.Reason)
	}
	g.state, g.since = to, t
	if to == trace.GoNotExist {
		a.exited++
		b := a.tl.at(t)
		b.exited++
		if g.group < 0 {
			a.learnGroup(g, 0)
			a.groups[a.groupIndex("(unknown start)")].running += g.pendRun
		}
		a.gs.del(id)
		a.live--
	}
	b := a.tl.at(t)
	b.live = max(b.live, a.live)
	b.running = max(b.running, a.running)
	b.runnable = max(b.runnable, a.runnable)
}

// learnCreation sets the group of a goroutine created in the trace from
// its start stack, and notes the creation site.
func (g *gstate) learnCreation(a *analyzer, ev *trace.Event, st *trace.StateTransition) {
	s := a.st.intern(st.Stack)
	a.learnGroup(g, s)
	if g.group < 0 {
		return
	}
	gr := a.groups[g.group]
	if gr.created == "" {
		if f := a.st.userFrame(a.st.intern(ev.Stack())); f != nil {
			gr.created = f.Func + " " + shortFile(f.File) + ":" + itoa(f.Line)
		}
	}
}

// leave accounts for the time a goroutine spent in the state it leaves.
func (a *analyzer) leave(ev *trace.Event, g *gstate, id trace.GoID, to trace.GoState, t trace.Time) {
	d := t.Sub(g.since)
	var gr *group
	if g.group >= 0 {
		gr = a.groups[g.group]
	}
	switch g.state {
	case trace.GoRunning:
		if gr != nil {
			gr.running += d
		} else {
			g.pendRun += d
		}
	case trace.GoRunnable:
		if to != trace.GoRunning {
			return
		}
		a.sched.add(d)
		if gr != nil {
			gr.sched.add(d)
		}
		a.schedBy.at(g.stack).add(d)
		a.schedWorst = keepWorst(a.schedWorst, event{at: g.since, dur: d, g: id, group: g.group, stack: g.stack}, a.opt.Worst)
	case trace.GoWaiting:
		cat := a.rs.cat[g.reason]
		a.blocks.at(g.reason, g.stack, g).add(d)
		a.blockBy.add(cat, d)
		if gr != nil {
			gr.blockBy.add(cat, d)
		}
	case trace.GoSyscall:
		a.sys.add(d)
		a.sysBy.at(g.stack).add(d)
		a.sysWorst = keepWorst(a.sysWorst, event{at: g.since, dur: d, g: id, group: g.group, stack: g.stack}, a.opt.Worst)
		if to == trace.GoRunnable {
			a.sysLostP++
		}
		a.blockBy.add(a.rs.syscallC, d)
		if gr != nil {
			gr.blockBy.add(a.rs.syscallC, d)
		}
	}
}

func (a *analyzer) rangeBegin(ev *trace.Event, t trace.Time) {
	r := ev.Range()
	switch {
	case strings.HasPrefix(r.Name, "stop-the-world"):
		reason := strings.TrimSuffix(strings.TrimPrefix(r.Name, "stop-the-world ("), ")")
		a.stwOpen[r.Name+r.Scope.String()] = pause{start: t, name: reason, stack: a.st.intern(ev.Stack())}
	case r.Name == "GC concurrent mark phase":
		a.gcOpen = t
		if ev.Kind() == trace.EventRangeBegin {
			a.gcCycles = append(a.gcCycles, t)
		}
	case r.Name == "GC mark assist" && r.Scope.Kind == trace.ResourceGoroutine:
		if g := a.gs.get(r.Scope.Goroutine()); g != nil {
			g.assistAt = t
			a.learnGroup(g, a.st.intern(ev.Stack()))
		}
	}
}

func (a *analyzer) rangeEnd(ev *trace.Event, t trace.Time) {
	r := ev.Range()
	switch {
	case strings.HasPrefix(r.Name, "stop-the-world"):
		k := r.Name + r.Scope.String()
		p, ok := a.stwOpen[k]
		if !ok {
			return
		}
		delete(a.stwOpen, k)
		p.dur = t.Sub(p.start)
		a.pauses = append(a.pauses, p)
		a.tl.interval(p.start, t, func(b *tbin, ns int64) { b.stwNS += ns })
	case r.Name == "GC concurrent mark phase":
		if a.gcOpen != 0 {
			a.gcMark += t.Sub(a.gcOpen)
			a.tl.interval(a.gcOpen, t, func(b *tbin, ns int64) { b.gcNS += ns })
			a.gcOpen = 0
		}
	case r.Name == "GC mark assist" && r.Scope.Kind == trace.ResourceGoroutine:
		if g := a.gs.get(r.Scope.Goroutine()); g != nil && g.assistAt != 0 {
			d := t.Sub(g.assistAt)
			g.assistAt = 0
			if g.group >= 0 {
				a.groups[g.group].assist += d
			} else {
				a.groups[a.groupIndex("(unknown start)")].assist += d
			}
		}
	}
}

func (s *stackStat) add(d time.Duration) {
	s.count++
	s.total += d
}

// keepWorst keeps the n longest events, longest first.
func keepWorst(w []event, e event, n int) []event {
	if len(w) == n && e.dur <= w[n-1].dur {
		return w
	}
	i := len(w)
	for i > 0 && w[i-1].dur < e.dur {
		i--
	}
	w = append(w, event{})
	copy(w[i+1:], w[i:])
	w[i] = e
	if len(w) > n {
		w = w[:n]
	}
	return w
}
