package goroutines

import (
	"encoding/binary"
	"testing"

	"github.com/wallprof/wallprof/internal/goruntime/rtlayout"
)

// FuzzSnapshot reads a target whose memory is the fuzzer's bytes: an
// allgs header, g pointers, gs, stacks and label sets laid out in one
// region. Whatever the bytes, Snapshot must return without panicking, and
// every goroutine it returns must have a live state and a stack within
// the limits.
func FuzzSnapshot(f *testing.F) {
	seed := make([]byte, 4096)
	binary.LittleEndian.PutUint64(seed[0:], 0x10000+64) // allgs.array
	binary.LittleEndian.PutUint64(seed[8:], 2)          // len
	binary.LittleEndian.PutUint64(seed[16:], 2)         // cap
	binary.LittleEndian.PutUint64(seed[64:], 0x10000+128)
	binary.LittleEndian.PutUint64(seed[72:], 0x10000+1024)
	f.Add(seed, "go1.22")
	f.Add(seed, "go1.26")
	f.Fuzz(func(t *testing.T, mem []byte, version string) {
		l, err := rtlayout.ForVersion(version)
		if err != nil {
			return
		}
		m := &fakeMem{regions: map[uint64][]byte{0x10000: mem}}
		r := &Reader{layout: l, allgs: 0x10000, mem: m, system: map[uint64]bool{},
			cacheAge: 16,
			maxRetry: 3, maxDepth: 64, maxStack: 4096, maxAllgs: 64, frame: frame{maxDepth: 64}}
		for i := 0; i < 2; i++ {
			snap, err := r.Snapshot()
			if err != nil {
				return
			}
			for _, g := range snap.Goroutines {
				if !g.Status.exists() || len(g.Stack) > 65 {
					t.Fatalf("goroutine %+v", g)
				}
			}
		}
	})
}
