package present

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"

	pprof "github.com/google/pprof/profile"

	"github.com/wallprof/wallprof/internal/profile"
)

// MaxProfileSize bounds the uncompressed size of a profile ReadProfile
// accepts, so that a small malicious gzip file cannot exhaust memory.
const MaxProfileSize = 1 << 30

// FormatError says why an input is not a profile wallprof can read.
type FormatError struct {
	Name   string // file name, or "" for an unnamed reader
	Reason string
}

func (e *FormatError) Error() string {
	name := e.Name
	if name == "" {
		name = "input"
	}
	return fmt.Sprintf("%s is not a pprof profile: %s", name, e.Reason)
}

// ReadProfile reads a pprof profile, gzipped or not, into the model.
//
// A profile written by WritePprof comes back as it was written (Start in
// UTC). Any other pprof profile is mapped onto the model: the value read is
// the wall sample type, else cpu, else the default or first time-valued one;
// samples without a state label are OnCPU for a cpu profile and Other
// otherwise; there are no threads; a note says so. Its non-wallprof
// comments become notes.
//
// Errors about the input's content are *FormatError.
func ReadProfile(r io.Reader) (*profile.Profile, error) {
	return readProfile(r, "")
}

// ReadProfileFile is ReadProfile on a named file; its errors name the file.
func ReadProfileFile(path string) (*profile.Profile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readProfile(f, path)
}

func readProfile(r io.Reader, name string) (*profile.Profile, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxProfileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", nameOr(name), err)
	}
	pp, ps, reason := parsePprof(data)
	if reason != "" {
		return nil, &FormatError{Name: name, Reason: reason}
	}
	p, err := fromPprof(pp, ps)
	if err != nil {
		return nil, &FormatError{Name: name, Reason: err.Error()}
	}
	return p, nil
}

func nameOr(name string) string {
	if name == "" {
		return "input"
	}
	return name
}

// parsePprof decodes data, returning a reason on failure. A protobuf
// profile comes back without its samples, which ps decodes (splitPprof);
// a legacy text profile with them, and ps nil.
func parsePprof(data []byte) (pp *pprof.Profile, ps *pprofSamples, reason string) {
	defer func() {
		// The decoder is third-party code fed untrusted bytes: a panic in it
		// is a bad input, not a crash.
		if r := recover(); r != nil {
			pp, ps, reason = nil, nil, fmt.Sprintf("the decoder failed (%v)", r)
		}
	}()
	if len(data) == 0 {
		return nil, nil, "the file is empty"
	}
	if len(data) > MaxProfileSize {
		return nil, nil, fmt.Sprintf("it is larger than %d bytes", MaxProfileSize)
	}
	if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
		raw, err := gunzip(data)
		if err != nil {
			return nil, nil, err.Error()
		}
		data = raw
		if len(data) == 0 {
			return nil, nil, "it is an empty gzip stream"
		}
	}
	pp, ps, err := splitPprof(data)
	if err != nil {
		// Not a protobuf: maybe one of the legacy text formats pprof reads.
		legacy, lerr := pprof.ParseData(data)
		if lerr != nil {
			return nil, nil, fmt.Sprintf("protobuf decoding failed (%v)", err)
		}
		pp, ps = legacy, nil
	}
	if err := pp.CheckValid(); err != nil {
		return nil, nil, fmt.Sprintf("it is malformed (%v)", err)
	}
	return pp, ps, ""
}

func gunzip(data []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("bad gzip header (%v)", err)
	}
	raw, err := io.ReadAll(io.LimitReader(zr, MaxProfileSize+1))
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return nil, fmt.Errorf("the gzip data is truncated (%v)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("the gzip data is corrupt (%v)", err)
	}
	if len(raw) > MaxProfileSize {
		return nil, fmt.Errorf("it decompresses to more than %d bytes", MaxProfileSize)
	}
	return raw, nil
}
