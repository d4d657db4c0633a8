//go:build go1.18
// +build go1.18

package main

// Sum is a generic function.
//
//go:noinline
func Sum[T int | float64](xs []T) T {
	var s T
	for _, x := range xs {
		s += x
	}
	return s
}

func init() {
	extra = append(extra, func() int { return Sum([]int{1, 2, 3}) + int(Sum([]float64{0.5, 1.5})) })
}
