//go:build !(linux && amd64)

package main

import (
	"context"
	"fmt"

	"github.com/wallprof/wallprof/internal/bench"
)

// recordBenchmark cannot record here: recording needs Linux on x86-64.
func recordBenchmark(ctx context.Context, dir string, argv []string, out string) error {
	return fmt.Errorf("%w: needs Linux on x86-64", bench.ErrCannotRecord)
}
