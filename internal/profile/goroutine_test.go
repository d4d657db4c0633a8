package profile

import (
	"testing"
	"time"
)

func TestGoInfoCoverage(t *testing.T) {
	s := time.Second
	for _, tc := range []struct {
		name  string
		info  *GoInfo
		d     time.Duration
		share float64
		ok    bool
		low   bool
	}{
		{"whole", &GoInfo{Snapshots: 224, Covered: 4990 * time.Millisecond}, 5034 * time.Millisecond, 4990.0 / 5034, true, false},
		{"the caddy recording read 30 times", &GoInfo{Snapshots: 30, Covered: 860 * time.Millisecond}, 5 * s, 0.172, true, true},
		{"a short launched recording", &GoInfo{Snapshots: 106, Covered: 1946 * time.Millisecond}, 2062 * time.Millisecond, 1946.0 / 2062, true, false},
		{"just under", &GoInfo{Snapshots: 100, Covered: 4499 * time.Millisecond}, 5 * s, 0.8998, true, true},
		{"at the threshold", &GoInfo{Snapshots: 100, Covered: 4500 * time.Millisecond}, 5 * s, 0.9, true, false},
		// The first snapshot charges one interval, which can begin before
		// the recording did.
		{"more than the recording", &GoInfo{Snapshots: 250, Covered: 5010 * time.Millisecond}, 5 * s, 1, true, false},
		{"no snapshot", &GoInfo{}, 5 * s, 0, true, true},
		{"written before coverage was measured", &GoInfo{Snapshots: 180}, 5 * s, 0, false, false},
		{"no recording time", &GoInfo{Snapshots: 1, Covered: s}, 0, 0, false, false},
		{"no goroutine view", nil, 5 * s, 0, false, false},
	} {
		share, ok := tc.info.Coverage(tc.d)
		if ok != tc.ok || share < tc.share-1e-9 || share > tc.share+1e-9 {
			t.Errorf("%s: Coverage = %.4f, %v; want %.4f, %v", tc.name, share, ok, tc.share, tc.ok)
		}
		if low := tc.info.LowCoverage(tc.d); low != tc.low {
			t.Errorf("%s: LowCoverage = %v, want %v", tc.name, low, tc.low)
		}
	}
}
