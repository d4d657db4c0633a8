package collect

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"testing"
	"unsafe"

	"github.com/wallprof/wallprof/internal/collect/bpf"
	"github.com/wallprof/wallprof/internal/profile"
	"github.com/wallprof/wallprof/internal/symbolize"
)

// The records below are laid out by hand, field by field, following struct
// sample_event, struct exit_event and struct tstate in bpf/src/wallprof.bpf.c
// (x86-64, little endian), so that they check Decode against the C layout
// rather than against its own constants.

// sampleRec is the content of one struct sample_event.
type sampleRec struct {
	typ, pid, tid, flags uint32
	ts                   uint64
	weight               [5]uint64
	comm                 string // at most 16 bytes, NUL-padded
	ip, sp, bp           uint64
	klen, ulen           int32
	snapLen              uint32
	kstack, ustack       []uint64 // at most 127 each, zero-filled
	snap                 []byte   // at most 512, zero-filled
}

type leWriter struct{ b []byte }

func (w *leWriter) u8(v uint8)   { w.b = append(w.b, v) }
func (w *leWriter) u32(v uint32) { w.b = binary.LittleEndian.AppendUint32(w.b, v) }
func (w *leWriter) s32(v int32)  { w.u32(uint32(v)) }
func (w *leWriter) u64(v uint64) { w.b = binary.LittleEndian.AppendUint64(w.b, v) }

// fixed appends b padded with zeros to n bytes.
func (w *leWriter) fixed(b []byte, n int) {
	if len(b) > n {
		panic("field too long")
	}
	w.b = append(w.b, b...)
	w.b = append(w.b, make([]byte, n-len(b))...)
}

func (w *leWriter) u64s(v []uint64, n int) {
	if len(v) > n {
		panic("array too long")
	}
	for i := 0; i < n; i++ {
		if i < len(v) {
			w.u64(v[i])
		} else {
			w.u64(0)
		}
	}
}

func (r sampleRec) bytes() []byte {
	var w leWriter
	w.u32(r.typ)   // u32 type
	w.u32(r.pid)   // u32 pid
	w.u32(r.tid)   // u32 tid
	w.u32(r.flags) // u32 flags
	w.u64(r.ts)    // u64 ts
	for _, v := range r.weight {
		w.u64(v) // u64 weight[NSTATES]
	}
	w.fixed([]byte(r.comm), 16) // char comm[16]
	w.u64(r.ip)                 // u64 ip, sp, bp
	w.u64(r.sp)
	w.u64(r.bp)
	w.s32(r.klen)    // s32 klen
	w.s32(r.ulen)    // s32 ulen
	w.u32(r.snapLen) // u32 snap_len
	w.u32(0)         // u32 unwind
	// Sent packed: klen bytes of kstack, ulen of ustack, snap_len of snap.
	w.u64s(r.kstack[:min(len(r.kstack), max(int(r.klen), 0)/8)], max(int(r.klen), 0)/8)
	w.u64s(r.ustack[:min(len(r.ustack), max(int(r.ulen), 0)/8)], max(int(r.ulen), 0)/8)
	w.fixed(r.snap[:min(len(r.snap), int(r.snapLen))], int(r.snapLen))
	return w.b
}

// tstateRec is the content of one struct tstate.
type tstateRec struct {
	inTS, outTS, wakeTS, firstTS uint64
	time, acc                    [5]uint64
	pid                          uint32
	onCPU, outState, exited      uint8
	based                        uint8
	wakeCPU                      uint32
	lastExec, rdOut              uint64
}

// tstatePrefix is the size of the part of struct tstate that the decoder
// reads: in_ts up to and including rd_out (last_runnable, between them, is
// not decoded). Fields added after it (nvcsw, nivcsw) are the BPF program's
// own bookkeeping; the records built here fill them, and last_runnable,
// with a marker that the decoder must ignore. That the whole struct
// is tstateSize bytes is checked against bpf2go's output in
// TestRecordSizesMatchGenerated.
const tstatePrefix = 4*8 + 5*8 + 5*8 + 4 + 4*1 + 4 + 4 + 3*8 // 152

func (t tstateRec) write(w *leWriter) {
	w.u64(t.inTS)
	w.u64(t.outTS)
	w.u64(t.wakeTS)
	w.u64(t.firstTS)
	for _, v := range t.time {
		w.u64(v)
	}
	for _, v := range t.acc {
		w.u64(v)
	}
	w.u32(t.pid)
	w.u8(t.onCPU)
	w.u8(t.outState)
	w.u8(t.exited)
	w.u8(t.based)
	w.u32(t.wakeCPU)
	w.u32(0) // pad2
	w.u64(t.lastExec)
	w.u64(0xabababababababab) // last_runnable, not decoded
	w.u64(t.rdOut)
	for i := tstatePrefix; i < tstateSize; i++ {
		w.u8(0xab) // fields past pad2, not decoded
	}
}

// exitRec is the content of one struct exit_event.
type exitRec struct {
	typ, pid, tid uint32
	ts            uint64
	st            tstateRec
	comm          string
}

func (e exitRec) bytes() []byte {
	var w leWriter
	w.u32(e.typ)
	w.u32(e.pid)
	w.u32(e.tid)
	w.u32(0) // pad
	w.u64(e.ts)
	e.st.write(&w)
	w.fixed([]byte(e.comm), 16)
	return w.b
}

func goodSample() sampleRec {
	snap := make([]byte, 40)
	for i := range snap {
		snap[i] = byte(i + 1)
	}
	return sampleRec{
		typ: evSample, pid: 1234, tid: 1240, flags: 0, ts: 987654321,
		weight: [5]uint64{10, 20, 30, 40, 50},
		comm:   "worker-1",
		ip:     0x401000, sp: 0x7ffc0000, bp: 0x7ffc0040,
		klen: 8 * 3, ulen: 8 * 4, snapLen: uint32(len(snap)),
		kstack: []uint64{0xffffffff81000010, 0xffffffff81000020, 0xffffffff81000030},
		ustack: []uint64{0x401000, 0x402000, 0x403000, 0x404000},
		snap:   snap,
	}
}

func TestRecordSizesMatchC(t *testing.T) {
	// sizeof(struct sample_event) computed from the C declaration by hand.
	const cSample = 4*4 + 8 + 5*8 + 16 + 3*8 + 4*4 + 2*127*8 + 512
	if sampleSize != cSample {
		t.Errorf("sampleSize %d, C sample_event is %d bytes", sampleSize, cSample)
	}
	// struct tstate may grow past pad2; struct exit_event embeds it.
	if tstateSize < tstatePrefix || tstateSize%8 != 0 {
		t.Errorf("tstateSize %d: want at least %d and a multiple of 8", tstateSize, tstatePrefix)
	}
	if exitSize != 4*4+8+tstateSize+16 {
		t.Errorf("exitSize %d, want %d", exitSize, 4*4+8+tstateSize+16)
	}
	g := goodSample()
	if got, want := len(g.bytes()), sampleHeader+int(g.klen+g.ulen)+int(g.snapLen); got != want {
		t.Errorf("hand-built packed sample_event is %d bytes, want the header (%d) and its lengths: %d", got, sampleHeader, want)
	}
	if got := len(exitRec{}.bytes()); got != exitSize {
		t.Errorf("hand-built exit_event is %d bytes, exitSize is %d", got, exitSize)
	}
}

// TestRecordSizesMatchGenerated catches drift between the C structs (as
// bpf2go generated them) and the Go decoder's constants and offsets.
func TestRecordSizesMatchGenerated(t *testing.T) {
	var se bpf.WallprofSampleEvent
	var ee bpf.WallprofExitEvent
	var ts bpf.WallprofTstate
	var te bpf.WallprofTailEvent
	sizes := []struct {
		name       string
		goConst    int
		unsafeSize uintptr
		binSize    int
	}{
		{"sample_event", sampleSize, unsafe.Sizeof(se), binary.Size(se)},
		{"exit_event", exitSize, unsafe.Sizeof(ee), binary.Size(ee)},
		{"tstate", tstateSize, unsafe.Sizeof(ts), binary.Size(ts)},
		{"tail_event", tailSize, unsafe.Sizeof(te), binary.Size(te)},
	}
	for _, s := range sizes {
		if int(s.unsafeSize) != s.goConst || s.binSize != s.goConst {
			t.Errorf("%s: decoder size %d, generated struct: unsafe.Sizeof %d, binary.Size %d",
				s.name, s.goConst, s.unsafeSize, s.binSize)
		}
	}
	if len(se.Weight) != nstates || len(ts.Time) != nstates || len(ts.Acc) != nstates {
		t.Errorf("NSTATES in C (%d) differs from profile.NumStates (%d)", len(se.Weight), nstates)
	}
	if len(se.Kstack) != maxStack || len(se.Ustack) != maxStack || len(se.Snap) != snapBytes {
		t.Errorf("MAX_STACK/SNAP_BYTES in C (%d/%d/%d) differ from Go (%d/%d)",
			len(se.Kstack), len(se.Ustack), len(se.Snap), maxStack, snapBytes)
	}
	offsets := []struct {
		name      string
		got, want uintptr
	}{
		{"sample_event.pid", unsafe.Offsetof(se.Pid), 4},
		{"sample_event.tid", unsafe.Offsetof(se.Tid), 8},
		{"sample_event.flags", unsafe.Offsetof(se.Flags), 12},
		{"sample_event.ts", unsafe.Offsetof(se.Ts), 16},
		{"sample_event.weight", unsafe.Offsetof(se.Weight), 24},
		{"sample_event.comm", unsafe.Offsetof(se.Comm), 24 + 8*uintptr(nstates)},
		{"sample_event.ip", unsafe.Offsetof(se.Ip), 40 + 8*uintptr(nstates)},
		{"sample_event.klen", unsafe.Offsetof(se.Klen), uintptr(sampleHeader - 16)},
		{"sample_event.kstack", unsafe.Offsetof(se.Kstack), uintptr(sampleHeader)},
		{"sample_event.ustack", unsafe.Offsetof(se.Ustack), uintptr(sampleHeader + 8*maxStack)},
		{"sample_event.snap", unsafe.Offsetof(se.Snap), uintptr(sampleHeader + 16*maxStack)},
		{"exit_event.ts", unsafe.Offsetof(ee.Ts), 16},
		{"exit_event.st", unsafe.Offsetof(ee.St), 24},
		{"exit_event.comm", unsafe.Offsetof(ee.Comm), uintptr(24 + tstateSize)},
		{"tail_event.ts", unsafe.Offsetof(te.Ts), 16},
		{"tail_event.ns", unsafe.Offsetof(te.Ns), 24},
		{"tail_event.comm", unsafe.Offsetof(te.Comm), 32},
		{"tstate.time", unsafe.Offsetof(ts.Time), 32},
		{"tstate.acc", unsafe.Offsetof(ts.Acc), 32 + 8*uintptr(nstates)},
		{"tstate.pid", unsafe.Offsetof(ts.Pid), 32 + 16*uintptr(nstates)},
		{"tstate.on_cpu", unsafe.Offsetof(ts.OnCpu), 36 + 16*uintptr(nstates)},
		{"tstate.out_state", unsafe.Offsetof(ts.OutState), 37 + 16*uintptr(nstates)},
		{"tstate.exited", unsafe.Offsetof(ts.Exited), 38 + 16*uintptr(nstates)},
		{"tstate.based", unsafe.Offsetof(ts.Based), 39 + 16*uintptr(nstates)},
		{"tstate.last_exec", unsafe.Offsetof(ts.LastExec), 48 + 16*uintptr(nstates)},
		{"tstate.rd_out", unsafe.Offsetof(ts.RdOut), 64 + 16*uintptr(nstates)},
	}
	for _, o := range offsets {
		if o.got != o.want {
			t.Errorf("%s: generated offset %d, decoder reads it at %d", o.name, o.got, o.want)
		}
	}
}

// TestDecodeGeneratedStructs encodes the bpf2go structs and decodes them, so
// that a field moved in C but not in the decoder shows up as a wrong value.
func TestDecodeGeneratedStructs(t *testing.T) {
	var se bpf.WallprofSampleEvent
	se.Type, se.Pid, se.Tid, se.Flags, se.Ts = evSample, 7, 8, sampleFinal, 99
	se.Weight = [5]uint64{1, 2, 3, 4, 5}
	for i, c := range "gen" {
		se.Comm[i] = int8(c)
	}
	se.Ip, se.Sp, se.Bp = 11, 12, 13
	se.Klen, se.Ulen, se.SnapLen = 16, 8, 3
	se.Kstack[0], se.Kstack[1] = 0xffff0001, 0xffff0002
	se.Ustack[0] = 0x1000
	se.Snap[0], se.Snap[1], se.Snap[2] = 0xa, 0xb, 0xc
	var buf bytes.Buffer
	if err := binary.Write(&buf, binary.LittleEndian, &se); err != nil {
		t.Fatal(err)
	}
	// Packed as send_sample sends it: the header, then the lengths'
	// bytes of each array, at the generated struct's offsets.
	full := buf.Bytes()
	ko, uo, so := int(unsafe.Offsetof(se.Kstack)), int(unsafe.Offsetof(se.Ustack)), int(unsafe.Offsetof(se.Snap))
	packed := append([]byte(nil), full[:ko]...)
	packed = append(packed, full[ko:ko+int(se.Klen)]...)
	packed = append(packed, full[uo:uo+int(se.Ulen)]...)
	packed = append(packed, full[so:so+int(se.SnapLen)]...)
	ev, err := Decode(packed)
	if err != nil {
		t.Fatal(err)
	}
	s := ev.(*RawSample)
	want := &RawSample{PID: 7, TID: 8, Comm: "gen", Final: true, TS: 99, Weight: [5]uint64{1, 2, 3, 4, 5},
		Regs: symbolize.Regs{IP: 11, SP: 12, BP: 13}, Kernel: []uint64{0xffff0001, 0xffff0002},
		User: []uint64{0x1000}, Snap: []byte{0xa, 0xb, 0xc}}
	checkSample(t, s, want)

	var ee bpf.WallprofExitEvent
	ee.Type, ee.Pid, ee.Tid, ee.Ts = evExit, 21, 22, 23
	ee.St = bpf.WallprofTstate{InTs: 1, OutTs: 2, WakeTs: 3, FirstTs: 4, Time: [5]uint64{5, 6, 7, 8, 9},
		Acc: [5]uint64{10, 11, 12, 13, 14}, Pid: 21, OnCpu: 1, OutState: 3,
		Exited: 1, Based: 1, WakeCpu: 5, LastExec: 31, LastRunnable: 32, RdOut: 33}
	for i, c := range "exiting" {
		ee.Comm[i] = int8(c)
	}
	buf.Reset()
	if err := binary.Write(&buf, binary.LittleEndian, &ee); err != nil {
		t.Fatal(err)
	}
	ev, err = Decode(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	e := ev.(*ThreadExit)
	wantSt := ThreadState{InTS: 1, OutTS: 2, WakeTS: 3, FirstTS: 4, Time: [5]uint64{5, 6, 7, 8, 9},
		Acc: [5]uint64{10, 11, 12, 13, 14}, PID: 21, OnCPU: true,
		OutState: profile.Disk, Exited: true, Based: true, LastExec: 31, RdOut: 33}
	if e.PID != 21 || e.TID != 22 || e.TS != 23 || e.Comm != "exiting" || e.State != wantSt {
		t.Errorf("exit = %+v, want pid 21 tid 22 ts 23 comm exiting state %+v", e, wantSt)
	}
}

func checkSample(t *testing.T, got, want *RawSample) {
	t.Helper()
	if got.PID != want.PID || got.TID != want.TID || got.Final != want.Final || got.TS != want.TS ||
		got.Comm != want.Comm || got.Weight != want.Weight || got.Regs != want.Regs ||
		got.KernErr != want.KernErr || got.UserErr != want.UserErr {
		t.Errorf("sample header = %+v\nwant %+v", got, want)
	}
	if !slices.Equal(got.Kernel, want.Kernel) {
		t.Errorf("kernel stack = %#x, want %#x", got.Kernel, want.Kernel)
	}
	if !slices.Equal(got.User, want.User) {
		t.Errorf("user stack = %#x, want %#x", got.User, want.User)
	}
	if !bytes.Equal(got.Snap, want.Snap) {
		t.Errorf("snapshot = %x, want %x", got.Snap, want.Snap)
	}
}

func decodeSampleT(t *testing.T, b []byte) *RawSample {
	t.Helper()
	ev, err := Decode(b)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	s, ok := ev.(*RawSample)
	if !ok {
		t.Fatalf("Decode returned %T, want *RawSample", ev)
	}
	return s
}

func TestDecodeSample(t *testing.T) {
	r := goodSample()
	s := decodeSampleT(t, r.bytes())
	checkSample(t, s, &RawSample{
		PID: 1234, TID: 1240, Comm: "worker-1", TS: 987654321,
		Weight: [5]uint64{10, 20, 30, 40, 50},
		Regs:   symbolize.Regs{IP: 0x401000, SP: 0x7ffc0000, BP: 0x7ffc0040},
		Kernel: r.kstack, User: r.ustack, Snap: r.snap,
	})
}

func TestDecodeSampleFinalFlag(t *testing.T) {
	for _, c := range []struct {
		flags uint32
		final bool
	}{{0, false}, {sampleFinal, true}, {2, false}, {3, true}, {0xffffffff, true}} {
		r := goodSample()
		r.flags = c.flags
		if s := decodeSampleT(t, r.bytes()); s.Final != c.final {
			t.Errorf("flags %#x: Final = %v, want %v", c.flags, s.Final, c.final)
		}
	}
}

func TestDecodeSampleFlags(t *testing.T) {
	for _, c := range []struct {
		flags                    uint32
		final, carry, walk, thin bool
	}{{0, false, false, false, false}, {sampleWalk, false, false, true, false}, {sampleCarry | sampleWalk, false, true, true, false},
		{sampleFinal, true, false, false, false}, {sampleThin, false, false, false, true}, {0xffffffff, true, true, true, true}} {
		r := goodSample()
		r.flags = c.flags
		s := decodeSampleT(t, r.bytes())
		if s.Final != c.final || s.Carry != c.carry || s.Walk != c.walk || s.Thin != c.thin {
			t.Errorf("flags %#x: Final, Carry, Walk, Thin = %v, %v, %v, %v, want %v, %v, %v, %v", c.flags, s.Final, s.Carry, s.Walk, s.Thin, c.final, c.carry, c.walk, c.thin)
		}
	}
}

func TestDecodeSampleComm(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{"", ""},
		{"a", "a"},
		{"exactly16bytes!!", "exactly16bytes!!"}, // no NUL: all 16 bytes
		{"ab\x00cd", "ab"},                       // cut at the first NUL
	} {
		r := goodSample()
		r.comm = c.raw
		if s := decodeSampleT(t, r.bytes()); s.Comm != c.want {
			t.Errorf("comm %q: got %q, want %q", c.raw, s.Comm, c.want)
		}
	}
}

func TestDecodeSampleStacks(t *testing.T) {
	full := make([]uint64, maxStack)
	for i := range full {
		full[i] = uint64(0x1000 + i)
	}
	for _, c := range []struct {
		name  string
		stack []uint64
		len   int32
		want  []uint64
	}{
		{"empty", nil, 0, nil},
		{"trimmed at first zero", []uint64{1, 2, 0, 4, 5}, 40, []uint64{1, 2}},
		{"leading zero", []uint64{0, 2, 3}, 24, nil},
		{"length shorter than data", []uint64{1, 2, 3, 4}, 16, []uint64{1, 2}},
		{"full", full, 8 * maxStack, full},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := goodSample()
			r.kstack, r.klen = c.stack, c.len
			r.ustack, r.ulen = c.stack, c.len
			s := decodeSampleT(t, r.bytes())
			if !slices.Equal(s.Kernel, c.want) || !slices.Equal(s.User, c.want) {
				t.Errorf("kernel %#x, user %#x; want %#x", s.Kernel, s.User, c.want)
			}
			if s.KernErr != 0 || s.UserErr != 0 {
				t.Errorf("KernErr %d, UserErr %d; want 0", s.KernErr, s.UserErr)
			}
		})
	}
}

func TestDecodeSampleStackErrors(t *testing.T) {
	r := goodSample()
	r.klen = -14 // -EFAULT
	s := decodeSampleT(t, r.bytes())
	if s.KernErr != -14 || len(s.Kernel) != 0 {
		t.Errorf("klen -14: KernErr %d, Kernel %#x; want -14 and no frames", s.KernErr, s.Kernel)
	}
	if s.UserErr != 0 || !slices.Equal(s.User, r.ustack) {
		t.Errorf("klen -14: user stack %#x (err %d) should be unaffected", s.User, s.UserErr)
	}

	r = goodSample()
	r.ulen = -2
	s = decodeSampleT(t, r.bytes())
	if s.UserErr != -2 || len(s.User) != 0 {
		t.Errorf("ulen -2: UserErr %d, User %#x; want -2 and no frames", s.UserErr, s.User)
	}
	if s.KernErr != 0 || !slices.Equal(s.Kernel, r.kstack) {
		t.Errorf("ulen -2: kernel stack %#x (err %d) should be unaffected", s.Kernel, s.KernErr)
	}
}

func TestDecodeSampleSnapshot(t *testing.T) {
	full := make([]byte, snapBytes)
	for i := range full {
		full[i] = byte(i*7 + 1)
	}
	for _, n := range []uint32{0, 1, 100, snapBytes} {
		r := goodSample()
		r.snap, r.snapLen = full, n
		b := r.bytes()
		s := decodeSampleT(t, b)
		if !bytes.Equal(s.Snap, full[:n]) {
			t.Errorf("snap_len %d: got %d bytes, want %d", n, len(s.Snap), n)
		}
		// The snapshot must not alias the ring-buffer record, which is reused.
		for i := range b {
			b[i] = 0xee
		}
		if !bytes.Equal(s.Snap, full[:n]) {
			t.Errorf("snap_len %d: snapshot changed when the record buffer was overwritten", n)
		}
	}
}

func TestDecodeSampleStacksDoNotAlias(t *testing.T) {
	r := goodSample()
	b := r.bytes()
	s := decodeSampleT(t, b)
	for i := range b {
		b[i] = 0xee
	}
	if !slices.Equal(s.Kernel, r.kstack) || !slices.Equal(s.User, r.ustack) || s.Comm != r.comm {
		t.Errorf("decoded sample changed when the record buffer was overwritten")
	}
}

func TestDecodeSampleLongerRecord(t *testing.T) {
	// Ring-buffer records may carry trailing padding.
	b := append(goodSample().bytes(), make([]byte, 8)...)
	s := decodeSampleT(t, b)
	if s.PID != 1234 || len(s.User) != 4 {
		t.Errorf("sample with trailing bytes decoded as %+v", s)
	}
}

func TestDecodeSampleBadLengths(t *testing.T) {
	for _, c := range []struct {
		name       string
		klen, ulen int32
		snapLen    uint32
	}{
		{"klen too long", 8*maxStack + 8, 0, 0},
		{"klen huge", 1 << 30, 0, 0},
		{"klen not a multiple of 8", 12, 0, 0},
		{"klen odd", 1, 0, 0},
		{"ulen too long", 0, 8*maxStack + 8, 0},
		{"ulen huge", 0, 0x7fffffff, 0},
		{"ulen not a multiple of 8", 0, 20, 0},
		{"snap_len too long", 0, 0, snapBytes + 1},
		{"snap_len huge", 0, 0, 0xffffffff},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := goodSample()
			r.klen, r.ulen, r.snapLen = c.klen, c.ulen, c.snapLen
			ev, err := Decode(r.bytes())
			if err == nil {
				t.Fatalf("Decode accepted it: %+v", ev)
			}
			if errors.Is(err, ErrTruncated) {
				t.Errorf("error %v should not be ErrTruncated", err)
			}
		})
	}
}

func TestDecodeTruncated(t *testing.T) {
	sample := goodSample().bytes()
	exit := exitRec{typ: evExit, pid: 1, tid: 2, comm: "x"}.bytes()
	cases := map[string][]byte{
		"nil":                   nil,
		"empty":                 {},
		"3 bytes":               {1, 0, 0},
		"sample type only":      sample[:4],
		"sample header only":    sample[:sampleHeader],
		"sample one byte short": sample[:len(sample)-1],
		"exit type only":        exit[:4],
		"exit without comm":     exit[:24+tstateSize],
		"exit one byte short":   exit[:exitSize-1],
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			ev, err := Decode(b)
			if !errors.Is(err, ErrTruncated) {
				t.Errorf("Decode(%d bytes) = %v, %v; want ErrTruncated", len(b), ev, err)
			}
		})
	}
}

func TestDecodeUnknownType(t *testing.T) {
	for _, typ := range []uint32{0, 5, 0xffffffff} {
		b := goodSample().bytes()
		binary.LittleEndian.PutUint32(b, typ)
		ev, err := Decode(b)
		if err == nil {
			t.Errorf("type %d: Decode = %v, %v; want an error", typ, ev, err)
		}
		if errors.Is(err, ErrTruncated) {
			t.Errorf("type %d: error %v should not be ErrTruncated", typ, err)
		}
	}
}

// TestDecodeTail: a tail record gives the exit path's time of a thread;
// a short one is ErrTruncated.
func TestDecodeTail(t *testing.T) {
	b := make([]byte, tailSize)
	binary.LittleEndian.PutUint32(b, evTail)
	binary.LittleEndian.PutUint32(b[4:], 700)
	binary.LittleEndian.PutUint32(b[8:], 701)
	binary.LittleEndian.PutUint64(b[16:], 99)
	binary.LittleEndian.PutUint64(b[24:], 4321)
	copy(b[32:], "worker")
	ev, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	want := ThreadTail{PID: 700, TID: 701, TS: 99, Nanos: 4321, Comm: "worker"}
	if e, ok := ev.(*ThreadTail); !ok || *e != want {
		t.Errorf("Decode = %#v, want %#v", ev, want)
	}
	if ev, err := Decode(b[:tailSize-1]); !errors.Is(err, ErrTruncated) {
		t.Errorf("a tail record one byte short: %v, %v; want ErrTruncated", ev, err)
	}
}

// TestDecodeExec: an exec record names the process; a short one is
// ErrTruncated.
func TestDecodeExec(t *testing.T) {
	b := binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, evExec), 4321)
	ev, err := Decode(b)
	if err != nil || ev != ProcessExec(4321) {
		t.Errorf("Decode = %v, %v; want ProcessExec(4321)", ev, err)
	}
	if _, err := Decode(b[:6]); !errors.Is(err, ErrTruncated) {
		t.Errorf("6 bytes: %v, want ErrTruncated", err)
	}
}

func TestDecodeExit(t *testing.T) {
	rec := exitRec{
		typ: evExit, pid: 500, tid: 501, ts: 123456789,
		st: tstateRec{
			inTS: 100, outTS: 200, wakeTS: 250, firstTS: 50,
			time:  [5]uint64{1, 2, 3, 4, 5},
			acc:   [5]uint64{0, 7, 8, 9, 10},
			pid:   500,
			onCPU: 0, outState: uint8(profile.Sleeping), exited: 1, wakeCPU: 3,
		},
		comm: "thread name 15c",
	}
	ev, err := Decode(rec.bytes())
	if err != nil {
		t.Fatal(err)
	}
	e, ok := ev.(*ThreadExit)
	if !ok {
		t.Fatalf("Decode returned %T, want *ThreadExit", ev)
	}
	want := ThreadExit{PID: 500, TID: 501, TS: 123456789, Comm: "thread name 15c", State: ThreadState{
		InTS: 100, OutTS: 200, WakeTS: 250, FirstTS: 50,
		Time: [5]uint64{1, 2, 3, 4, 5}, Acc: [5]uint64{0, 7, 8, 9, 10},
		PID: 500, OnCPU: false, OutState: profile.Sleeping, Exited: true,
	}}
	if *e != want {
		t.Errorf("exit = %+v\nwant   %+v", *e, want)
	}
}

func TestDecodeExitStateFlags(t *testing.T) {
	for _, c := range []struct {
		onCPU, outState, exited uint8
		want                    ThreadState
	}{
		{1, 0, 0, ThreadState{OnCPU: true, OutState: profile.OnCPU}},
		{0, uint8(profile.Runnable), 0, ThreadState{OutState: profile.Runnable}},
		{0, uint8(profile.Other), 1, ThreadState{OutState: profile.Other, Exited: true}},
		{2, uint8(profile.Disk), 255, ThreadState{OnCPU: true, OutState: profile.Disk, Exited: true}},
		// Out-of-range states become Other rather than indexing past the arrays.
		{0, uint8(profile.NumStates), 0, ThreadState{OutState: profile.Other}},
		{0, 255, 0, ThreadState{OutState: profile.Other}},
	} {
		rec := exitRec{typ: evExit, st: tstateRec{onCPU: c.onCPU, outState: c.outState, exited: c.exited}}
		ev, err := Decode(rec.bytes())
		if err != nil {
			t.Fatal(err)
		}
		if got := ev.(*ThreadExit).State; got != c.want {
			t.Errorf("on_cpu %d out_state %d exited %d: got %+v, want %+v",
				c.onCPU, c.outState, c.exited, got, c.want)
		}
	}
}

func TestDecodeTStateMatchesMapValue(t *testing.T) {
	// readThreads decodes the thread table's values with decodeTState.
	var w leWriter
	tstateRec{inTS: 1, outTS: 2, wakeTS: 3, firstTS: 4, pid: 7, onCPU: 1,
		outState: 2, exited: 0, wakeCPU: 9}.write(&w)
	if len(w.b) != tstateSize {
		t.Fatalf("tstate is %d bytes, want %d", len(w.b), tstateSize)
	}
	got := decodeTState(w.b)
	want := ThreadState{InTS: 1, OutTS: 2, WakeTS: 3, FirstTS: 4, PID: 7, OnCPU: true,
		OutState: profile.Sleeping}
	if got != want {
		t.Errorf("decodeTState = %+v, want %+v", got, want)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(goodSample().bytes())
	r := goodSample()
	r.flags, r.klen, r.ulen = sampleFinal, -14, -14
	f.Add(r.bytes())
	r = goodSample()
	r.klen = 12
	f.Add(r.bytes())
	f.Add(exitRec{typ: evExit, pid: 1, tid: 2, st: tstateRec{outState: 9}}.bytes())
	tail := make([]byte, tailSize)
	tail[0] = evTail
	copy(tail[32:], "worker")
	f.Add(tail)
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0})
	f.Add([]byte{2, 0, 0, 0, 1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := Decode(b)
		if err != nil {
			return
		}
		switch ev := ev.(type) {
		case *RawSample:
			if n := sampleHeader + 8*len(ev.Kernel) + 8*len(ev.User) + len(ev.Snap); len(b) < n {
				t.Fatalf("decoded a sample of %d bytes' content from %d bytes", n, len(b))
			}
			if len(ev.Kernel) > maxStack || len(ev.User) > maxStack || len(ev.Snap) > snapBytes {
				t.Fatalf("oversized sample: %d/%d frames, %d snapshot bytes",
					len(ev.Kernel), len(ev.User), len(ev.Snap))
			}
			if slices.Contains(ev.Kernel, 0) || slices.Contains(ev.User, 0) {
				t.Fatalf("stack holds a zero address")
			}
			if len(ev.Comm) > 16 {
				t.Fatalf("comm of %d bytes", len(ev.Comm))
			}
		case *ThreadExit:
			if len(b) < exitSize {
				t.Fatalf("decoded an exit from %d bytes", len(b))
			}
			if ev.State.OutState >= profile.NumStates {
				t.Fatalf("out state %d", ev.State.OutState)
			}
		case *ThreadTail:
			if len(b) < tailSize {
				t.Fatalf("decoded an exit tail from %d bytes", len(b))
			}
			if len(ev.Comm) > 16 {
				t.Fatalf("comm of %d bytes", len(ev.Comm))
			}
		case ProcessExec:
			if len(b) < 8 {
				t.Fatalf("decoded an exec from %d bytes", len(b))
			}
		default:
			t.Fatalf("Decode returned %T", ev)
		}
	})
}
