package convert

import (
	"bytes"
	"errors"

	"github.com/wallprof/wallprof/internal/present"
)

// parsePprof reads a pprof profile, gzipped or not, with present.ReadProfile.
func parsePprof(data []byte) (*Result, error) {
	p, err := present.ReadProfile(bytes.NewReader(data))
	if err != nil {
		var fe *present.FormatError
		if errors.As(err, &fe) {
			return nil, &PprofError{Reason: fe.Reason}
		}
		return nil, err
	}
	return &Result{Profile: p, Format: Pprof}, nil
}

// PprofError says why an input is not a pprof profile.
type PprofError struct{ Reason string }

func (e *PprofError) Error() string { return "the input is not a pprof profile: " + e.Reason }
