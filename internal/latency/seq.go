package latency

import (
	"debug/dwarf"
	"debug/elf"

	"github.com/wallprof/wallprof/internal/goruntime/rtlayout"
)

// trackingSeqOffsets is the offset of runtime.g's trackingSeq (a uint8 the
// runtime increments each time the goroutine stops running: it parks or
// is preempted, and before Go 1.26 also when it enters a system call) on
// amd64, per Go minor version, read from the DWARF of a program built with
// each toolchain (go1.17.13, go1.18.10, go1.20.14, go1.21.13, go1.22.12,
// go1.23.12, go1.24.13, go1.25.14, go1.26.8; go1.19's struct g has the
// fields of go1.20's, with the same sizes). TestLatencyTrackingSeqTable
// checks the installed Go's entry against DWARF.
var trackingSeqOffsets = map[string]uint32{
	"go1.17": 189, "go1.18": 189, "go1.19": 189, "go1.20": 189, "go1.21": 188,
	"go1.22": 191, "go1.23": 199, "go1.24": 199, "go1.25": 191, "go1.26": 191,
}

// TrackingSeqOffset returns the offset of g.trackingSeq in the Go program
// ef built by version: from its DWARF when it has it, else from the table;
// 0 if neither knows it (the split then cannot tell the calls that ran
// throughout from those that stopped: doc/latency-split.md).
func TrackingSeqOffset(ef *elf.File, version string) uint32 {
	if off, ok := trackingSeqFromDWARF(ef); ok {
		return off
	}
	return trackingSeqOffsets[rtlayout.Minor(version)]
}

func trackingSeqFromDWARF(ef *elf.File) (uint32, bool) {
	d, err := ef.DWARF()
	if err != nil {
		return 0, false
	}
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil || e == nil {
			return 0, false
		}
		if e.Tag != dwarf.TagStructType || e.Val(dwarf.AttrName) != "runtime.g" {
			if e.Tag == dwarf.TagCompileUnit || e.Tag == 0 {
				continue
			}
			r.SkipChildren()
			continue
		}
		t, err := d.Type(e.Offset)
		if err != nil {
			return 0, false
		}
		st, ok := t.(*dwarf.StructType)
		if !ok {
			return 0, false
		}
		for _, f := range st.Field {
			if f.Name == "trackingSeq" && f.Type.Size() == 1 {
				return uint32(f.ByteOffset), true
			}
		}
		return 0, false
	}
}
