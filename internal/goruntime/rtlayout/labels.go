package rtlayout

import (
	"strconv"
	"strings"
)

// LabelsFormat is how g.labels (set by runtime/pprof.Do and
// SetGoroutineLabels) holds a goroutine's profiler labels.
type LabelsFormat int

const (
	// LabelsMap: g.labels points to a runtime/pprof.labelMap, which is
	// map[string]string; its first word points to the runtime.hmap
	// (runtime/pprof/label.go and runtime/map.go, Go 1.20–1.23).
	LabelsMap LabelsFormat = iota + 1
	// LabelsSlice: g.labels points to a labelMap struct whose first field
	// is a slice of {key, value string}, sorted by key
	// (runtime/pprof/label.go, Go 1.24–1.26; internal/runtime/pprof/label
	// in 1.26).
	LabelsSlice
)

// Offsets in the runtime.hmap of Go 1.20–1.23 (runtime/map.go) and in the
// bucket of a map[string]string (8 tophash bytes, 8 keys, 8 values, the
// overflow pointer). The tests check them against DWARF.
const (
	HmapCount         = 0  // count int
	HmapFlags         = 8  // flags uint8
	HmapSameSizeGrow  = 8  // flag: growing to the same number of buckets
	HmapB             = 9  // B uint8: log2 of the number of buckets
	HmapBuckets       = 16 // buckets unsafe.Pointer
	HmapOldbuckets    = 24 // oldbuckets: non-nil while the map grows
	BucketSize        = 272
	BucketKeys        = 8   // [8]string
	BucketValues      = 136 // [8]string
	BucketOverflow    = 264 // *bucket
	BucketMinTopHash  = 5   // tophash values below it mark empty or moved slots
	BucketEvacuated   = 2   // tophash[0] in [2, 5): the old bucket was moved (evacuatedX..evacuatedEmpty)
	LabelSize         = 32  // {key, value string}
	LabelSliceOffset  = 0   // the slice in labelMap
	StringHeaderBytes = 16  // {ptr, len}
)

// Labels returns how g.labels holds labels in this version.
func (l Layout) Labels() LabelsFormat {
	n, err := strconv.Atoi(strings.TrimPrefix(l.Version, "go1."))
	if err == nil && n >= 24 {
		return LabelsSlice
	}
	return LabelsMap
}
