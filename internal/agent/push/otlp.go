package push

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	collpb "go.opentelemetry.io/proto/slim/otlp/collector/profiles/v1development"
	commonpb "go.opentelemetry.io/proto/slim/otlp/common/v1"
	pb "go.opentelemetry.io/proto/slim/otlp/profiles/v1development"
	resourcepb "go.opentelemetry.io/proto/slim/otlp/resource/v1"
	"google.golang.org/protobuf/proto"

	"github.com/wallprof/wallprof/internal/profile"
)

// OTLPPath is where OTLP/HTTP receivers take profiles: the path of
// ProfilesService.Export in the pinned protobufs' HTTP binding, and the
// Collector's OTLP receiver's default for profiles.
const OTLPPath = "/v1development/profiles"

// OTLPContentType is the body's type: binary protobuf.
const OTLPContentType = "application/x-protobuf"

// OTLPGRPCMethod is ProfilesService.Export's gRPC method.
const OTLPGRPCMethod = "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"

// EncodeOTLP encodes w as an OTLP ExportProfilesServiceRequest: one
// resource (the process), one scope (wallprof), one profile.
//
// The profile's sample type is wall/nanoseconds, the period type
// wall/nanoseconds with the sampling period. A sample's value is its wall
// time; its attributes thread.id, thread.name and wallprof.state (on-cpu,
// runnable, sleeping, disk, other) say whose and in which state, so that
// on-CPU and off-CPU time are the samples of those states. Locations keep
// their inlined frames (innermost first), mappings their file and build ID.
// The window's sequence number and recording are profile attributes, its
// notes the attribute wallprof.notes.
func EncodeOTLP(w *Window) ([]byte, error) {
	req, err := OTLPRequest(w)
	if err != nil {
		return nil, err
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(req)
}

// OTLPRequest builds the request EncodeOTLP encodes.
func OTLPRequest(w *Window) (*collpb.ExportProfilesServiceRequest, error) {
	p := w.Profile
	if p == nil {
		return nil, fmt.Errorf("encode OTLP: nil profile")
	}
	d := newDict()
	start := w.Meta.Start
	if start.IsZero() {
		start = p.Start
	}
	prof := &pb.Profile{
		TimeUnixNano: uint64(start.UnixNano()),
		DurationNano: uint64(max(p.Duration, 0)),
		SampleType:   &pb.ValueType{TypeStrindex: d.str("wall"), UnitStrindex: d.str("nanoseconds")},
		PeriodType:   &pb.ValueType{TypeStrindex: d.str("wall"), UnitStrindex: d.str("nanoseconds")},
		Period:       p.Period,
		ProfileId:    profileID(w.Meta),
	}
	prof.AttributeIndices = []int32{
		d.attr(KeySeq, intValue(int64(w.Meta.Seq))),
		d.attr(KeyRecording, intValue(w.Meta.Started.UnixNano())),
	}
	if len(p.Notes) > 0 {
		prof.AttributeIndices = append(prof.AttributeIndices, d.attr(KeyNotes, stringValue(strings.Join(p.Notes, "\n"))))
	}
	mappings := map[*profile.Mapping]int32{}
	for _, m := range p.Mappings {
		pm := &pb.Mapping{MemoryStart: m.Start, MemoryLimit: m.Limit, FileOffset: m.Offset,
			FilenameStrindex: d.str(mappingFile(m))}
		if k := buildIDKey(m.BuildID); k != "" {
			pm.AttributeIndices = []int32{d.attr(k, stringValue(m.BuildID))}
		}
		mappings[m] = int32(len(d.dict.MappingTable))
		d.dict.MappingTable = append(d.dict.MappingTable, pm)
	}
	locs := map[*profile.Location]int32{}
	funcs := map[[2]int32]int32{}
	for _, l := range p.Locs {
		pl := &pb.Location{Address: l.Address}
		if l.Mapping != nil {
			i, ok := mappings[l.Mapping]
			if !ok {
				return nil, fmt.Errorf("encode OTLP: location %d: its mapping is not in the profile", l.ID)
			}
			pl.MappingIndex = i
		}
		frames := l.Frames
		if len(frames) == 0 {
			// Unknown code is shown as module+0xoffset, never hidden.
			frames = []profile.Frame{{Function: l.UnknownName()}}
		}
		for _, f := range frames {
			k := [2]int32{d.str(f.Function), d.str(f.File)}
			fi, ok := funcs[k]
			if !ok {
				fi = int32(len(d.dict.FunctionTable))
				funcs[k] = fi
				d.dict.FunctionTable = append(d.dict.FunctionTable,
					&pb.Function{NameStrindex: k[0], SystemNameStrindex: k[0], FilenameStrindex: k[1]})
			}
			pl.Lines = append(pl.Lines, &pb.Line{FunctionIndex: fi, Line: int64(f.Line)})
		}
		locs[l] = int32(len(d.dict.LocationTable))
		d.dict.LocationTable = append(d.dict.LocationTable, pl)
	}
	stacks := map[string]int32{}
	var key []byte
	for i, s := range p.Samples {
		if s.State >= profile.NumStates {
			return nil, fmt.Errorf("encode OTLP: sample %d: unknown state %d", i, s.State)
		}
		st := &pb.Stack{LocationIndices: make([]int32, 0, len(s.Stack))}
		key = key[:0]
		for _, l := range s.Stack {
			li, ok := locs[l]
			if !ok {
				return nil, fmt.Errorf("encode OTLP: sample %d: a stack location is not in the profile", i)
			}
			st.LocationIndices = append(st.LocationIndices, li)
			key = binary.AppendUvarint(key, uint64(li))
		}
		si, ok := stacks[string(key)]
		if !ok {
			si = int32(len(d.dict.StackTable))
			stacks[string(key)] = si
			d.dict.StackTable = append(d.dict.StackTable, st)
		}
		ps := &pb.Sample{StackIndex: si, Values: []int64{s.Value}}
		ps.AttributeIndices = []int32{
			d.attr(KeyThreadID, intValue(int64(s.TID))),
			d.attr(KeyThreadName, stringValue(s.Thread)),
			d.attr(KeyState, stringValue(s.State.String())),
		}
		for _, k := range sortedKeys(s.Labels) {
			ps.AttributeIndices = append(ps.AttributeIndices, d.attr("wallprof.label."+k, stringValue(s.Labels[k])))
		}
		prof.Samples = append(prof.Samples, ps)
	}
	return &collpb.ExportProfilesServiceRequest{
		ResourceProfiles: []*pb.ResourceProfiles{{
			Resource: &resourcepb.Resource{Attributes: resourceAttributes(w.Meta)},
			ScopeProfiles: []*pb.ScopeProfiles{{
				Scope:    &commonpb.InstrumentationScope{Name: "wallprof"},
				Profiles: []*pb.Profile{prof},
			}},
		}},
		Dictionary: d.dict,
	}, nil
}

func mappingFile(m *profile.Mapping) string {
	if m.Kernel && m.File == "" {
		return "[kernel.kallsyms]"
	}
	return m.File
}

var hexID = regexp.MustCompile(`^[0-9a-f]{16,}$`)

// buildIDKey is the attribute a build ID goes in: GNU build IDs are hex,
// Go's are not.
func buildIDKey(id string) string {
	switch {
	case id == "":
		return ""
	case hexID.MatchString(id):
		return KeyBuildIDGNU
	}
	return KeyBuildIDGo
}

// resourceAttributes describe the process.
func resourceAttributes(m Meta) []*commonpb.KeyValue {
	var kv []*commonpb.KeyValue
	add := func(k string, v *commonpb.AnyValue) { kv = append(kv, &commonpb.KeyValue{Key: k, Value: v}) }
	addS := func(k, v string) {
		if v != "" {
			add(k, stringValue(v))
		}
	}
	addS(KeyService, m.Service)
	addS(KeyHost, m.Host)
	add(KeyPID, intValue(int64(m.PID)))
	addS(KeyExeName, m.Comm)
	addS(KeyExePath, m.Exe)
	if k := buildIDKey(m.BuildID); k != "" {
		addS(k, m.BuildID)
	}
	addS(KeyCommandLine, m.Command)
	addS(KeyContainerID, m.ContainerID)
	addS(KeyCgroup, m.Cgroup)
	return kv
}

// profileID is 16 bytes derived from the window's identity: the same
// window always has the same id, and two windows never share one.
func profileID(m Meta) []byte {
	h := sha256.New()
	h.Write([]byte(m.Host))
	h.Write([]byte{0})
	var b [24]byte
	binary.LittleEndian.PutUint64(b[0:], uint64(m.PID))
	binary.LittleEndian.PutUint64(b[8:], uint64(m.Started.UnixNano()))
	binary.LittleEndian.PutUint64(b[16:], m.Seq)
	h.Write(b[:])
	return h.Sum(nil)[:16]
}

func stringValue(s string) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
}

func intValue(i int64) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: i}}
}

// dict builds the request's dictionary, each string, attribute, stack,
// location, function and mapping once; index 0 of every table is the zero
// value, which stands for "none".
type dict struct {
	dict    *pb.ProfilesDictionary
	strings map[string]int32
	attrs   map[string]int32
}

func newDict() *dict {
	return &dict{dict: &pb.ProfilesDictionary{
		StringTable:    []string{""},
		MappingTable:   []*pb.Mapping{{}},
		LocationTable:  []*pb.Location{{}},
		FunctionTable:  []*pb.Function{{}},
		LinkTable:      []*pb.Link{{TraceId: make([]byte, 16), SpanId: make([]byte, 8)}},
		AttributeTable: []*pb.KeyValueAndUnit{{}},
		StackTable:     []*pb.Stack{{}},
	}, strings: map[string]int32{"": 0}, attrs: map[string]int32{}}
}

func (d *dict) str(s string) int32 {
	if i, ok := d.strings[s]; ok {
		return i
	}
	i := int32(len(d.dict.StringTable))
	d.dict.StringTable = append(d.dict.StringTable, s)
	d.strings[s] = i
	return i
}

func (d *dict) attr(key string, v *commonpb.AnyValue) int32 {
	var k string
	switch v := v.Value.(type) {
	case *commonpb.AnyValue_IntValue:
		k = key + "\x00i" + strconv.FormatInt(v.IntValue, 10)
	case *commonpb.AnyValue_StringValue:
		k = key + "\x00s" + v.StringValue
	}
	if i, ok := d.attrs[k]; ok {
		return i
	}
	i := int32(len(d.dict.AttributeTable))
	d.dict.AttributeTable = append(d.dict.AttributeTable, &pb.KeyValueAndUnit{KeyStrindex: d.str(key), Value: v})
	d.attrs[k] = i
	return i
}
