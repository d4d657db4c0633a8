package rtlayout

import (
	"debug/elf"
	"os"
	"testing"

	"github.com/wallprof/wallprof/internal/groundtruth"
)

// TestLabelsLayout checks the label constants against the DWARF of
// goparked (which uses pprof.Do) built by every cached toolchain.
func TestLabelsLayout(t *testing.T) {
	dir := groundtruth.WorkloadDir(t, "goparked")
	for _, tc := range cachedToolchains(t) {
		t.Run("toolchain="+tc, func(t *testing.T) {
			bin := groundtruth.BuildGo(t, dir, false, tc)
			raw, err := os.Open(bin)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			version, err := GoVersion(raw)
			if err != nil {
				t.Fatal(err)
			}
			l, err := ForVersion(version)
			if err != nil {
				t.Fatal(err)
			}
			f, err := elf.Open(bin)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			d, err := f.DWARF()
			if err != nil {
				t.Fatal(err)
			}
			check := func(typ, field string, want int) {
				t.Helper()
				types, err := structTypes(d, typ)
				if err != nil {
					t.Fatalf("%s: %v", version, err)
				}
				if field == "" {
					if got := int(types[typ].ByteSize); got != want {
						t.Errorf("%s: size of %s = %d, want %d", version, typ, got, want)
					}
					return
				}
				if got, ok := fieldOffset(types[typ], field); !ok || got != want {
					t.Errorf("%s: %s.%s at %d (%v), want %d", version, typ, field, got, ok, want)
				}
			}
			switch l.Labels() {
			case LabelsMap:
				check("runtime.hmap", "count", HmapCount)
				check("runtime.hmap", "B", HmapB)
				check("runtime.hmap", "flags", HmapFlags)
				check("runtime.hmap", "buckets", HmapBuckets)
				check("runtime.hmap", "oldbuckets", HmapOldbuckets)
				check("bucket<string,string>", "", BucketSize)
				check("bucket<string,string>", "keys", BucketKeys)
				check("bucket<string,string>", "values", BucketValues)
				check("bucket<string,string>", "overflow", BucketOverflow)
			case LabelsSlice:
				label, labelValue := "runtime/pprof.label", "value"
				if Minor(version) == "go1.26" {
					label, labelValue = "internal/runtime/pprof/label.Label", "Value"
				}
				check("runtime/pprof.labelMap", "", 24)
				check(label, "", LabelSize)
				check(label, labelValue, StringHeaderBytes)
			default:
				t.Fatalf("%s: no labels format", version)
			}
		})
	}
}
