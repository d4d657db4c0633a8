package collect

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
)

// A missing feature is named; a probe that cannot conclude is passed over.
func TestCheckFeaturesNamesTheMissingOne(t *testing.T) {
	ok := func() error { return nil }
	fs := []kernelFeature{
		{"feature A", ok},
		{"feature B", func() error { return errors.New("permission denied") }},
		{"feature C (Linux 9.9)", func() error { return ebpf.ErrNotSupported }},
		{"feature D", func() error { return ebpf.ErrNotSupported }},
	}
	err := checkFeatures(fs)
	var mf *MissingFeatureError
	if !errors.As(err, &mf) || mf.Feature != "feature C (Linux 9.9)" || !errors.Is(err, ebpf.ErrNotSupported) {
		t.Fatalf("err = %v, want feature C missing", err)
	}
	if want := "this kernel lacks feature C (Linux 9.9)"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	if err := checkFeatures(fs[:2]); err != nil {
		t.Errorf("inconclusive probes: err = %v, want nil", err)
	}
}

// On this machine (root, a recent kernel) every feature is there.
func TestCheckFeaturesHere(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("probing BPF features needs root")
	}
	if err := CheckFeatures(); err != nil {
		t.Errorf("CheckFeatures: %v (probed: %s)", err, strings.Join(featureNames(), "; "))
	}
}
