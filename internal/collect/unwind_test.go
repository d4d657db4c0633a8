package collect

import (
	"reflect"
	"testing"
)

// TestUnwindRowAllocator checks the free list of the rows array: first fit,
// and freed slices merged with their neighbours, so that after any order of
// frees the array is one free extent again.
func TestUnwindRowAllocator(t *testing.T) {
	u := &unwindTables{capacity: 100, free: []extent{{0, 100}}}
	a, ok1 := u.alloc(30)
	b, ok2 := u.alloc(50)
	c, ok3 := u.alloc(20)
	if !ok1 || !ok2 || !ok3 || a != 0 || b != 30 || c != 80 {
		t.Fatalf("alloc 30, 50, 20 = %d %v, %d %v, %d %v; want 0, 30, 80", a, ok1, b, ok2, c, ok3)
	}
	if _, ok := u.alloc(1); ok {
		t.Fatal("alloc in a full array succeeded")
	}
	u.freeExtent(extent{b, 50})
	if _, ok := u.alloc(51); ok {
		t.Fatal("alloc of 51 rows in a 50-row hole succeeded")
	}
	d, ok := u.alloc(10) // first fit: the hole left by b
	if !ok || d != 30 {
		t.Fatalf("alloc 10 = %d %v; want 30", d, ok)
	}
	for _, x := range []extent{{c, 20}, {a, 30}, {d, 10}} {
		u.freeExtent(x)
	}
	if want := []extent{{0, 100}}; !reflect.DeepEqual(u.free, want) {
		t.Fatalf("after freeing everything the free list is %v; want %v", u.free, want)
	}
}

// TestUnwindStop: the decoder keeps the flags apart from why the walk
// stopped.
func TestUnwindStop(t *testing.T) {
	s := &RawSample{Unwind: UnwindDone | UnwindNoMap | UnwindRead}
	why, ok := s.UnwindStop()
	if !ok || why != UnwindRead {
		t.Fatalf("UnwindStop() = %d, %v; want %d, true", why, ok, UnwindRead)
	}
	if _, ok := (&RawSample{}).UnwindStop(); ok {
		t.Fatal("a frame-pointer sample reads as unwound in the kernel")
	}
	if why, _ := (&RawSample{Unwind: UnwindDone | 0xff}).UnwindStop(); why != NumUnwindStops-1 {
		t.Fatalf("an unknown reason maps to %d; want the last (%d)", why, NumUnwindStops-1)
	}
}
