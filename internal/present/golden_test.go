package present

import (
	"github.com/wallprof/wallprof/internal/golden"
	"testing"
)

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, name, got)
}
