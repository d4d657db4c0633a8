package goroutines

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"reflect"
	"slices"
	"syscall"
	"testing"
	"unsafe"

	"github.com/wallprof/wallprof/internal/goruntime/rtlayout"
	"github.com/wallprof/wallprof/internal/symbolize/gopclntab"
)

// fakeMem is a target's memory made of regions; onRead may change a region
// as it is read, to play a target that runs while we read it.
type fakeMem struct {
	regions map[uint64][]byte
	onRead  func(addr uint64)
	calls   int
}

func (m *fakeMem) syscalls() int { return m.calls }
func (m *fakeMem) close() error  { return nil }

func (m *fakeMem) readAll(rs []read) {
	m.calls++
	for i := range rs {
		rs[i].ok = false
		for base, b := range m.regions {
			// Within the region, without overflow (an address near
			// 2^64 is a fault, as process_vm_readv has it).
			off := rs[i].addr - base
			if rs[i].addr >= base && off <= uint64(len(b)) && uint64(len(rs[i].buf)) <= uint64(len(b))-off {
				if m.onRead != nil {
					m.onRead(rs[i].addr)
				}
				copy(rs[i].buf, b[off:])
				rs[i].ok = true
				break
			}
		}
	}
}

func put(b []byte, off int, v uint64) { binary.LittleEndian.PutUint64(b[off:], v) }

// fakeTarget builds the memory of a target with the go1.26 layout: allgs
// at 0x1000 holding the gs at 0x10000 (waiting in chan receive, a stack of
// three frames), 0x20000 (dead) and 0x30000 (waiting, its goid changes on
// every read) and 0x40000 (waiting, its frame chain goes down the stack).
func fakeTarget(t *testing.T) (*Reader, *fakeMem) {
	l, err := rtlayout.ForVersion("go1.26")
	if err != nil {
		t.Fatal(err)
	}
	o := l.Offsets
	m := &fakeMem{regions: map[uint64][]byte{}}
	allgs := make([]byte, 24)
	put(allgs, 0, 0x2000)
	put(allgs, 8, 4)
	put(allgs, 16, 4)
	m.regions[0x1000] = allgs
	arr := make([]byte, 32)
	m.regions[0x2000] = arr
	for i, gp := range []uint64{0x10000, 0x20000, 0x30000, 0x40000} {
		put(arr, i*8, gp)
		g := make([]byte, o.GSize)
		put(g, o.GGoid, uint64(i+1))
		binary.LittleEndian.PutUint32(g[o.GAtomicstatus:], uint32(Waiting))
		g[o.GWaitreason] = uint8(slices.Index(l.WaitReasons, "chan receive"))
		lo := gp * 16
		put(g, o.GStackLo, lo)
		put(g, o.GStackHi, lo+0x2000)
		put(g, o.GSchedSP, lo+0x1f00)
		put(g, o.GSchedBP, lo+0x1f40)
		put(g, o.GSchedPC, 0x401000)
		put(g, o.GGopc, 0x405000)
		put(g, o.GStartpc, 0x406000)
		if i == 1 {
			binary.LittleEndian.PutUint32(g[o.GAtomicstatus:], uint32(Dead))
		}
		m.regions[gp] = g
		stack := make([]byte, 0x100) // [lo+0x1f00, hi)
		put(stack, 0x40, lo+0x1f80)  // frame at lo+0x1f40: next bp, return address
		put(stack, 0x48, 0x402000)
		put(stack, 0x80, 0) // outermost frame
		put(stack, 0x88, 0x403000)
		if i == 3 {
			put(stack, 0x40, lo+0x1f20) // below the frame: broken chain
		}
		m.regions[lo+0x1f00] = stack
	}
	m.onRead = func(addr uint64) {
		if addr == 0x30000 {
			g := m.regions[0x30000]
			put(g, o.GGoid, binary.LittleEndian.Uint64(g[o.GGoid:])+100)
		}
	}
	r := &Reader{layout: l, allgs: 0x1000, mem: m, system: map[uint64]bool{}, maxRetry: 3, maxDepth: 512, maxStack: 256 << 10, maxAllgs: maxAllgs, frame: frame{maxDepth: 512}}
	return r, m
}

func TestSnapshotFake(t *testing.T) {
	r, m := fakeTarget(t)
	snap, err := r.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if snap.AllGs != 4 || len(snap.Goroutines) != 1 {
		t.Fatalf("snapshot %+v: want 1 goroutine of 4", snap)
	}
	g := snap.Goroutines[0]
	if g.ID != 1 || g.Status != Waiting || g.WaitReason != "chan receive" || g.GoPC != 0x405000 || g.StartPC != 0x406000 || g.Addr != 0x10000 {
		t.Errorf("goroutine %+v", g)
	}
	if want := []uint64{0x401000, 0x402000, 0x403000}; !slices.Equal(g.Stack, want) || g.Truncated {
		t.Errorf("stack %#x (truncated %v), want %#x", g.Stack, g.Truncated, want)
	}
	// The g whose goid changes at every read and the one with a broken
	// frame chain are retried 3 times each and dropped; the dead one is
	// skipped silently.
	if snap.Dropped != 2 || snap.Retried != 6 {
		t.Errorf("dropped %d, retried %d; want 2 and 6", snap.Dropped, snap.Retried)
	}
	// Reads are batched: allgs header, array, then 2 batches per round.
	if m.calls != 2+2*4 {
		t.Errorf("%d batches of reads, want 10", m.calls)
	}
}

// TestCheckLayout checks Open's sanity check on a fake target: its first
// g (goid 1) has no function table to name its start, so it does not fit;
// an empty allgs means the runtime has not started.
func TestCheckLayout(t *testing.T) {
	r, m := fakeTarget(t)
	if err := r.checkLayout(); !errors.Is(err, ErrLayoutMismatch) {
		t.Errorf("checkLayout = %v, want ErrLayoutMismatch", err)
	}
	put(m.regions[0x1000], 8, 0) // len(allgs) = 0
	if err := r.checkLayout(); !errors.Is(err, ErrNotReady) {
		t.Errorf("checkLayout with no goroutines = %v, want ErrNotReady", err)
	}
}

func TestStackCache(t *testing.T) {
	r, m := fakeTarget(t)
	r.stacks, r.cacheAge = nil, 16
	first, err := r.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	second, err := r.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if first.CachedStacks != 0 || second.CachedStacks != 1 || !slices.Equal(first.Goroutines[0].Stack, second.Goroutines[0].Stack) {
		t.Fatalf("cached %d then %d; stacks %#x then %#x", first.CachedStacks, second.CachedStacks, first.Goroutines[0].Stack, second.Goroutines[0].Stack)
	}
	// The goroutine ran and parked elsewhere: its stack is read again.
	o := r.layout.Offsets
	put(m.regions[0x10000], o.GSchedPC, 0x401234)
	third, err := r.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if third.CachedStacks != 0 || third.Goroutines[0].Stack[0] != 0x401234 {
		t.Errorf("after a change: cached %d, stack %#x", third.CachedStacks, third.Goroutines[0].Stack)
	}
	// Entries expire.
	for i := 0; i < 40; i++ {
		if s, _ := r.Snapshot(); s.CachedStacks == 0 {
			return
		}
	}
	t.Error("cached stack never read again")
}

func TestUnwind(t *testing.T) {
	const base, hi = 0x1000, 0x1100
	win := make([]byte, hi-base)
	frameAt := func(at, next, ret uint64) { put(win, int(at-base), next); put(win, int(at-base)+8, ret) }
	frameAt(0x1010, 0x1040, 0xa)
	frameAt(0x1040, 0x1080, 0xb)
	frameAt(0x1080, 0, 0xc)
	// Frame sizes of the functions at 0xa and 0xb that put their frame
	// pointers where the chain says.
	sizes := map[uint64]int64{0xa: 0x28, 0xb: 0x38, 0x8: 0x40, 0xc: 0} // 0xc: runtime.goexit
	checked := frame{maxDepth: 100, callerFrame: func(ret uint64) (int64, bool) { d, ok := sizes[ret]; return d, ok },
		goexitStart: 0xb, goexitEnd: 0xc} // 0xc is in runtime.goexit
	plain := frame{maxDepth: 100}
	same := func(u unwound, stack []uint64, truncated, broken, suspect bool) bool {
		return slices.Equal(u.stack, stack) && u.truncated == truncated && u.broken == broken && u.suspect == suspect
	}
	for _, f := range []frame{plain, checked} {
		if u := unwind(win, base, hi, 0x9, 0x1010, false, f); !same(u, []uint64{0x9, 0xa, 0xb, 0xc}, false, false, false) {
			t.Errorf("unwind = %+v", u)
		}
	}
	if u := unwind(win, base, hi, 0x9, 0x1010, false, frame{maxDepth: 2}); !same(u, []uint64{0x9, 0xa}, true, false, false) {
		t.Errorf("depth 2: %+v", u)
	}
	if u := unwind(win[:0x50], base, hi, 0x9, 0x1010, false, plain); !same(u, []uint64{0x9, 0xa, 0xb}, true, false, false) {
		t.Errorf("short window: %+v", u)
	}
	// No frame pointer to follow (a frameless function in a syscall on a
	// runtime that does not save bp): the top frame only, marked partial,
	// not a complete stack.
	if u := unwind(win, base, hi, 0x9, 0, false, checked); !same(u, []uint64{0x9}, true, false, false) {
		t.Errorf("no frame pointer: %+v", u)
	}
	// Stopped at a function's entry: its return address is at sp (base),
	// then the caller's frame pointer chain.
	put(win, 0, 0x8)
	if u := unwind(win, base, hi, 0x7, 0x1040, true, checked); !same(u, []uint64{0x7, 0x8, 0xb, 0xc}, false, false, false) {
		t.Errorf("at entry: %+v", u)
	}
	// A frameless function (0xd, pcsp 0) interrupted by an asynchronous
	// preemption: the frame at 0x1010 has its caller's frame pointer and
	// its return address (0xe) is right above that frame.
	win2 := slices.Clone(win)
	put(win2, 0x10, 0x1080)
	put(win2, 0x18, 0xd)
	put(win2, 0x20, 0xe)
	sizes[0xd], sizes[0xe] = 0, 0x60
	if u := unwind(win2, base, hi, 0x9, 0x1010, false, checked); !same(u, []uint64{0x9, 0xd, 0xe, 0xc}, false, false, false) {
		t.Errorf("frameless leaf: %+v", u)
	}
	sizes[0xe] = 0x58
	if u := unwind(win2, base, hi, 0x9, 0x1010, false, checked); !u.suspect {
		t.Errorf("frameless leaf, caller frame misplaced: %+v", u)
	}
	// A frame that is not where its caller's frame size says.
	sizes[0xb] = 0x30
	if u := unwind(win, base, hi, 0x9, 0x1010, false, checked); !same(u, []uint64{0x9, 0xa, 0xb}, false, false, true) {
		t.Errorf("misplaced frame: %+v", u)
	}
	sizes[0xb] = 0x38
	checked.goexitEnd = 0xb // the chain ends outside runtime.goexit
	if u := unwind(win, base, hi, 0x9, 0x1010, false, checked); !same(u, []uint64{0x9, 0xa, 0xb, 0xc}, false, false, true) {
		t.Errorf("chain ending outside runtime.goexit: %+v", u)
	}
	checked.goexitEnd = 0xc
	sizes[0xc] = 0x10 // the chain ends in a function with a frame
	if u := unwind(win, base, hi, 0x9, 0x1010, false, checked); !same(u, []uint64{0x9, 0xa, 0xb, 0xc}, false, false, true) {
		t.Errorf("chain ending in a framed function: %+v", u)
	}
	delete(sizes, 0xa) // a return address outside every function
	if u := unwind(win, base, hi, 0x9, 0x1010, false, checked); !same(u, []uint64{0x9, 0xa}, false, false, true) {
		t.Errorf("unknown return address: %+v", u)
	}
	frameAt(0x1080, 0x1040, 0xc) // points back down: a loop
	if u := unwind(win, base, hi, 0x9, 0x1010, false, plain); !u.broken {
		t.Error("accepted a frame chain that goes down the stack")
	}
	frameAt(0x1080, 0x2000, 0xc) // leaves the stack
	if u := unwind(win, base, hi, 0x9, 0x1010, false, plain); !u.broken {
		t.Error("accepted a frame pointer outside the stack")
	}
}

// TestVMReaderPartial reads this process's own memory (no privilege
// needed) with an unmapped range in the middle of a batch: that range
// fails alone.
func TestVMReaderPartial(t *testing.T) {
	src := []byte("0123456789abcdef")
	addr := uint64(uintptr(unsafe.Pointer(&src[0])))
	m := &vmReader{pid: os.Getpid()}
	rs := []read{
		{addr: addr, buf: make([]byte, 4)},
		{addr: 8, buf: make([]byte, 4)}, // never mapped
		{addr: addr + 10, buf: make([]byte, 6)},
		{addr: addr, buf: nil},
	}
	m.readAll(rs)
	if !rs[0].ok || string(rs[0].buf) != "0123" || rs[1].ok || !rs[2].ok || string(rs[2].buf) != "abcdef" || !rs[3].ok {
		t.Errorf("reads: %+v", rs)
	}
	if m.syscalls() != 2 {
		t.Errorf("%d system calls, want 2 (one stopped by the bad range)", m.syscalls())
	}
	f, err := os.Open("/proc/self/mem")
	if err != nil {
		t.Skipf("no /proc/self/mem: %v", err)
	}
	fm := &fileReader{f: f}
	defer fm.close()
	rs[0].ok, rs[2].ok = false, false
	fm.readAll(rs[:3])
	if !rs[0].ok || rs[1].ok || !rs[2].ok || string(rs[2].buf) != "abcdef" {
		t.Errorf("pread reads: %+v", rs)
	}
}

// TestLabelMapGrowing decodes a Go 1.22 label map that is still growing
// (same-size grow: two old buckets, one already moved) and has an overflow
// bucket.
func TestLabelMapGrowing(t *testing.T) {
	l, err := rtlayout.ForVersion("go1.22")
	if err != nil {
		t.Fatal(err)
	}
	m := &fakeMem{regions: map[uint64][]byte{}}
	r := &Reader{layout: l, mem: m}
	strs := make([]byte, 0x100)
	m.regions[0x9000] = strs
	next := uint64(0x9000)
	str := func(s string) strRef {
		copy(strs[next-0x9000:], s)
		ref := strRef{next, uint64(len(s))}
		next += uint64(len(s))
		return ref
	}
	bucket := func(tophash0 byte, kv ...string) []byte {
		bk := make([]byte, rtlayout.BucketSize)
		bk[0] = tophash0
		for i := 0; i < len(kv); i += 2 {
			slot := i / 2
			bk[slot] = max(bk[slot], rtlayout.BucketMinTopHash)
			k, v := str(kv[i]), str(kv[i+1])
			put(bk, rtlayout.BucketKeys+slot*16, k.ptr)
			put(bk, rtlayout.BucketKeys+slot*16+8, k.n)
			put(bk, rtlayout.BucketValues+slot*16, v.ptr)
			put(bk, rtlayout.BucketValues+slot*16+8, v.n)
		}
		return bk
	}
	// New buckets at 0x2000 (B=1): bucket 0 has an overflow at 0x3000.
	b0, b1 := bucket(rtlayout.BucketMinTopHash, "a", "1"), bucket(rtlayout.BucketMinTopHash, "b", "2")
	put(b0, rtlayout.BucketOverflow, 0x3000)
	m.regions[0x2000] = append(b0, b1...)
	m.regions[0x3000] = bucket(rtlayout.BucketMinTopHash, "c", "3")
	// Old buckets at 0x4000: the first was moved (its slots must be
	// ignored), the second not yet.
	moved := bucket(0, "stale", "x")
	moved[0] = rtlayout.BucketEvacuated
	m.regions[0x4000] = append(moved, bucket(rtlayout.BucketMinTopHash, "d", "4")...)
	hmap := make([]byte, 48)
	put(hmap, rtlayout.HmapCount, 4)
	hmap[rtlayout.HmapB] = 1
	hmap[rtlayout.HmapFlags] = rtlayout.HmapSameSizeGrow
	put(hmap, rtlayout.HmapBuckets, 0x2000)
	put(hmap, rtlayout.HmapOldbuckets, 0x4000)
	m.regions[0x1000] = hmap
	lm := make([]byte, 24) // the labelMap variable: a pointer to the hmap
	put(lm, 0, 0x1000)
	m.regions[0x800] = lm

	gs := []Goroutine{{ID: 1}}
	failed := r.readLabels(gs, []uint64{0x800})
	want := []Label{{"a", "1"}, {"b", "2"}, {"c", "3"}, {"d", "4"}}
	if !slices.Equal(gs[0].Labels, want) || failed != 0 {
		t.Errorf("labels %q (%d errors), want %q", gs[0].Labels, failed, want)
	}
	// A bucket that cannot be read: no labels, counted.
	delete(m.regions, 0x3000)
	r.labelSets = nil
	gs = []Goroutine{{ID: 1}}
	failed = r.readLabels(gs, []uint64{0x800})
	if gs[0].Labels != nil || failed != 1 {
		t.Errorf("with a missing overflow bucket: labels %q, %d errors", gs[0].Labels, failed)
	}
}

// TestLoadBiasSelf checks the load bias of the test binary itself: the
// runtime address of a function minus the bias is its entry in the file.
func TestLoadBiasSelf(t *testing.T) {
	f, err := elf.Open("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/exe", &st); err != nil {
		t.Fatal(err)
	}
	bias, err := loadBias(os.Getpid(), f, st.Ino)
	if err != nil {
		t.Fatal(err)
	}
	tab, err := gopclntab.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	entry, _, ok := rtlayout.FindFunc(tab, "github.com/wallprof/wallprof/internal/goruntime/goroutines.TestLoadBiasSelf")
	if pc := uint64(reflect.ValueOf(TestLoadBiasSelf).Pointer()); !ok || pc-bias != entry {
		t.Errorf("pc %#x - bias %#x != entry %#x (found %v)", pc, bias, entry, ok)
	}
}
