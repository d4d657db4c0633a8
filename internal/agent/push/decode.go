package push

import (
	"fmt"
	"slices"
	"sort"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	pb "go.opentelemetry.io/proto/otlp/profiles/v1development"
	"google.golang.org/protobuf/proto"
)

// DecodeOTLP parses an OTLP profiles export request.
func DecodeOTLP(body []byte) (*pb.ProfilesData, error) {
	var req pb.ProfilesData
	if err := proto.Unmarshal(body, &req); err != nil {
		return nil, fmt.Errorf("decode OTLP profiles: %w", err)
	}
	return &req, nil
}

// OTLPWindow is what a receiver reads back from one request's profile: its
// identity and its time per thread and state.
type OTLPWindow struct {
	Resource map[string]any // the resource's attributes (string or int64)
	Seq      int64
	Start    int64 // recording start, Unix ns
	// Time is each thread's time by state name, in nanoseconds, from the
	// samples' wall values.
	Time map[int64]map[string]int64
	// CPU and OffCPU are each thread's cpu and offcpu values.
	CPU, OffCPU map[int64]int64
	TimeNanos   int64
	Duration    int64
}

// ReadOTLP reads the profiles of a request (one per resource profile,
// as EncodeOTLP writes them), resolving the dictionary's indices; an index
// out of range is an error.
func ReadOTLP(req *pb.ProfilesData) ([]OTLPWindow, error) {
	d := req.GetDictionary()
	if d == nil || len(d.StringTable) == 0 || d.StringTable[0] != "" {
		return nil, fmt.Errorf("the dictionary's string table must begin with \"\"")
	}
	attr := func(i int32) (string, any, error) {
		if i < 0 || int(i) >= len(d.AttributeTable) {
			return "", nil, fmt.Errorf("attribute index %d out of range", i)
		}
		kv := d.AttributeTable[i]
		return kv.Key, anyValue(kv.GetValue()), nil
	}
	var out []OTLPWindow
	for _, rp := range req.ResourceProfiles {
		res := map[string]any{}
		for _, kv := range rp.GetResource().GetAttributes() {
			res[kv.Key] = anyValue(kv.GetValue())
		}
		for _, sp := range rp.ScopeProfiles {
			for _, p := range sp.Profiles {
				w := OTLPWindow{Resource: res, Time: map[int64]map[string]int64{}, CPU: map[int64]int64{},
					OffCPU: map[int64]int64{}, TimeNanos: p.TimeNanos, Duration: p.DurationNanos}
				for _, i := range p.AttributeIndices {
					k, v, err := attr(i)
					if err != nil {
						return nil, err
					}
					switch k {
					case KeySeq:
						w.Seq, _ = v.(int64)
					case KeyRecording:
						w.Start, _ = v.(int64)
					}
				}
				types := make([]string, len(p.SampleType))
				for i, st := range p.SampleType {
					if int(st.TypeStrindex) >= len(d.StringTable) {
						return nil, fmt.Errorf("sample type %d: string index out of range", i)
					}
					types[i] = d.StringTable[st.TypeStrindex]
				}
				wall, cpu, off := slices.Index(types, "wall"), slices.Index(types, "cpu"), slices.Index(types, "offcpu")
				if wall < 0 || cpu < 0 || off < 0 {
					return nil, fmt.Errorf("sample types %v: want wall, cpu and offcpu", types)
				}
				for si, s := range p.Sample {
					if len(s.Value) != len(types) {
						return nil, fmt.Errorf("sample %d has %d values for %d sample types", si, len(s.Value), len(types))
					}
					end := int(s.LocationsStartIndex) + int(s.LocationsLength)
					if s.LocationsStartIndex < 0 || end > len(p.LocationIndices) {
						return nil, fmt.Errorf("sample %d: locations out of range", si)
					}
					for _, li := range p.LocationIndices[s.LocationsStartIndex:end] {
						if li < 0 || int(li) >= len(d.LocationTable) {
							return nil, fmt.Errorf("sample %d: location index %d out of range", si, li)
						}
					}
					var tid int64
					state := ""
					for _, ai := range s.AttributeIndices {
						k, v, err := attr(ai)
						if err != nil {
							return nil, err
						}
						switch k {
						case KeyThreadID:
							tid, _ = v.(int64)
						case KeyState:
							state, _ = v.(string)
						}
					}
					if w.Time[tid] == nil {
						w.Time[tid] = map[string]int64{}
					}
					w.Time[tid][state] += s.Value[wall]
					w.CPU[tid] += s.Value[cpu]
					w.OffCPU[tid] += s.Value[off]
				}
				out = append(out, w)
			}
		}
	}
	return out, nil
}

// anyValue is an attribute's value: an int64 or a string.
func anyValue(v *commonpb.AnyValue) any {
	if iv, ok := v.GetValue().(*commonpb.AnyValue_IntValue); ok {
		return iv.IntValue
	}
	return v.GetStringValue()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
