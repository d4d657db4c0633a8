package latency

import (
	"math"
	"time"
)

// Histogram layout, as in bpf/src/latency.bpf.c.
const (
	subBits  = 6
	sub      = 1 << subBits
	maxMSB   = 40
	NBuckets = (maxMSB - subBits + 2) * sub
)

// Hist counts call durations in the kernel's buckets.
type Hist [NBuckets]uint64

// BucketRange returns the durations [lo, hi) that bucket i counts.
func BucketRange(i int) (lo, hi uint64) {
	if i < sub {
		return uint64(i), uint64(i) + 1
	}
	msb := i/sub + subBits - 1
	s := uint64(i % sub)
	w := uint64(1) << (msb - subBits)
	lo = (sub + s) * w
	if i == NBuckets-1 {
		return lo, math.MaxUint64
	}
	return lo, lo + w
}

// BucketOf returns the bucket of duration d in nanoseconds (as the kernel
// computes it).
func BucketOf(d uint64) int {
	if d < sub {
		return int(d)
	}
	msb := 63
	for d>>msb == 0 {
		msb--
	}
	if msb > maxMSB {
		return NBuckets - 1
	}
	return (msb-subBits+1)*sub + int((d>>(msb-subBits))&(sub-1))
}

// Count returns the number of durations counted.
func (h *Hist) Count() uint64 {
	var n uint64
	for _, c := range h {
		n += c
	}
	return n
}

// Quantile returns the duration below which a fraction q of the calls
// fall: the middle of the bucket holding the call of rank ceil(q*n) (the
// nearest-rank definition), within 1/128 of the exact value above 64 ns.
func (h *Hist) Quantile(q float64) time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(n)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h {
		seen += c
		if seen >= rank {
			lo, hi := BucketRange(i)
			if i == NBuckets-1 {
				return time.Duration(lo)
			}
			return time.Duration(lo + (hi-lo)/2)
		}
	}
	return 0
}

// Log2 returns the counts per power of two: Log2()[k] counts durations in
// [2^k, 2^(k+1)) nanoseconds (k = 0 also holds 0).
func (h *Hist) Log2() []uint64 {
	out := make([]uint64, maxMSB+2)
	for i, c := range h {
		if c == 0 {
			continue
		}
		lo, _ := BucketRange(i)
		k := 0
		for lo>>(k+1) != 0 {
			k++
		}
		out[k] += c
	}
	return out
}
