package bpf

import (
	"testing"

	"github.com/wallprof/wallprof/internal/bpfgen"
)

// TestLatencyGeneratedMatchesSource rebuilds the BPF object and its Go
// bindings exactly as `go generate` does and checks that the committed
// files are byte for byte what src/latency.bpf.c produces.
func TestLatencyGeneratedMatchesSource(t *testing.T) {
	bpfgen.Check(t, "latency", "./internal/latency/bpf")
}
