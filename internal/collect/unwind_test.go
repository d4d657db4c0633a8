package collect

import (
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"

	"github.com/wallprof/wallprof/internal/symbolize"
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

// TestBucketIndex: every entry of the index is the first row at or after its
// bucket, and the range the program searches, [index[j], index[j+1]],
// holds the first row after any pc of bucket j.
func TestBucketIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{0, 15, 16, 17, 100, 5000} {
		rows := make([]symbolize.UnwindRow, n)
		pc := uint32(rng.IntN(64))
		for i := range rows {
			rows[i].PC = pc
			pc += 1 + uint32(rng.IntN(200))
			if rng.IntN(50) == 0 {
				pc += 1 << 16 // a gap between functions
			}
		}
		shift, index := bucketIndex(rows)
		if n < 16 {
			if index != nil {
				t.Errorf("%d rows: an index of %d entries", n, len(index))
			}
			continue
		}
		if len(index) > n/2 || shift < 4 {
			t.Errorf("%d rows: %d entries of 2^%d bytes", n, len(index), shift)
		}
		for j, first := range index {
			if first > 0 && uint64(rows[first-1].PC) >= uint64(j)<<shift ||
				int(first) < n && uint64(rows[first].PC) < uint64(j)<<shift {
				t.Fatalf("%d rows: entry %d = %d is not the first row at or after %#x", n, j, first, j<<shift)
			}
		}
		if int(index[len(index)-1]) != n {
			t.Errorf("%d rows: the last entry is %d, not past every row", n, index[len(index)-1])
		}
		for k := 0; k < 2000; k++ {
			q := uint32(rng.Int64N(int64(rows[n-1].PC) + 300))
			after := sort.Search(n, func(i int) bool { return rows[i].PC > q })
			j := uint64(q) >> shift
			lo, hi := uint32(n), uint32(n)
			if j+1 < uint64(len(index)) {
				lo, hi = index[j], index[j+1]
			} else {
				lo = index[len(index)-1]
			}
			if uint32(after) < lo || uint32(after) > hi {
				t.Fatalf("%d rows: the first row after %#x is %d, outside bucket %d's [%d, %d]", n, q, after, j, lo, hi)
			}
		}
	}
}
