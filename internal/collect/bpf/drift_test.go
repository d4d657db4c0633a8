package bpf

import (
	"testing"

	"github.com/wallprof/wallprof/internal/bpfgen"
)

// TestGeneratedMatchesSource rebuilds the BPF object and its Go bindings
// exactly as `go generate` does and checks that the committed files are
// byte for byte what src/wallprof.bpf.c produces.
func TestGeneratedMatchesSource(t *testing.T) {
	bpfgen.Check(t, "wallprof", "./internal/collect/bpf")
}
