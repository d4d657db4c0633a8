package present

import (
	"errors"
	"fmt"

	pprof "github.com/google/pprof/profile"
	"google.golang.org/protobuf/encoding/protowire"
)

// A profile's samples are decoded here, straight into the model, rather
// than by the pprof package: its Parse gives every sample a map of string
// labels and one of numeric labels, and keeps its own copy of every sample
// beside the model's. For a profile of a million distinct samples that was
// most of the 2.9 GB `wallprof flame` needed. The rest of the profile (the
// string table, mappings, locations, functions, comments, sample types) is
// small and parsed by the pprof package, from the same bytes without the
// samples (field 2 of profile.proto's Profile).

// Field numbers of profile.proto.
const (
	pbProfileSample      = 2
	pbProfileStringTable = 6
	pbSampleLocationID   = 1
	pbSampleValue        = 2
	pbSampleLabel        = 3
	pbLabelKey           = 1
	pbLabelStr           = 2
	pbLabelNum           = 3
	pbLabelNumUnit       = 4
)

// rawSample is one sample as decoded, its labels resolved: what modelSample
// and modelGoSample read. Its slices are reused from sample to sample.
type rawSample struct {
	locs   []uint64
	values []int64
	str    []rawLabel // string labels, in the file's order
	num    []rawNum   // numeric labels
}

type rawLabel struct{ key, value string }

type rawNum struct {
	key   string
	value int64
}

// strLabel returns the first value of string label key.
func (s *rawSample) strLabel(key string) (string, bool) {
	for _, l := range s.str {
		if l.key == key {
			return l.value, true
		}
	}
	return "", false
}

// numLabel returns the first value of numeric label key (0 if none).
func (s *rawSample) numLabel(key string) int64 {
	for _, l := range s.num {
		if l.key == key {
			return l.value
		}
	}
	return 0
}

// fromPprofSample is rawSample of a sample the pprof package decoded (the
// legacy text formats).
func fromPprofSample(ps *pprof.Sample, s *rawSample) {
	s.locs, s.values, s.str, s.num = s.locs[:0], append(s.values[:0], ps.Value...), s.str[:0], s.num[:0]
	for _, l := range ps.Location {
		s.locs = append(s.locs, l.ID)
	}
	for k, vs := range ps.Label {
		for _, v := range vs {
			s.str = append(s.str, rawLabel{k, v})
		}
	}
	for k, vs := range ps.NumLabel {
		for _, v := range vs {
			s.num = append(s.num, rawNum{k, v})
		}
	}
}

// pprofSamples is a profile split in two: the pprof package's parse of
// everything but the samples, and the samples' encoded bytes.
type pprofSamples struct {
	data    []byte   // the whole encoded profile
	strings []string // its string table
	n       int      // its samples
}

// splitPprof parses data, an uncompressed profile.proto message, but for
// its samples, which each calls decode. It fails on bytes that are not a
// protobuf message (the caller then tries the legacy text formats).
func splitPprof(data []byte) (*pprof.Profile, *pprofSamples, error) {
	rest := make([]byte, 0, 1<<16)
	ps := &pprofSamples{data: data}
	for b := data; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, nil, protowire.ParseError(n)
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nil, nil, protowire.ParseError(m)
		}
		field := b[:n+m]
		switch {
		case num == pbProfileSample && typ == protowire.BytesType:
			ps.n++
		case num == pbProfileStringTable && typ == protowire.BytesType:
			v, _ := protowire.ConsumeBytes(b[n:])
			ps.strings = append(ps.strings, string(v))
			rest = append(rest, field...)
		default:
			rest = append(rest, field...)
		}
		b = b[n+m:]
	}
	pp, err := pprof.ParseUncompressed(rest)
	if err != nil {
		return nil, nil, err
	}
	return pp, ps, nil
}

// errSample says a sample is malformed.
var errSample = errors.New("a sample is malformed")

// each decodes the samples in order into s, calling fn with each.
func (ps *pprofSamples) each(s *rawSample, fn func(*rawSample) error) error {
	for b := ps.data; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if num == pbProfileSample && typ == protowire.BytesType {
			v, _ := protowire.ConsumeBytes(b[n:])
			if err := ps.decode(v, s); err != nil {
				return err
			}
			if err := fn(s); err != nil {
				return err
			}
		}
		b = b[n+m:]
	}
	return nil
}

// decode decodes one Sample message.
func (ps *pprofSamples) decode(b []byte, s *rawSample) error {
	s.locs, s.values, s.str, s.num = s.locs[:0], s.values[:0], s.str[:0], s.num[:0]
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return errSample
		}
		b = b[n:]
		switch {
		case (num == pbSampleLocationID || num == pbSampleValue) && (typ == protowire.BytesType || typ == protowire.VarintType):
			// Packed (a run of varints, what encoders write) or not (one
			// varint per field).
			var v []byte
			var n int
			if typ == protowire.BytesType {
				v, n = protowire.ConsumeBytes(b)
			} else if n = protowire.ConsumeFieldValue(num, typ, b); n >= 0 {
				v = b[:n]
			}
			if n < 0 {
				return errSample
			}
			for len(v) > 0 {
				x, k := protowire.ConsumeVarint(v)
				if k < 0 {
					return errSample
				}
				if num == pbSampleLocationID {
					s.locs = append(s.locs, x)
				} else {
					s.values = append(s.values, int64(x))
				}
				v = v[k:]
			}
			b = b[n:]
		case num == pbSampleLabel && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return errSample
			}
			if err := ps.label(v, s); err != nil {
				return err
			}
			b = b[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return errSample
			}
			b = b[n:]
		}
	}
	return nil
}

// label decodes one Label message into s: a string label when it has a
// string, else a numeric one (as the pprof package reads them).
func (ps *pprofSamples) label(b []byte, s *rawSample) error {
	var key, str, unit uint64
	var numv int64
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.VarintType {
			if n >= 0 {
				if m := protowire.ConsumeFieldValue(num, typ, b[n:]); m >= 0 {
					b = b[n+m:]
					continue
				}
			}
			return errSample
		}
		x, m := protowire.ConsumeVarint(b[n:])
		if m < 0 {
			return errSample
		}
		switch num {
		case pbLabelKey:
			key = x
		case pbLabelStr:
			str = x
		case pbLabelNum:
			numv = int64(x)
		case pbLabelNumUnit:
			unit = x
		}
		b = b[n+m:]
	}
	k, ok := ps.str(key)
	if !ok {
		return fmt.Errorf("a sample's label names string %d of %d", key, len(ps.strings))
	}
	switch {
	case str != 0:
		v, ok := ps.str(str)
		if !ok {
			return fmt.Errorf("a sample's label names string %d of %d", str, len(ps.strings))
		}
		s.str = append(s.str, rawLabel{k, v})
	case numv != 0 || unit != 0:
		s.num = append(s.num, rawNum{k, numv})
	}
	return nil
}

func (ps *pprofSamples) str(i uint64) (string, bool) {
	if i >= uint64(len(ps.strings)) {
		return "", false
	}
	return ps.strings[i], true
}
