package push

import (
	"math/rand/v2"
	"time"
)

// Backoff is exponential backoff with jitter: the nth retry (from 0)
// waits a random time in [d/2, d], d = min(Max, Initial·2ⁿ), so that
// agents that failed together do not retry together.
type Backoff struct {
	Initial, Max time.Duration
	// Rand returns a number in [0, 1) (math/rand/v2 if nil).
	Rand func() float64
}

// Delay is the wait before retry n (0 for the first retry).
func (b Backoff) Delay(n int) time.Duration {
	d := b.Initial
	for i := 0; i < n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	r := b.Rand
	if r == nil {
		r = rand.Float64
	}
	return d/2 + time.Duration(r()*float64(d/2))
}
