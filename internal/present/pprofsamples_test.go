package present

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	pprof "github.com/google/pprof/profile"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/wallprof/wallprof/internal/profile"
)

// handProfile encodes a profile.proto message by hand, with the sample's
// repeated fields unpacked (legal protobuf that the pprof package does not
// write) and the string table after the samples.
func handProfile(locID uint64) []byte {
	msg := func(fields ...[]byte) []byte { return bytes.Join(fields, nil) }
	varint := func(num protowire.Number, v uint64) []byte {
		b := protowire.AppendTag(nil, num, protowire.VarintType)
		return protowire.AppendVarint(b, v)
	}
	sub := func(num protowire.Number, m []byte) []byte {
		b := protowire.AppendTag(nil, num, protowire.BytesType)
		return protowire.AppendBytes(b, m)
	}
	strs := []string{"", "wall", "nanoseconds", "thread", "app", "state", "sleeping", "f", "phase", "load"}
	var out []byte
	out = append(out, sub(1, msg(varint(1, 1), varint(2, 2)))...)              // sample_type wall/nanoseconds
	out = append(out, sub(2, msg(varint(1, locID), varint(1, 2), varint(2, 5), // two locations, one value
		sub(3, msg(varint(1, 3), varint(2, 4))), sub(3, msg(varint(1, 5), varint(2, 6))), // thread=app, state=sleeping
		sub(3, msg(varint(1, 8), varint(2, 9))), // phase=load
	))...)
	out = append(out, sub(4, msg(varint(1, 1), sub(4, msg(varint(1, 1), varint(2, 10)))))...) // location 1: f:10
	out = append(out, sub(4, msg(varint(1, 2), varint(3, 0x1234)))...)                        // location 2: an address
	out = append(out, sub(5, msg(varint(1, 1), varint(2, 7)))...)                             // function 1: f
	for _, s := range strs {
		out = append(out, sub(6, []byte(s))...)
	}
	return out
}

// TestReadSamplesByHand: samples with unpacked fields and extra labels,
// encoded before the string table, are read as the format says.
func TestReadSamplesByHand(t *testing.T) {
	p, err := ReadProfile(bytes.NewReader(handProfile(1)))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Samples) != 1 {
		t.Fatalf("%d samples, want 1", len(p.Samples))
	}
	s := p.Samples[0]
	if s.Value != 5 || s.State != profile.Sleeping || s.Thread != "app" || !reflect.DeepEqual(s.Labels, map[string]string{"phase": "load"}) {
		t.Errorf("sample = %+v, want 5 ns sleeping in thread app with phase=load", s)
	}
	if len(s.Stack) != 2 || s.Stack[0].Frames[0].Function != "f" || s.Stack[0].Frames[0].Line != 10 || s.Stack[1].Address != 0x1234 {
		t.Errorf("stack = %+v, want f:10 then the address 0x1234", s.Stack)
	}
}

// TestReadSampleUnknownLocation: a sample naming a location the profile
// does not have is a malformed profile, said in one sentence.
func TestReadSampleUnknownLocation(t *testing.T) {
	_, err := ReadProfile(bytes.NewReader(handProfile(9)))
	var fe *FormatError
	if !errors.As(err, &fe) || !strings.Contains(err.Error(), "location 9") {
		t.Fatalf("err = %v, want a FormatError about location 9", err)
	}
}

// TestReadSamplesAsPprofPackage: the samples decoded here are those the
// pprof package decodes, for wallprof's own profiles (both views) and a
// foreign one.
func TestReadSamplesAsPprofPackage(t *testing.T) {
	for name, p := range map[string]*profile.Profile{"record": testProfile(), "goroutines": goProfile()} {
		data := writePprof(t, p)
		got, err := ReadProfile(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		pp, err := pprof.ParseData(data)
		if err != nil {
			t.Fatal(err)
		}
		want, err := fromPprof(pp, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Samples) == 0 && len(got.Goroutines) == 0 {
			t.Fatalf("%s: no samples", name)
		}
		diffProfiles(t, got, want)
	}
}
