package exectrace

import (
	"math"
	"math/bits"
	"time"
)

// hist is a histogram of durations in logarithmic buckets, four to a power
// of two (each a quarter of the power: at most 25% wide), from 1 ns to
// about 2^44 ns (4.9 h). Percentiles read from it are the upper bound of
// their bucket, so they overstate by at most 25%; the count, sum and
// maximum are exact.
type hist struct {
	counts [histBuckets]int64
	n      int64
	sum    time.Duration
	max    time.Duration
}

const histBuckets = 4 * 44

func bucketOf(d time.Duration) int {
	if d <= 1 {
		return 0
	}
	// floor(4·log2 d): the power of two, and the next two bits below the
	// top one (an approximation of the quarter powers within 2%).
	n := bits.Len64(uint64(d)) - 1
	frac := 0
	if n >= 2 {
		frac = int(uint64(d)>>(n-2)) & 3
	} else if n == 1 {
		frac = int(uint64(d)&1) << 1
	}
	return min(4*n+frac, histBuckets-1)
}

// bucketUpper is the largest duration of bucket b: 2^n·(1+(q+1)/4)
// for b = 4n+q.
func bucketUpper(b int) time.Duration {
	n, q := b/4, b%4
	return time.Duration(math.Ldexp(1+float64(q+1)/4, n))
}

func (h *hist) add(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(d)]++
	h.n++
	h.sum += d
	h.max = max(h.max, d)
}

// quantile is the upper bound of the bucket holding the q-th quantile,
// never above the maximum.
func (h *hist) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(q * float64(h.n)))
	var seen int64
	for b, c := range h.counts {
		seen += c
		if seen >= rank && c > 0 {
			return min(bucketUpper(b), h.max)
		}
	}
	return h.max
}

// Dist is a distribution of durations, in milliseconds.
type Dist struct {
	Count   int64   `json:"count"`
	TotalMs float64 `json:"total_ms"`
	P50Ms   float64 `json:"p50_ms"`
	P90Ms   float64 `json:"p90_ms"`
	P99Ms   float64 `json:"p99_ms"`
	MaxMs   float64 `json:"max_ms"`
}

// Bucket is one bar of a histogram: Count durations at most LeMs (and
// above the previous bucket's bound).
type Bucket struct {
	LeMs  float64 `json:"le_ms"`
	Count int64   `json:"count"`
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

func (h *hist) dist() Dist {
	return Dist{Count: h.n, TotalMs: ms(h.sum), P50Ms: ms(h.quantile(.5)), P90Ms: ms(h.quantile(.9)),
		P99Ms: ms(h.quantile(.99)), MaxMs: ms(h.max)}
}

// buckets merges the fine buckets by powers of two from 1µs (the first
// holds everything up to 1µs), skipping the empty ones at either end.
func (h *hist) buckets() []Bucket {
	var out []Bucket
	first, last := -1, -1
	for b := 9; b < histBuckets/4; b++ {
		var c int64
		lo := 4 * b
		if b == 9 {
			lo = 0
		}
		for _, v := range h.counts[lo : 4*b+4] {
			c += v
		}
		out = append(out, Bucket{LeMs: float64(int64(1)<<(b+1)) / 1e6, Count: c})
		if c > 0 {
			if first < 0 {
				first = b
			}
			last = b
		}
	}
	if first < 0 {
		return nil
	}
	return out[first-9 : last-9+1]
}
