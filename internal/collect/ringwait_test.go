package collect

import (
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// ringProducer loads a ring buffer and a program that writes 8 bytes to it
// with the given bpf_ringbuf_output flags each time it is run.
func ringProducer(t *testing.T, flags int64) (*ebpf.Map, func()) {
	t.Helper()
	ring, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.RingBuf, MaxEntries: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ring.Close() })
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:    ebpf.SocketFilter,
		License: "GPL",
		Instructions: asm.Instructions{
			asm.Mov.Imm(asm.R0, 42),
			asm.StoreMem(asm.RFP, -8, asm.R0, asm.DWord),
			asm.LoadMapPtr(asm.R1, ring.FD()),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -8),
			asm.Mov.Imm(asm.R3, 8),
			asm.Mov.Imm(asm.R4, int32(flags)),
			asm.FnRingbufOutput.Call(),
			asm.Mov.Imm(asm.R0, 0),
			asm.Return(),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prog.Close() })
	return ring, func() {
		if _, err := prog.Run(&ebpf.RunOptions{Data: make([]byte, 64)}); err != nil {
			t.Error(err)
		}
	}
}

// testRingWait is a ringWait on a new ring buffer, with the function that
// writes to it (see ringProducer); it is closed with the test.
func testRingWait(t *testing.T, flags int64) (*ringWait, func()) {
	t.Helper()
	ring, produce := ringProducer(t, flags)
	w := newRingWait(ring)
	if w == nil {
		t.Fatal("the ring buffer's file cannot be polled by the Go runtime")
	}
	t.Cleanup(w.close)
	return w, produce
}

const (
	rbNoWakeup    = 1 // BPF_RB_NO_WAKEUP
	rbForceWakeup = 2 // BPF_RB_FORCE_WAKEUP
)

// waitFor runs w.wait with a deadline of d in a goroutine, calls during
// after start, and returns how long the wait lasted.
func waitFor(w *ringWait, d time.Duration, full func() bool, during func()) time.Duration {
	done := make(chan time.Duration)
	go func() {
		t0 := time.Now()
		w.wait(t0.Add(d), full)
		done <- time.Since(t0)
	}()
	time.Sleep(50 * time.Millisecond)
	if during != nil {
		during()
	}
	return <-done
}

func never() bool { return false }

func TestRingWait(t *testing.T) {
	requireBPF(t)
	t.Run("a program's wake-up ends the wait", func(t *testing.T) {
		w, produce := testRingWait(t, rbForceWakeup)
		if d := waitFor(w, 5*time.Second, never, produce); d > 2*time.Second {
			t.Errorf("waited %v after a forced wake-up, deadline 5s", d)
		}
	})
	t.Run("records without a wake-up wait for the deadline", func(t *testing.T) {
		w, produce := testRingWait(t, rbNoWakeup)
		if d := waitFor(w, 400*time.Millisecond, never, produce); d < 350*time.Millisecond {
			t.Errorf("returned after %v, before its 400ms deadline, with no wake-up", d)
		}
	})
	t.Run("wake ends the wait", func(t *testing.T) {
		w, _ := testRingWait(t, rbNoWakeup)
		if d := waitFor(w, 5*time.Second, never, w.wake); d > 2*time.Second {
			t.Errorf("waited %v after wake, deadline 5s", d)
		}
		// A wake before the wait ends the next one at once.
		w.wake()
		if d := waitFor(w, 5*time.Second, never, nil); d > 2*time.Second {
			t.Errorf("waited %v after an earlier wake, deadline 5s", d)
		}
		// And only that one.
		if d := waitFor(w, 300*time.Millisecond, never, nil); d < 250*time.Millisecond {
			t.Errorf("returned after %v, before its 300ms deadline, woken once and waited twice", d)
		}
	})
	t.Run("a full ring ends the wait at once", func(t *testing.T) {
		w, _ := testRingWait(t, rbNoWakeup)
		if d := waitFor(w, 5*time.Second, func() bool { return true }, nil); d > 2*time.Second {
			t.Errorf("waited %v on a full ring, deadline 5s", d)
		}
	})
}
