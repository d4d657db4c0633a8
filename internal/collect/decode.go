package collect

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/wallprof/wallprof/internal/profile"
	"github.com/wallprof/wallprof/internal/symbolize"
)

// ProcessExec is a target process that exec'ed a program (Decode).
type ProcessExec uint32

// Event types, as in wallprof.bpf.c.
const (
	evSample = 1
	evExit   = 2
	evExec   = 3
	evTail   = 4

	sampleFinal = 1
	sampleCarry = 2
	sampleWalk  = 4
	sampleThin  = 8

	maxStack  = 127
	snapBytes = 512
	nstates   = int(profile.NumStates)

	// Byte layout of struct sample_event: a header, then its stacks and
	// snapshot (sampleSize in all). It is sent packed (send_sample in the
	// BPF source): the header, then klen bytes of kernel stack, ulen of
	// user stack and snap_len of snapshot, each length 0 where negative.
	sampleHeader = 4*4 + 8 + 8*nstates + 16 + 3*8 + 4*4
	sampleSize   = sampleHeader + 2*8*maxStack + snapBytes

	// Byte layout of struct tstate and struct exit_event.
	tstateSize = 4*8 + 2*8*nstates + 8 + 8 + 8 + 8 + 8 + 8 + 8 + 4*8 + 8 + 3*8 + 8 + 8 + 8 + 8 + 8
	exitSize   = 4*4 + 8 + tstateSize + 16
	tailSize   = 4*4 + 8 + 8 + 16
)

// ErrTruncated is returned for a record shorter than its type requires.
var ErrTruncated = errors.New("truncated record")

// RawSample is one stack sample as the kernel reported it.
type RawSample struct {
	PID, TID uint32
	Comm     string
	// GoID is the goroutine the goroutine view's latest snapshot had on
	// the thread when the sample was read (0: unknown, or not marked).
	GoID  uint64
	Final bool // taken at the end of the recording; weights come from the thread table
	// Carry: weights without a stack (time whose stack is unknown), for the
	// thread's latest sample in the same state.
	Carry bool
	// Walk: an off-CPU sample of walk mode (AccountWalk), one nominal
	// period in the state the thread was in when walked; its thread's
	// samples of that state are scaled to its time there.
	Walk bool
	// Thin: an off-CPU sample of the resumption accounting that its
	// budget could have left out (one period in each state); when some
	// were, a thread's thin samples of a state are scaled to the time its
	// exact ones leave (Result.DroppedOffCPU).
	Thin bool
	// Exact: Weight holds times, not nominal periods: the time of a
	// thread's exit path (ThreadTail), whose one-frame stack is
	// ExitPathPC. Such a sample is counted as it is, never scaled.
	Exact   bool
	TS      uint64
	Weight  [profile.NumStates]uint64
	Regs    symbolize.Regs
	Kernel  []uint64 // leaf first
	User    []uint64 // leaf first, frame-pointer walk
	Snap    []byte   // user stack memory at Regs.SP
	KernErr int32    // negative errno when the kernel stack could not be read
	UserErr int32
	// Unwind says how User was walked: 0 by frame pointer (bpf_get_stack),
	// else UnwindDone with why the in-kernel unwinder stopped in the low
	// byte (UnwindStop).
	Unwind uint32
}

// UnwindDone marks RawSample.Unwind when the in-kernel unwinder walked the
// user stack (UNW_DONE).
const UnwindDone = 0x100

// UnwindNoMap marks RawSample.Unwind when the thread's pc lay in none of the
// mappings the unwinder's tables know (UNW_NOMAP): they may be out of date.
const UnwindNoMap = 0x200

// Why the in-kernel unwinder stopped (UNWR_*).
const (
	UnwindEnd      = iota // the outermost frame: an undefined return address, a zero frame pointer or return address
	UnwindDepth           // the stack had more frames than a sample holds
	UnwindRead            // memory it needed could not be read (paged out, or a bad address)
	UnwindRule            // a rule it cannot follow (a DWARF expression, an odd register)
	UnwindStack           // the next frame was not above this one: a broken frame pointer
	UnwindInternal        // a map lookup failed
	NumUnwindStops
)

// UnwindStop returns why the in-kernel unwinder stopped, and false when it
// did not walk s.
func (s *RawSample) UnwindStop() (int, bool) {
	if s.Unwind&UnwindDone == 0 {
		return 0, false
	}
	return int(min(s.Unwind&0xff, NumUnwindStops-1)), true
}

// ThreadState is one thread's accounting record (struct tstate).
type ThreadState struct {
	InTS, OutTS, WakeTS, FirstTS uint64
	Time                         [profile.NumStates]uint64
	Acc                          [profile.NumStates]uint64
	PID                          uint32
	OnCPU                        bool
	OutState                     profile.State
	Exited                       bool
	// Resume mode: Based says LastExec and RdOut hold the thread's CPU time
	// (sum_exec_runtime) and schedstat run_delay at its latest resumption
	// (InTS).
	Based           bool
	LastExec, RdOut uint64
}

// ThreadExit is a thread's final record, sent when it exits.
type ThreadExit struct {
	PID, TID uint32
	TS       uint64
	Comm     string
	State    ThreadState
}

// ThreadTail is the CPU time a thread ran after its exit record: the kernel
// reports a thread's exit (sched_process_exit) before it tears down its
// memory, files and links, and the time that takes is read from the
// task's counter when the kernel frees it.
type ThreadTail struct {
	PID, TID uint32
	TS       uint64
	Nanos    uint64
	Comm     string
}

// Decode parses one ring-buffer record into a *RawSample, *ThreadExit,
// *ThreadTail or ProcessExec.
// Malformed input returns an error, never panics.
func Decode(b []byte) (any, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: %d bytes", ErrTruncated, len(b))
	}
	switch typ := binary.LittleEndian.Uint32(b); typ {
	case evSample:
		if s, err := decodeSample(b); err == nil {
			return s, nil
		} else {
			return nil, err
		}
	case evExit:
		if e, err := decodeExit(b); err == nil {
			return e, nil
		} else {
			return nil, err
		}
	case evTail:
		if len(b) < tailSize {
			return nil, fmt.Errorf("%w: exit tail record of %d bytes, want %d", ErrTruncated, len(b), tailSize)
		}
		le := binary.LittleEndian
		return &ThreadTail{PID: le.Uint32(b[4:]), TID: le.Uint32(b[8:]), TS: le.Uint64(b[16:]),
			Nanos: le.Uint64(b[24:]), Comm: cstring(b[32:48])}, nil
	case evExec:
		if len(b) < 8 {
			return nil, fmt.Errorf("%w: exec record of %d bytes", ErrTruncated, len(b))
		}
		return ProcessExec(binary.LittleEndian.Uint32(b[4:])), nil
	default:
		return nil, fmt.Errorf("unknown record type %d", typ)
	}
}

func cstring(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

func u64s(b []byte, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return out
}

func decodeSample(b []byte) (*RawSample, error) {
	if len(b) < sampleHeader {
		return nil, fmt.Errorf("%w: sample of %d bytes, want at least %d", ErrTruncated, len(b), sampleHeader)
	}
	le := binary.LittleEndian
	s := &RawSample{
		PID:   le.Uint32(b[4:]),
		TID:   le.Uint32(b[8:]),
		Final: le.Uint32(b[12:])&sampleFinal != 0,
		Carry: le.Uint32(b[12:])&sampleCarry != 0,
		Walk:  le.Uint32(b[12:])&sampleWalk != 0,
		Thin:  le.Uint32(b[12:])&sampleThin != 0,
		TS:    le.Uint64(b[16:]),
	}
	off := 24
	for i := 0; i < nstates; i++ {
		s.Weight[i] = le.Uint64(b[off:])
		off += 8
	}
	s.Comm = cstring(b[off : off+16])
	off += 16
	s.Regs = symbolize.Regs{IP: le.Uint64(b[off:]), SP: le.Uint64(b[off+8:]), BP: le.Uint64(b[off+16:])}
	off += 24
	klen := int32(le.Uint32(b[off:]))
	ulen := int32(le.Uint32(b[off+4:]))
	snap := le.Uint32(b[off+8:])
	s.Unwind = le.Uint32(b[off+12:])
	off += 16
	if klen > 8*maxStack || klen > 0 && klen%8 != 0 {
		return nil, fmt.Errorf("kernel stack length %d out of range", klen)
	}
	if ulen > 8*maxStack || ulen > 0 && ulen%8 != 0 {
		return nil, fmt.Errorf("user stack length %d out of range", ulen)
	}
	if snap > snapBytes {
		return nil, fmt.Errorf("stack snapshot length %d out of range", snap)
	}
	kn, un := int(max(klen, 0)), int(max(ulen, 0))
	if want := off + kn + un + int(snap); len(b) < want {
		return nil, fmt.Errorf("%w: sample of %d bytes, its stacks and snapshot need %d", ErrTruncated, len(b), want)
	}
	kstack := b[off : off+kn]
	ustack := b[off+kn : off+kn+un]
	snapb := b[off+kn+un : off+kn+un+int(snap)]
	if klen < 0 {
		s.KernErr = klen
	} else {
		s.Kernel = trimZero(u64s(kstack, kn/8))
	}
	if ulen < 0 {
		s.UserErr = ulen
	} else {
		s.User = trimZero(u64s(ustack, un/8))
	}
	s.Snap = append([]byte(nil), snapb...)
	return s, nil
}

// trimZero cuts a stack at its first zero address.
func trimZero(st []uint64) []uint64 {
	for i, a := range st {
		if a == 0 {
			return st[:i]
		}
	}
	return st
}

func decodeTState(b []byte) ThreadState {
	le := binary.LittleEndian
	var t ThreadState
	t.InTS = le.Uint64(b[0:])
	t.OutTS = le.Uint64(b[8:])
	t.WakeTS = le.Uint64(b[16:])
	t.FirstTS = le.Uint64(b[24:])
	off := 32
	for i := 0; i < nstates; i++ {
		t.Time[i] = le.Uint64(b[off:])
		off += 8
	}
	for i := 0; i < nstates; i++ {
		t.Acc[i] = le.Uint64(b[off:])
		off += 8
	}
	t.PID = le.Uint32(b[off:])
	t.OnCPU = b[off+4] != 0
	t.OutState = profile.State(b[off+5])
	if t.OutState >= profile.NumStates {
		t.OutState = profile.Other
	}
	t.Exited = b[off+6] != 0
	t.Based = b[off+7] != 0
	// wake_cpu and pad2 (8 bytes), then last_exec, last_runnable, rd_out.
	t.LastExec = le.Uint64(b[off+16:])
	t.RdOut = le.Uint64(b[off+32:])
	return t
}

func decodeExit(b []byte) (*ThreadExit, error) {
	if len(b) < exitSize {
		return nil, fmt.Errorf("%w: exit record of %d bytes, want %d", ErrTruncated, len(b), exitSize)
	}
	le := binary.LittleEndian
	e := &ThreadExit{PID: le.Uint32(b[4:]), TID: le.Uint32(b[8:]), TS: le.Uint64(b[16:])}
	e.State = decodeTState(b[24 : 24+tstateSize])
	e.Comm = cstring(b[24+tstateSize : 24+tstateSize+16])
	return e, nil
}
