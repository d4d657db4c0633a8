package collect

import (
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/wallprof/wallprof/internal/collect/bpf"
)

// walkedPIDs are the processes a walk visits, 0 for every task.
func walkedPIDs(w *walker) []uint32 {
	var pids []uint32
	for _, it := range w.iters() {
		pids = append(pids, it.pid)
	}
	return pids
}

// The walker visits the live target processes one by one: not those found
// gone (a shell script's commands, a pyenv shim's), not a second time one
// named twice, again one whose PID a new target took; past the short
// list's length it reads every target; past maxWalkPIDs live ones, every
// task. Before, more than 16 targets ever (alive or not) made every walk
// visit every task of the machine.
func TestWalkerVisitsLiveTargets(t *testing.T) {
	requireBPF(t)
	tgids, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4 * 17, MaxEntries: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tgids.Close()
	targets, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 4, ValueSize: 1, MaxEntries: 1024})
	if err != nil {
		t.Fatal(err)
	}
	defer targets.Close()
	// Iterators already attached for every PID used here: the test needs
	// none of them run.
	w := &walker{tgids: tgids, targets: targets, byPID: map[uint32][2]*link.Iter{}, dead: map[uint32]int{}}
	for pid := uint32(1); pid <= 200; pid++ {
		w.byPID[pid] = [2]*link.Iter{}
	}
	set := func(pids ...uint32) {
		t.Helper()
		var s bpf.WallprofTgidSet
		s.N = uint32(len(pids))
		copy(s.Tgid[:], pids)
		if err := tgids.Put(uint32(0), &s); err != nil {
			t.Fatal(err)
		}
		for _, pid := range pids {
			if err := targets.Put(pid, uint8(1)); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(want ...uint32) {
		t.Helper()
		if got := walkedPIDs(w); !slices.Equal(got, want) {
			t.Fatalf("walked %v, want %v", got, want)
		}
	}
	set(10, 11, 12, 11)
	check(10, 11, 12)
	w.forget(map[uint32]bool{11: true})
	check(10, 12)
	if _, ok := w.byPID[11]; ok {
		t.Error("the iterators of a process found gone were kept")
	}
	w.byPID[11] = [2]*link.Iter{}
	set(10, 11, 12, 11, 13)
	check(10, 12, 13) // 11 named as often as when found gone
	set(10, 11, 12, 11, 13, 11)
	check(10, 11, 12, 13) // named once more: a new process with that PID
	w.forget(map[uint32]bool{11: true, 12: true})
	check(10, 13)

	// 17 and more: the short list overflowed, every target is read.
	var s bpf.WallprofTgidSet
	s.N = 20
	if err := tgids.Put(uint32(0), &s); err != nil {
		t.Fatal(err)
	}
	for pid := uint32(20); pid < 30; pid++ {
		if err := targets.Put(pid, uint8(1)); err != nil {
			t.Fatal(err)
		}
		w.byPID[pid] = [2]*link.Iter{}
	}
	w.byPID[11], w.byPID[12] = [2]*link.Iter{}, [2]*link.Iter{}
	want := []uint32{10, 13}
	for pid := uint32(20); pid < 30; pid++ {
		want = append(want, pid)
	}
	check(want...)

	// More live targets than maxWalkPIDs: every task, once.
	for pid := uint32(100); pid < 100+maxWalkPIDs; pid++ {
		if err := targets.Put(pid, uint8(1)); err != nil {
			t.Fatal(err)
		}
	}
	check(0)
}
