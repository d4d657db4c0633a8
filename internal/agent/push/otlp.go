package push

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"regexp"
	"strconv"

	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	pb "go.opentelemetry.io/proto/otlp/profiles/v1development"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	"google.golang.org/protobuf/proto"

	"github.com/wallprof/wallprof/internal/profile"
)

// OTLPPath is where OTLP/HTTP receivers take profiles: the path of
// ProfilesService.Export in the pinned protobufs' HTTP binding.
const OTLPPath = "/v1development/profiles"

// OTLPContentType is the body's type: binary protobuf.
const OTLPContentType = "application/x-protobuf"

// The sample types, as in wallprof's pprof files (present.WritePprof):
// each sample's value is its time in the type its state counts in.
var otlpSampleTypes = []string{"wall", "cpu", "offcpu"}

// EncodeOTLP encodes w as an OTLP ExportProfilesServiceRequest: one
// resource (the process), one scope (wallprof), one profile.
//
// The profile has sample types wall, cpu and offcpu in nanoseconds (delta
// temporality; the period type is wall/nanoseconds with the sampling
// period), like wallprof's pprof files: a sample's time is in wall and in
// cpu (on-CPU) or offcpu (runnable and blocked). Every sample has the
// attributes thread.id, thread.name and wallprof.state (on-cpu, runnable,
// sleeping, disk, other). Locations keep their inlined frames (innermost
// first), mappings their file and build ID. The window's sequence number
// and recording are profile attributes; the notes are comments.
func EncodeOTLP(w *Window) ([]byte, error) {
	req, err := OTLPRequest(w)
	if err != nil {
		return nil, err
	}
	return proto.MarshalOptions{Deterministic: true}.Marshal(req)
}

// OTLPRequest builds the request EncodeOTLP encodes. It is a ProfilesData,
// whose fields are those of ExportProfilesServiceRequest (resource_profiles
// 1, dictionary 2): the same bytes, without linking the collector
// package's gRPC gateway into wallprof.
func OTLPRequest(w *Window) (*pb.ProfilesData, error) {
	p := w.Profile
	if p == nil {
		return nil, fmt.Errorf("encode OTLP: nil profile")
	}
	d := newDict()
	prof := &pb.Profile{
		TimeNanos:     w.Meta.Start.UnixNano(),
		DurationNanos: int64(p.Duration),
		PeriodType:    &pb.ValueType{TypeStrindex: d.str("wall"), UnitStrindex: d.str("nanoseconds")},
		Period:        p.Period,
		ProfileId:     profileID(w.Meta),
	}
	if w.Meta.Start.IsZero() {
		prof.TimeNanos = p.Start.UnixNano()
	}
	for _, t := range otlpSampleTypes {
		prof.SampleType = append(prof.SampleType, &pb.ValueType{TypeStrindex: d.str(t), UnitStrindex: d.str("nanoseconds"),
			AggregationTemporality: pb.AggregationTemporality_AGGREGATION_TEMPORALITY_DELTA})
	}
	for _, n := range p.Notes {
		prof.CommentStrindices = append(prof.CommentStrindices, d.str(n))
	}
	prof.AttributeIndices = []int32{
		d.attr(KeySeq, intValue(int64(w.Meta.Seq))),
		d.attr(KeyRecording, intValue(w.Meta.Started.UnixNano())),
	}
	mappings := map[*profile.Mapping]int32{}
	for _, m := range p.Mappings {
		pm := &pb.Mapping{MemoryStart: m.Start, MemoryLimit: m.Limit, FileOffset: m.Offset,
			FilenameStrindex: d.str(mappingFile(m)),
			HasFunctions:     true, HasFilenames: true, HasLineNumbers: true, HasInlineFrames: true}
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
			pl.MappingIndex = proto.Int32(i)
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
			pl.Line = append(pl.Line, &pb.Line{FunctionIndex: fi, Line: int64(f.Line)})
		}
		locs[l] = int32(len(d.dict.LocationTable))
		d.dict.LocationTable = append(d.dict.LocationTable, pl)
	}
	for i, s := range p.Samples {
		if s.State >= profile.NumStates {
			return nil, fmt.Errorf("encode OTLP: sample %d: unknown state %d", i, s.State)
		}
		ps := &pb.Sample{LocationsStartIndex: int32(len(prof.LocationIndices)), LocationsLength: int32(len(s.Stack))}
		for _, l := range s.Stack {
			li, ok := locs[l]
			if !ok {
				return nil, fmt.Errorf("encode OTLP: sample %d: a stack location is not in the profile", i)
			}
			prof.LocationIndices = append(prof.LocationIndices, li)
		}
		cpu, off := int64(0), s.Value
		if s.State == profile.OnCPU {
			cpu, off = s.Value, 0
		}
		ps.Value = []int64{s.Value, cpu, off}
		ps.AttributeIndices = []int32{
			d.attr(KeyThreadID, intValue(int64(s.TID))),
			d.attr(KeyThreadName, stringValue(s.Thread)),
			d.attr(KeyState, stringValue(s.State.String())),
		}
		for _, k := range sortedKeys(s.Labels) {
			ps.AttributeIndices = append(ps.AttributeIndices, d.attr("wallprof.label."+k, stringValue(s.Labels[k])))
		}
		prof.Sample = append(prof.Sample, ps)
	}
	return &pb.ProfilesData{
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

// dict builds the request's dictionary, each string and attribute once.
type dict struct {
	dict    *pb.ProfilesDictionary
	strings map[string]int32
	attrs   map[string]int32
}

func newDict() *dict {
	return &dict{dict: &pb.ProfilesDictionary{StringTable: []string{""}}, strings: map[string]int32{"": 0},
		attrs: map[string]int32{}}
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
	d.dict.AttributeTable = append(d.dict.AttributeTable, &commonpb.KeyValue{Key: key, Value: v})
	d.attrs[k] = i
	return i
}
