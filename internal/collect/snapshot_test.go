package collect

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/collect/bpf"
)

func TestSchedState(t *testing.T) {
	for _, c := range []struct {
		state       uint32
		onCPU, onRQ bool
		want        SchedState
	}{
		{0, true, true, Running},
		{taskInterruptible, true, true, Running}, // on its way into the scheduler
		{0, false, true, Runnable},
		{taskInterruptible, false, false, Sleeping},
		{taskUninterruptible, false, false, Disk},
		{taskUninterruptible | taskNoload, false, false, Idle},
		{taskStopped, false, false, Stopped},
		{taskTraced | taskUninterruptible, false, false, Traced},
		{exitZombie, false, false, Dead},
	} {
		if got := schedState(c.state, c.onCPU, c.onRQ); got != c.want {
			t.Errorf("state %#x onCPU %v onRQ %v: %s, want %s", c.state, c.onCPU, c.onRQ, got, c.want)
		}
	}
}

func TestTimeInState(t *testing.T) {
	ms := uint64(time.Millisecond)
	base := snapTimes{rqClock: 1000 * ms, myClock: 1002 * ms, lastArrival: 900 * ms, sumExec: 50 * ms, prevExec: 40 * ms}
	// Running since its latest switch-in, up to the latest clock.
	if d, ok, _ := timeInState(Running, base); !ok || d != 102*time.Millisecond {
		t.Errorf("running: %v %v", d, ok)
	}
	// Off CPU since its switch-in plus its last burst (10ms).
	if d, ok, ran := timeInState(Sleeping, base); !ok || d != 92*time.Millisecond || ran != d {
		t.Errorf("sleeping: %v %v %v", d, ok, ran)
	}
	// Runnable since it was queued.
	q := base
	q.lastQueued = 995 * ms
	if d, ok, ran := timeInState(Runnable, q); !ok || d != 7*time.Millisecond || ran != 92*time.Millisecond {
		t.Errorf("runnable: %v %v %v", d, ok, ran)
	}
	// Preempted as it was going to sleep: not queued in schedstat's
	// accounting, on the run queue since it left the CPU.
	if d, ok, ran := timeInState(Runnable, base); !ok || d != 92*time.Millisecond || ran != d {
		t.Errorf("runnable, not queued: %v %v %v", d, ok, ran)
	}
	// Without schedstat: clock_task since exec_start.
	n := snapTimes{rqClock: 1000 * ms, rqClockTask: 800 * ms, execStart: 750 * ms}
	if d, ok, _ := timeInState(Disk, n); !ok || d != 50*time.Millisecond {
		t.Errorf("no schedstat: %v %v", d, ok)
	}
	if _, ok, _ := timeInState(Sleeping, snapTimes{}); ok {
		t.Error("known without any timestamp")
	}
}

func TestDecodeSnapshots(t *testing.T) {
	r := bpf.WallprofThreadSnap{Pid: 5, Tid: 6, State: taskInterruptible, Klen: 16, Ulen: 16, SnapLen: 8, Ip: 0x401000}
	copy(r.Comm[:], []int8{'a', 'b'})
	r.Kstack[0], r.Kstack[1] = 1, 2
	r.Ustack[0], r.Ustack[1] = 0x401000, 0x402000
	var b bytes.Buffer
	binary.Write(&b, binary.LittleEndian, &r)
	binary.Write(&b, binary.LittleEndian, &r)
	ts, err := decodeSnapshots(b.Bytes())
	if err != nil || len(ts) != 2 {
		t.Fatalf("%d snapshots, %v", len(ts), err)
	}
	if ts[0].TID != 6 || ts[0].Comm != "ab" || ts[0].State != Sleeping || len(ts[0].Kernel) != 2 || len(ts[0].User) != 2 || len(ts[0].Snap) != 8 {
		t.Errorf("%+v", ts[0])
	}
	if _, err := decodeSnapshots(b.Bytes()[:b.Len()-1]); !errors.Is(err, ErrTruncated) {
		t.Errorf("truncated: %v", err)
	}
	r.Klen = 8 * 200
	b.Reset()
	binary.Write(&b, binary.LittleEndian, &r)
	if _, err := decodeSnapshots(b.Bytes()); err == nil {
		t.Error("no error for a kernel stack longer than the record")
	}
}
