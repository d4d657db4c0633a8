package dump

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/collect"
	"github.com/wallprof/wallprof/internal/golden"
	"github.com/wallprof/wallprof/internal/goruntime/goroutines"
	"github.com/wallprof/wallprof/internal/profile"
)

// fakeSym names address A "fA" (file f.go, line A), a thread's stacks
// from its addresses, kernel ones "kA".
type fakeSym struct{ locs map[uint64]*profile.Location }

func (s *fakeSym) User(pid int, addr uint64, exact bool) *profile.Location {
	if !exact {
		addr--
	}
	if l, ok := s.locs[addr]; ok {
		return l
	}
	l := &profile.Location{ID: uint64(len(s.locs) + 1), Address: addr,
		Frames: []profile.Frame{{Function: fmt.Sprintf("f%d", addr), File: "f.go", Line: int(addr)}}}
	s.locs[addr] = l
	return l
}

func (s *fakeSym) Stack(t *collect.ThreadSnapshot) (kernel, user []*profile.Location) {
	for _, a := range t.Kernel {
		kernel = append(kernel, &profile.Location{Address: a, Frames: []profile.Frame{{Function: fmt.Sprintf("k%d", a)}}})
	}
	for i, a := range t.User {
		user = append(user, s.User(t.PID, a, i == 0))
	}
	return kernel, user
}

const sec = uint64(time.Second)

func sample() ([]collect.ThreadSnapshot, *goroutines.Snapshot) {
	threads := []collect.ThreadSnapshot{
		{PID: 10, TID: 11, Comm: "srv", State: collect.Running, InState: 3 * time.Millisecond, InStateKnown: true,
			CPUTime: time.Second, User: []uint64{500, 601}, StaleUser: true},
		{PID: 10, TID: 10, Comm: "srv", State: collect.Sleeping, InState: 2 * time.Second, InStateKnown: true,
			SinceRan: 2 * time.Second, CPUTime: 5 * time.Millisecond, Voluntary: 7, Kernel: []uint64{9000, 9001}, User: []uint64{100, 201}},
	}
	g := func(id uint64, st goroutines.Status, reason string, since uint64, stack ...uint64) goroutines.Goroutine {
		return goroutines.Goroutine{ID: id, ParentID: 1, Status: st, WaitReason: reason, WaitSince: int64(since),
			GoPC: 1001, Stack: stack}
	}
	snap := &goroutines.Snapshot{Goroutines: []goroutines.Goroutine{
		{ID: 1, Status: goroutines.Waiting, WaitReason: "IO wait", GoPC: 3001, Stack: []uint64{30, 41}},
		g(20, goroutines.Waiting, "chan receive", 90*sec, 10, 21, 32),
		g(7, goroutines.Waiting, "chan receive", 40*sec, 10, 21, 32),
		g(8, goroutines.Waiting, "chan receive", 0, 10, 21, 32),
		g(9, goroutines.Waiting, "sleep", 95*sec, 50, 61),
		g(12, goroutines.Waiting, "sleep", 95*sec, 50, 61),
		{ID: 13, ParentID: 1, Status: goroutines.Running, TID: 11, GoPC: 1001},
		{ID: 2, Status: goroutines.Waiting, WaitReason: "force gc (idle)", System: true, Stack: []uint64{70}},
	}}
	return threads, snap
}

// Goroutines are grouped by state, wait reason, stack and creator,
// largest first; the runtime's own are counted, not listed; a running
// goroutine has its thread's stack.
func TestBuildGo(t *testing.T) {
	threads, snap := sample()
	sym := &fakeSym{locs: map[uint64]*profile.Location{}}
	g := buildGo(10, "go1.26.8", snap, threads, sym, Options{}, 100*sec)
	if g.Goroutines != 7 || g.System != 1 || len(g.Groups) != 4 {
		t.Fatalf("%d goroutines, %d system, %d groups", g.Goroutines, g.System, len(g.Groups))
	}
	chanG, sleepG := g.Groups[0], g.Groups[1]
	if chanG.Count != 3 || chanG.WaitReason != "chan receive" || fmt.Sprint(chanG.IDs) != "[7 8 20]" ||
		*chanG.WaitMinNs != int64(10*sec) || *chanG.WaitMaxNs != int64(60*sec) {
		t.Errorf("chan group: %+v", chanG)
	}
	if chanG.Frames[0].Function != "f10" || chanG.Frames[1].Function != "f20" || chanG.CreatedBy.Function != "f1000" || chanG.CreatedBy.Goroutine != 1 {
		t.Errorf("chan group's frames %+v, creator %+v", chanG.Frames, chanG.CreatedBy)
	}
	if sleepG.Count != 2 || sleepG.WaitReason != "sleep" || *sleepG.WaitMinNs != int64(5*sec) {
		t.Errorf("sleep group: %+v", sleepG)
	}
	// Two groups of one: by state (running before waiting).
	run, main := g.Groups[2], g.Groups[3]
	if run.State != "running" || !run.StackFromThread || run.Frames[0].Function != "f500" || fmt.Sprint(run.Threads) != "[11]" {
		t.Errorf("running group: %+v", run)
	}
	if main.IDs[0] != 1 || main.CreatedBy != nil {
		t.Errorf("main goroutine: %+v", main)
	}
	all := buildGo(10, "go1.26.8", snap, threads, sym, Options{All: true}, 100*sec)
	if len(all.Groups) != 7 {
		t.Errorf("--all: %d groups", len(all.Groups))
	}
}

// The text and JSON forms of a dump (the JSON golden is also checked
// against its schema by cmd/wallprof's schema test).
func TestWriteGolden(t *testing.T) {
	threads, snap := sample()
	sym := &fakeSym{locs: map[uint64]*profile.Location{}}
	d := &Dump{Format: Format, PID: 10, Command: "./srv -port 8080", Time: time.Unix(1700000000, 0).UTC(),
		ElapsedNs: int64(230 * time.Millisecond)}
	d.Threads = buildThreads(threads, sym, snap)
	d.Go = buildGo(10, "go1.26.8", snap, threads, sym, Options{}, 100*sec)
	var b bytes.Buffer
	if err := WriteText(&b, d, false); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "dump.txt", b.Bytes())
	b.Reset()
	if err := WriteJSON(&b, d); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "dump.json", b.Bytes())
	d.Go = buildGo(10, "go1.26.8", snap, threads, sym, Options{All: true}, 100*sec)
	b.Reset()
	if err := WriteText(&b, d, true); err != nil {
		t.Fatal(err)
	}
	golden.Check(t, "dump-all.txt", b.Bytes())
}
