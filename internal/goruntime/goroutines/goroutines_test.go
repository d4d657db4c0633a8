package goroutines

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/goruntime/rtlayout"
	"github.com/wallprof/wallprof/internal/groundtruth"
)

// expectation is one goroutine goparked starts: the function it blocks in,
// the function that started it and the wait reasons it may show (older
// runtimes report sync.WaitGroup.Wait as semacquire).
type expectation struct {
	fn, creator string
	reasons     []string
}

var expected = []expectation{
	{"main.waitOnChan", "main.spawnChanRecv", []string{"chan receive"}},
	{"main.sendOnChan", "main.spawnChanSend", []string{"chan send"}},
	{"main.waitInSelect", "main.spawnSelect", []string{"select"}},
	{"main.sleepLong", "main.spawnSleep", []string{"sleep"}},
	{"main.lockMutex", "main.spawnMutex", []string{"sync.Mutex.Lock"}},
	{"main.waitGroup", "main.spawnWaitGroup", []string{"sync.WaitGroup.Wait", "semacquire"}},
	{"main.readPipe", "main.spawnPipe", []string{"IO wait"}},
	{"main.acceptConn", "main.spawnAccept", []string{"IO wait"}},
	{"main.deepWait", "main.spawnDeep", []string{"chan receive"}},
	{"main.labeledWait", "main.spawnLabeled", []string{"chan receive"}},
	{"main.manyLabelsWait", "main.spawnManyLabels", []string{"chan receive"}},
}

// build is one way of building goparked.
type build struct {
	name      string
	toolchain string // "" for the local one
	stripped  bool
	pie       bool
}

// builds returns the builds to test: the local toolchain plain, stripped,
// PIE and PIE stripped (as distributions ship), and every older toolchain of the tables found in the module
// cache, stripped (go1.20.14 also plain).
func builds(t *testing.T) []build {
	bs := []build{{"local", "", false, false}, {"local-stripped", "", true, false},
		{"local-pie", "", false, true}, {"local-pie-stripped", "", true, true}}
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	cache := strings.TrimSpace(string(out))
	for _, v := range []string{"go1.20.14", "go1.21.13", "go1.22.12", "go1.23.12", "go1.24.13", "go1.25.14"} {
		if _, err := os.Stat(filepath.Join(cache, "golang.org", "toolchain@v0.0.1-"+v+".linux-amd64")); err != nil {
			t.Logf("%s not in the module cache: not tested", v)
			continue
		}
		bs = append(bs, build{v + "-stripped", v, true, false})
		if v == "go1.20.14" {
			bs = append(bs, build{v, v, false, false})
		}
	}
	return bs
}

func (b build) binary(t *testing.T) string {
	dir := groundtruth.WorkloadDir(t, "goparked")
	if !b.pie {
		return groundtruth.BuildGo(t, dir, b.stripped, b.toolchain)
	}
	out := filepath.Join(t.TempDir(), "goparked-pie")
	args := []string{"build", "-buildmode=pie", "-o", out}
	if b.stripped {
		args = append(args, "-ldflags=-s -w")
	}
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build PIE: %v\n%s", err, o)
	}
	return out
}

// TestReadGoparked reads the goroutine table of goparked, built in several
// ways, from outside and checks every goroutine it started.
func TestReadGoparked(t *testing.T) {
	requireRoot(t)
	for _, b := range builds(t) {
		t.Run(b.name, func(t *testing.T) {
			w := startWorkload(t, b.binary(t))
			woken0, spins0 := w.alive(t)
			r, err := Open(w.cmd.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if b.stripped != strings.HasPrefix(r.AllgsSource(), "code") {
				t.Errorf("allgs found through %q", r.AllgsSource())
			}
			if b.pie == (r.LoadBias() == 0) {
				t.Errorf("load bias %#x (PIE: %v)", r.LoadBias(), b.pie)
			}
			if b.pie {
				checkBiasFromMaps(t, w.cmd.Process.Pid, r.LoadBias())
			}
			snap := snapshotUntilFound(t, r)
			checkExpected(t, r, snap)
			checkMainAndSpin(t, r, snap, w.cmd.Process.Pid)
			// The computing goroutines, caught running or preempted
			// (often in the middle of the frameless main.mix).
			for i := 0; i < 100; i++ {
				s, err := r.Snapshot()
				if err != nil {
					t.Fatal(err)
				}
				checkMainAndSpin(t, r, s, w.cmd.Process.Pid)
			}
			// Again, mostly from the stack cache: the same answers.
			again, err := r.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if again.CachedStacks < len(expected) {
				t.Errorf("second snapshot took %d stacks from the cache, want at least %d", again.CachedStacks, len(expected))
			}
			checkExpected(t, r, again)

			// The target still runs, made progress, and none of its
			// blocked goroutines was woken.
			if st := procState(t, w.cmd.Process.Pid); st == "T" || st == "t" {
				t.Errorf("target is stopped (state %s)", st)
			}
			woken, spins := w.alive(t)
			for deadline := time.Now().Add(2 * time.Second); spins <= spins0 && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
				woken, spins = w.alive(t)
			}
			if woken != woken0 || woken != 0 {
				t.Errorf("%d blocked goroutines woke up", woken)
			}
			if spins <= spins0 {
				t.Errorf("target made no progress in 2s: spins %d then %d", spins0, spins)
			}
		})
	}
}

// snapshotUntilFound takes snapshots until every expected goroutine is in
// one (they all are parked long before "ready", but a goroutine caught
// changing is dropped from a snapshot), for at most 5 seconds.
func snapshotUntilFound(t *testing.T, r *Reader) Snapshot {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		snap, err := r.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		missing := 0
		for _, e := range expected {
			if len(withFrame(r, snap, e.fn)) != 1 {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			t.Logf("%s, allgs via %s: %d goroutines of %d allgs, %d dropped, %d retried, %d label errors",
				r.GoVersion(), r.AllgsSource(), len(snap.Goroutines), snap.AllGs, snap.Dropped, snap.Retried, snap.LabelErrors)
			return snap
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// frames returns the function names of a goroutine's stack, inlined
// frames included.
func frames(r *Reader, g Goroutine) []string {
	var names []string
	for _, pc := range g.Stack {
		for _, f := range r.Table().Lookup(pc - 1 - r.LoadBias()) {
			names = append(names, f.Function)
		}
	}
	return names
}

func funcName(r *Reader, pc uint64) string {
	_, _, name, _ := r.Table().FuncRange(pc - r.LoadBias())
	return name
}

// withFrame returns the goroutines whose stack has a frame of fn.
func withFrame(r *Reader, snap Snapshot, fn string) []Goroutine {
	var gs []Goroutine
	for _, g := range snap.Goroutines {
		if slices.Contains(frames(r, g), fn) {
			gs = append(gs, g)
		}
	}
	return gs
}

func checkExpected(t *testing.T, r *Reader, snap Snapshot) {
	t.Helper()
	hasParent := rtlayout.Minor(r.GoVersion()) != "go1.20"
	for _, e := range expected {
		gs := withFrame(r, snap, e.fn)
		if len(gs) != 1 {
			t.Errorf("%s: %d goroutines with it on the stack, want 1", e.fn, len(gs))
			continue
		}
		g := gs[0]
		desc := fmt.Sprintf("%s (goroutine %d, %s %q, stack %q)", e.fn, g.ID, g.Status, g.WaitReason, frames(r, g))
		if g.Status != Waiting || !slices.Contains(e.reasons, g.WaitReason) {
			t.Errorf("%s: want waiting on one of %q", desc, e.reasons)
		}
		if creator := funcName(r, g.GoPC-1); creator != e.creator {
			t.Errorf("%s: created at %#x in %q, want %s", desc, g.GoPC, creator, e.creator)
		}
		// A goroutine whose call has arguments starts in a wrapper:
		// creator.gowrapN (Go 1.22+) or creator.funcN.
		start := funcName(r, g.StartPC)
		if start != e.fn && !strings.HasPrefix(start, e.creator+".") {
			t.Errorf("%s: starts at %q", desc, start)
		}
		// Up to Go 1.21 the wrapper is told by the function table only.
		wrapper := start != e.fn && !strings.Contains(start, ".gowrap")
		if r.IsGoWrapper(g.StartPC) != wrapper {
			t.Errorf("%s: starts at %q, IsGoWrapper %v", desc, start, !wrapper)
		}
		if fs := frames(r, g); fs[0] != "runtime.gopark" || fs[len(fs)-1] != "runtime.goexit" {
			t.Errorf("%s: stack does not run from runtime.gopark to runtime.goexit", desc)
		}
		if g.System || g.Truncated || g.TID != 0 || g.ID == 0 {
			t.Errorf("%s: system=%v truncated=%v tid=%d", desc, g.System, g.Truncated, g.TID)
		}
		if hasParent && g.ParentID != 1 {
			t.Errorf("%s: parent goroutine %d, want 1 (main)", desc, g.ParentID)
		}
		wantLabels := []Label(nil)
		switch e.fn {
		case "main.labeledWait":
			wantLabels = []Label{{"shard", "7"}, {"worker", "labeled"}}
		case "main.manyLabelsWait":
			for i := 0; i < 10; i++ {
				wantLabels = append(wantLabels, Label{fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i)})
			}
		}
		if !slices.Equal(g.Labels, wantLabels) {
			t.Errorf("%s: labels %q, want %q", desc, g.Labels, wantLabels)
		}
		if e.fn == "main.deepWait" {
			if n := countOf(frames(r, g), "main.recurse"); n != 41 {
				t.Errorf("%s: %d frames of main.recurse, want 41", desc, n)
			}
		}
	}
}

func countOf(ss []string, s string) int {
	n := 0
	for _, x := range ss {
		if x == s {
			n++
		}
	}
	return n
}

// checkMainAndSpin checks the main goroutine (reading stdin) and the two
// computing, and that runtime goroutines are flagged.
func checkMainAndSpin(t *testing.T, r *Reader, snap Snapshot, pid int) {
	t.Helper()
	var sawMain, sawSpin, sawSystem bool
	for _, g := range snap.Goroutines {
		start := funcName(r, g.StartPC)
		switch {
		case g.ID == 1:
			sawMain = true
			if start != "runtime.main" || g.System || (g.Stack != nil && !slices.Contains(frames(r, g), "main.main")) {
				t.Errorf("main goroutine: start %q system=%v stack %q", start, g.System, frames(r, g))
			}
			switch g.Status {
			case Syscall: // stdin is a blocking pipe: read(2) on its thread
				if _, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d", pid, g.TID)); g.TID == 0 || err != nil {
					t.Errorf("main goroutine in a system call on thread %d, not a thread of %d", g.TID, pid)
				}
			case Waiting: // the netpoller took stdin
			case Runnable, Running: // on its way back from answering a line
			default:
				t.Errorf("main goroutine %s, want in a read of stdin", g.Status)
			}
		case start == "main.spin" || start == "main.crunch":
			sawSpin = true
			switch g.Status {
			case Running:
				if g.Stack != nil || g.TID == 0 {
					t.Errorf("running goroutine: stack %x, thread %d", g.Stack, g.TID)
				} else if _, err := os.Stat(fmt.Sprintf("/proc/%d/task/%d", pid, g.TID)); err != nil {
					t.Errorf("running goroutine on thread %d, not a thread of %d: %v", g.TID, pid, err)
				}
			case Runnable, Preempted:
				fs := frames(r, g)
				if !slices.Contains(fs, start) || fs[len(fs)-1] != "runtime.goexit" || g.Truncated {
					t.Errorf("%s goroutine: stack %q (truncated %v)", g.Status, fs, g.Truncated)
				}
			default:
				t.Errorf("computing goroutine is %s", g.Status)
			}
		case g.System:
			sawSystem = true
			if !strings.HasPrefix(start, "runtime.") {
				t.Errorf("goroutine %d starting at %s flagged system", g.ID, start)
			}
		}
	}
	if !sawMain || !sawSystem {
		t.Errorf("main goroutine found: %v; runtime goroutines found: %v", sawMain, sawSystem)
	}
	if !sawSpin {
		t.Logf("computing goroutine not in the last snapshot (dropped while it changed state)")
	}
}

func TestOpenErrors(t *testing.T) {
	requireRoot(t)
	t.Run("not Go", func(t *testing.T) {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Skipf("no sleep(1): %v", err)
		}
		defer func() { cmd.Process.Kill(); cmd.Wait() }()
		_, err := Open(cmd.Process.Pid)
		if !errors.Is(err, ErrNotGo) {
			t.Errorf("Open(sleep) = %v, want ErrNotGo", err)
		}
	})
	t.Run("no process", func(t *testing.T) {
		if _, err := Open(1 << 30); err == nil || !strings.Contains(err.Error(), "process") {
			t.Errorf("Open(no such pid) = %v", err)
		}
	})
	t.Run("wrong layout", func(t *testing.T) {
		w := startWorkload(t, groundtruth.BuildGo(t, groundtruth.WorkloadDir(t, "goparked"), true, ""))
		r, err := Open(w.cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if r.layout, err = rtlayout.ForVersion("go1.20"); err != nil {
			t.Fatal(err)
		}
		if err := r.checkLayout(); !errors.Is(err, ErrLayoutMismatch) {
			t.Errorf("go1.26 program read with the go1.20 layout: %v", err)
		}
	})
	t.Run("exited", func(t *testing.T) {
		w := startWorkload(t, groundtruth.BuildGo(t, groundtruth.WorkloadDir(t, "goparked"), true, ""))
		r, err := Open(w.cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		w.cmd.Process.Kill()
		w.cmd.Wait()
		if _, err := r.Snapshot(); !errors.Is(err, ErrProcessGone) {
			t.Errorf("Snapshot of an exited process: %v", err)
		}
	})
	t.Run("Go 1.18", func(t *testing.T) {
		out, err := exec.Command("go", "env", "GOMODCACHE").Output()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(strings.TrimSpace(string(out)), "golang.org", "toolchain@v0.0.1-go1.18.10.linux-amd64")); err != nil {
			t.Skip("go1.18.10 not in the module cache")
		}
		w := startWorkload(t, groundtruth.BuildGo(t, groundtruth.WorkloadDir(t, "goparked"), true, "go1.18.10"))
		_, err = Open(w.cmd.Process.Pid)
		if !errors.Is(err, rtlayout.ErrUnsupportedVersion) || !strings.Contains(err.Error(), "Go 1.18 is not supported; supported: 1.19–1.26") {
			t.Errorf("Open(go1.18 program) = %v", err)
		}
	})
}

// TestReadWhileChurning reads goparked (every stripped build) while goroutines are created, grow
// and copy their stacks, and exit, back to back (300 snapshots, more until
// 100 goroutines were started meanwhile, for at most 10 s): every goroutine
// returned must be sane (a live state, a unique id, a stack through
// functions of the binary down to runtime.goexit), inconsistent reads must
// stay a small minority, and the target must be unharmed.
func TestReadWhileChurning(t *testing.T) {
	requireRoot(t)
	for _, b := range builds(t) {
		if !b.stripped {
			continue
		}
		t.Run(b.name, func(t *testing.T) { readWhileChurning(t, b.binary(t)) })
	}
}

func readWhileChurning(t *testing.T, bin string) {
	w := startWorkload(t, bin, "-churn", "2")
	r, err := Open(w.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, _, children0 := w.counters(t)
	var read, dropped, retried, churnSeen int
	children := children0
	deadline := time.Now().Add(10 * time.Second)
	n := 0
	for i := 0; i < 300 || (children-children0 < 100 && time.Now().Before(deadline)); i++ {
		if i%100 == 99 {
			_, _, children = w.counters(t)
		}
		n++
		snap, err := r.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		read += len(snap.Goroutines)
		dropped += snap.Dropped
		retried += snap.Retried
		ids := map[uint64]bool{}
		for _, g := range snap.Goroutines {
			if ids[g.ID] || g.ID == 0 || !g.Status.exists() {
				t.Fatalf("snapshot %d: goroutine %d (%s) duplicate or not live", i, g.ID, g.Status)
			}
			ids[g.ID] = true
			if start := funcName(r, g.StartPC); start == "main.churnChild" || strings.HasPrefix(start, "main.churn.") {
				churnSeen++
			}
			if g.Stack == nil {
				continue
			}
			fs := frames(r, g)
			if !g.Truncated && fs[len(fs)-1] != "runtime.goexit" {
				{
					t.Errorf("snapshot %d: goroutine %d (%s): stack %q %#x, start %#x %s, pc in %s", i, g.ID, g.Status, fs, g.Stack, g.StartPC, funcName(r, g.StartPC), funcName(r, g.Stack[0]))
				}
			}
			for _, pc := range g.Stack[1:] {
				if r.Table().Lookup(pc-1-r.LoadBias()) == nil {
					t.Errorf("snapshot %d: goroutine %d (%s %q, started at %s, stack %#x %q): return address %#x not in a Go function",
						i, g.ID, g.Status, g.WaitReason, funcName(r, g.StartPC), g.Stack, fs, pc)
				}
			}
		}
	}
	_, _, children = w.counters(t)
	t.Logf("%d snapshots while %d goroutines were started: %d goroutines read, %d dropped, %d reads repeated; short-lived goroutines seen %d times",
		n, children-children0, read, dropped, retried, churnSeen)
	if dropped*20 > read {
		t.Errorf("%d of %d goroutine reads dropped", dropped, read)
	}
	if children-children0 < 100 {
		t.Errorf("only %d goroutines started while reading: the test did not race with anything", children-children0)
	}
	checkExpected(t, r, snapshotUntilFound(t, r))
	if woken, _ := w.alive(t); woken != 0 {
		t.Errorf("%d blocked goroutines woke up", woken)
	}
}

// checkBiasFromMaps checks the load bias (from AT_ENTRY) against the one
// /proc/PID/maps gives.
func checkBiasFromMaps(t *testing.T, pid int, bias uint64) {
	t.Helper()
	exe := fmt.Sprintf("/proc/%d/exe", pid)
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Stat(exe, &st); err != nil {
		t.Fatal(err)
	}
	start, err := mappingStart(pid, st.Ino)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			if got := start - p.Vaddr&^0xfff; got != bias {
				t.Errorf("bias from maps %#x, from AT_ENTRY %#x", got, bias)
			}
			return
		}
	}
}

// TestOpenExe reads a program's executable before it runs (ReadExe, as
// record does while its BPF program loads), then opens the running
// process with it: the same goroutines as Open finds, without reading the
// file again; an Exe of another file is not used.
func TestOpenExe(t *testing.T) {
	requireRoot(t)
	bs := builds(t)
	b := bs[len(bs)-1] // the last build is stripped and PIE where the builds vary
	exe, err := ReadExe(b.binary(t))
	if err != nil {
		t.Fatal(err)
	}
	w := startWorkload(t, b.binary(t))
	r, err := OpenExe(w.cmd.Process.Pid, exe)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.GoVersion() != exe.x.version || r.table != exe.x.table {
		t.Errorf("OpenExe read the executable again: version %q, table shared %v", r.GoVersion(), r.table == exe.x.table)
	}
	if b.pie {
		checkBiasFromMaps(t, w.cmd.Process.Pid, r.LoadBias())
	}
	checkExpected(t, r, snapshotUntilFound(t, r))

	// An Exe of another file: the process's own is read.
	other, err := ReadExe(bs[0].binary(t))
	if err != nil {
		t.Fatal(err)
	}
	if bs[0].binary(t) == b.binary(t) {
		t.Fatal("one build only")
	}
	r2, err := OpenExe(w.cmd.Process.Pid, other)
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if r2.table == other.x.table {
		t.Error("OpenExe used the Exe of another file")
	}
	checkExpected(t, r2, snapshotUntilFound(t, r2))

	if _, err := ReadExe("/bin/sh"); !errors.Is(err, ErrNotGo) {
		t.Errorf("ReadExe(/bin/sh): %v, want ErrNotGo", err)
	}
}

// TestReaderCloseUnmaps: a Reader's Close gives back the mappings of the
// target's executable that its function table holds (the agent opens a
// view of every Go program that comes and goes, for as long as it runs),
// whether it was opened from the process or from an Exe read before.
func TestReaderCloseUnmaps(t *testing.T) {
	requireRoot(t)
	bin, err := filepath.EvalSymlinks(builds(t)[0].binary(t))
	if err != nil {
		t.Fatal(err)
	}
	mapsOf := func() int {
		b, err := os.ReadFile("/proc/self/maps")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasSuffix(l, " "+bin) {
				n++
			}
		}
		return n
	}
	w := startWorkload(t, bin)
	pid := w.cmd.Process.Pid
	for _, c := range []struct {
		name string
		open func() (*Reader, error)
	}{
		// (Another test's Table of the file, never closed, shares its
		// mappings: they are counted before and after.)
		{"Open", func() (*Reader, error) { return Open(pid) }},
		{"OpenExe", func() (*Reader, error) {
			e, err := ReadExe(bin)
			if err != nil {
				return nil, err
			}
			return OpenExe(pid, e)
		}},
	} {
		before := mapsOf()
		r, err := c.open()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if mapsOf() == 0 {
			t.Fatalf("%s: no mapping of %s while the Reader is open: nothing to check", c.name, bin)
		}
		r.Close()
		if n := mapsOf(); n != before {
			t.Errorf("%s: %d mappings of %s after Close, want %d as before", c.name, n, bin, before)
		}
	}
}
