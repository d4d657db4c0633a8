package bench

import (
	"math"
	"math/rand/v2"
	"sort"
)

// ChangePoints returns the indexes i (ascending) at which the series x
// changes distribution: x[:i] and x[i:] differ. The method is E-Divisive
// means (Matteson and James, 2014, with alpha = 1), as used for
// performance history by MongoDB (Daly et al., ICPE 2020) and Apache Otava:
// the split maximising the energy-distance statistic Q is a candidate; a
// permutation test (perms shuffles, a fixed seed) gives its p-value; a
// candidate with p < alpha is kept and both halves are searched again.
// Segments shorter than minSize points are not split.
func ChangePoints(x []float64, alpha float64, perms, minSize int) []int {
	if minSize < 2 {
		minSize = 2
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var out []int
	var split func(lo, hi int)
	split = func(lo, hi int) {
		seg := x[lo:hi]
		tau, q := bestSplit(seg, minSize)
		if tau < 0 {
			return
		}
		buf := append([]float64(nil), seg...)
		above := 0
		for range perms {
			rng.Shuffle(len(buf), func(i, j int) { buf[i], buf[j] = buf[j], buf[i] })
			if _, qp := bestSplit(buf, minSize); qp >= q {
				above++
			}
		}
		if p := float64(above+1) / float64(perms+1); p >= alpha {
			return
		}
		out = append(out, lo+tau)
		split(lo, lo+tau)
		split(lo+tau, hi)
	}
	split(0, len(x))
	sort.Ints(out)
	return out
}

// bestSplit returns the tau in [minSize, len(x)-minSize] maximising
// Q(tau) = m*n/(m+n) * (2/(m*n) Σ|a-b| - 1/C(m,2) Σ|a-a'| - 1/C(n,2) Σ|b-b'|),
// and Q; tau = -1 when x is too short. The three sums are kept from one
// tau to the next (the point x[tau] moves from B to A), so that a call
// costs O(len(x)²), not O(len(x)³): a history of 500 commits takes the
// permutation test 200 calls of it.
func bestSplit(x []float64, minSize int) (int, float64) {
	n := len(x)
	if minSize > n-minSize {
		return -1, math.Inf(-1)
	}
	// sa, sb: Σ|.-.| over the pairs within A = x[:tau] and B = x[tau:];
	// sab: over the pairs across.
	tau := minSize
	sa, sb, sab := 0.0, 0.0, 0.0
	for i := range n {
		for j := i + 1; j < n; j++ {
			d := math.Abs(x[i] - x[j])
			switch {
			case j < tau:
				sa += d
			case i >= tau:
				sb += d
			default:
				sab += d
			}
		}
	}
	best, bestQ := -1, math.Inf(-1)
	for {
		m, k := float64(tau), float64(n-tau)
		e := 2*sab/(m*k) - sa/(m*(m-1)/2) - sb/(k*(k-1)/2)
		if q := m * k / (m + k) * e; q > bestQ {
			best, bestQ = tau, q
		}
		if tau == n-minSize {
			return best, bestQ
		}
		// x[tau] moves from B to A.
		v := x[tau]
		da, db := 0.0, 0.0
		for _, u := range x[:tau] {
			da += math.Abs(v - u)
		}
		for _, u := range x[tau+1:] {
			db += math.Abs(v - u)
		}
		sa, sb, sab = sa+da, sb-db, sab-da+db
		tau++
	}
}
