package push

import (
	"fmt"
	"sort"

	collpb "go.opentelemetry.io/proto/slim/otlp/collector/profiles/v1development"
	commonpb "go.opentelemetry.io/proto/slim/otlp/common/v1"
	"google.golang.org/protobuf/proto"
)

// DecodeOTLP parses an OTLP profiles export request.
func DecodeOTLP(body []byte) (*collpb.ExportProfilesServiceRequest, error) {
	var req collpb.ExportProfilesServiceRequest
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
	Time      map[int64]map[string]int64
	TimeNanos int64
	Duration  int64
}

// ReadOTLP reads the profiles of a request (one per resource profile,
// as EncodeOTLP writes them), resolving the dictionary's indices; an index
// out of range, or a table whose first entry is not the zero value, is an
// error.
func ReadOTLP(req *collpb.ExportProfilesServiceRequest) ([]OTLPWindow, error) {
	d := req.GetDictionary()
	if d == nil || len(d.StringTable) == 0 || d.StringTable[0] != "" {
		return nil, fmt.Errorf("the dictionary's string table must begin with \"\"")
	}
	if len(d.AttributeTable) == 0 || len(d.StackTable) == 0 || len(d.LocationTable) == 0 || len(d.FunctionTable) == 0 ||
		len(d.MappingTable) == 0 || len(d.StackTable[0].LocationIndices) > 0 || d.AttributeTable[0].KeyStrindex != 0 {
		return nil, fmt.Errorf("the dictionary's tables must begin with their zero value")
	}
	str := func(i int32) (string, error) {
		if i < 0 || int(i) >= len(d.StringTable) {
			return "", fmt.Errorf("string index %d out of range", i)
		}
		return d.StringTable[i], nil
	}
	attr := func(i int32) (string, any, error) {
		if i < 0 || int(i) >= len(d.AttributeTable) {
			return "", nil, fmt.Errorf("attribute index %d out of range", i)
		}
		kv := d.AttributeTable[i]
		k, err := str(kv.KeyStrindex)
		return k, anyValue(kv.GetValue()), err
	}
	var out []OTLPWindow
	for _, rp := range req.ResourceProfiles {
		res := map[string]any{}
		for _, kv := range rp.GetResource().GetAttributes() {
			res[kv.Key] = anyValue(kv.GetValue())
		}
		for _, sp := range rp.ScopeProfiles {
			for _, p := range sp.Profiles {
				w := OTLPWindow{Resource: res, Time: map[int64]map[string]int64{},
					TimeNanos: int64(p.TimeUnixNano), Duration: int64(p.DurationNano)}
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
				typ, err := str(p.GetSampleType().GetTypeStrindex())
				if err != nil {
					return nil, err
				}
				if unit, _ := str(p.GetSampleType().GetUnitStrindex()); typ != "wall" || unit != "nanoseconds" {
					return nil, fmt.Errorf("sample type %s/%s: want wall/nanoseconds", typ, unit)
				}
				for si, s := range p.Samples {
					if len(s.Values) != 1 {
						return nil, fmt.Errorf("sample %d has %d values, want 1", si, len(s.Values))
					}
					if s.StackIndex < 0 || int(s.StackIndex) >= len(d.StackTable) {
						return nil, fmt.Errorf("sample %d: stack index %d out of range", si, s.StackIndex)
					}
					for _, li := range d.StackTable[s.StackIndex].LocationIndices {
						if li <= 0 || int(li) >= len(d.LocationTable) {
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
					w.Time[tid][state] += s.Values[0]
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
