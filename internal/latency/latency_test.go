package latency

import (
	"debug/elf"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/goruntime/rtlayout"
	"github.com/wallprof/wallprof/internal/groundtruth"
)

// Every duration falls in the bucket whose range holds it, buckets are
// contiguous, and a bucket is at most 1/64 of its lower bound wide.
func TestLatencyBuckets(t *testing.T) {
	prevHi := uint64(0)
	for i := range NBuckets - 1 {
		lo, hi := BucketRange(i)
		if lo != prevHi || hi <= lo {
			t.Fatalf("bucket %d is [%d, %d), previous ended at %d", i, lo, hi, prevHi)
		}
		if lo >= 64 && (hi-lo)*64 > lo {
			t.Fatalf("bucket %d [%d, %d) is wider than 1/64", i, lo, hi)
		}
		prevHi = hi
	}
	for _, d := range []uint64{0, 1, 63, 64, 65, 127, 128, 1000, 999_999, 1_000_000, 12_345_678_901, 1 << 40, 1<<41 - 1, 1 << 41, 1 << 62} {
		i := BucketOf(d)
		lo, hi := BucketRange(i)
		if d < lo || d >= hi {
			t.Errorf("%d is in bucket %d [%d, %d)", d, i, lo, hi)
		}
	}
}

func TestLatencyQuantile(t *testing.T) {
	var h Hist
	for d := 1; d <= 1000; d++ {
		h[BucketOf(uint64(d)*uint64(time.Microsecond))]++
	}
	for q, want := range map[float64]time.Duration{0.5: 500 * time.Microsecond, 0.9: 900 * time.Microsecond, 0.99: 990 * time.Microsecond, 1: time.Millisecond} {
		got := h.Quantile(q)
		if diff := got - want; diff < -want/100 || diff > want/100 {
			t.Errorf("q%v = %v, want %v within 1%%", q, got, want)
		}
	}
	var log2 uint64
	for _, n := range h.Log2() {
		log2 += n
	}
	if log2 != 1000 || h.Count() != 1000 {
		t.Errorf("count %d, log2 buckets hold %d, want 1000", h.Count(), log2)
	}
}

// The RETs of hand-assembled code, and the probe point after a Go
// prologue's stack check.
func TestLatencyFindRetsAndStackCheck(t *testing.T) {
	code := []byte{
		0x4c, 0x8d, 0xa4, 0x24, 0x60, 0xf8, 0xff, 0xff, // LEAQ -0x7a0(SP), R12
		0x4d, 0x3b, 0x66, 0x10, // CMPQ R12, 0x10(R14)
		0x0f, 0x86, 0x05, 0x00, 0x00, 0x00, // JBE +5
		0x55,       // PUSHQ BP
		0xc3,       // RET
		0x90,       // NOP
		0xc3,       // RET
		0xcc, 0xcc, // padding
	}
	rets, err := FindRets(code, 0x1000)
	if err != nil || !slices.Equal(rets, []uint64{0x1013, 0x1015}) {
		t.Errorf("FindRets = %#x, %v; want [0x1013 0x1015]", rets, err)
	}
	if p := AfterStackCheck(code, 0x1000); p != 0x1012 {
		t.Errorf("AfterStackCheck = %#x, want 0x1012", p)
	}
	if p := AfterStackCheck([]byte{0x48, 0xff, 0xc0, 0xc3}, 0x2000); p != 0x2000 {
		t.Errorf("AfterStackCheck without a stack check = %#x, want the entry", p)
	}
	if _, err := FindRets([]byte{0xc3, 0x0f}, 0); err == nil {
		t.Error("FindRets decoded garbage without an error")
	}
}

// Resolve finds main.handle in the ground-truth program, stripped or not,
// and refuses a missing and an inlined-everywhere function in one sentence.
func TestLatencyResolve(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("testdata", "target"))
	if err != nil {
		t.Fatal(err)
	}
	for _, strip := range []bool{false, true} {
		bin := groundtruth.BuildGo(t, dir, strip, "")
		b, err := Resolve(bin, 0, []string{"main.handle", "main.trivial"})
		if err != nil {
			t.Fatal(err)
		}
		h := b.Funcs[0]
		if len(h.Rets) == 0 || h.Probe <= h.Entry || h.EntryOff == 0 || b.GoidOff == 0 || b.StackHiOff != 8 {
			t.Errorf("stripped=%v: main.handle %+v, goid at %d, stack.hi at %d", strip, h, b.GoidOff, b.StackHiOff)
		}
		if tr := b.Funcs[1]; tr.Probe != tr.Entry || len(tr.Rets) != 1 {
			t.Errorf("stripped=%v: main.trivial (a leaf without a stack check) %+v", strip, tr)
		}
		for fn, want := range map[string]string{
			"main.nope":       "no function main.nope in the program",
			"main.double":     "main.double is inlined everywhere it is called (into main.main), and inlined calls cannot be measured",
			"runtime.memmove": "runtime.memmove is written in assembly, where the goroutine is not in a register, and cannot be measured",
		} {
			_, err := Resolve(bin, 0, []string{fn})
			if !errors.Is(err, ErrRefused) || !strings.HasSuffix(err.Error(), ": "+want) {
				t.Errorf("stripped=%v: Resolve(%s) = %v; want ErrRefused saying %q", strip, fn, err, want)
			}
		}
	}
}

// The table of g.trackingSeq's offsets agrees with the DWARF of the
// target built by the installed Go and by Go 1.22, and a stripped build
// gets the table's value.
func TestLatencyTrackingSeqTable(t *testing.T) {
	dir, err := filepath.Abs(filepath.Join("testdata", "target"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []string{"", "go1.22.12"} {
		for _, strip := range []bool{false, true} {
			bin := groundtruth.BuildGo(t, dir, strip, tc)
			f, err := os.Open(bin)
			if err != nil {
				t.Fatal(err)
			}
			ef, err := elf.NewFile(f)
			if err != nil {
				t.Fatal(err)
			}
			ver, err := rtlayout.GoVersion(f)
			if err != nil {
				t.Fatal(err)
			}
			dw, fromDWARF := trackingSeqFromDWARF(ef)
			table, inTable := trackingSeqOffsets[rtlayout.Minor(ver)]
			got := TrackingSeqOffset(ef, ver)
			f.Close()
			if !inTable || got != table || fromDWARF == strip || (fromDWARF && dw != table) {
				t.Errorf("%s stripped=%v: DWARF %d (%v), table %d (%v), TrackingSeqOffset %d", ver, strip, dw, fromDWARF, table, inTable, got)
			}
		}
	}
}
