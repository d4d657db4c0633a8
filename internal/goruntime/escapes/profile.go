package escapes

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/google/pprof/profile"
)

// ErrNoAllocSamples is returned for a profile with no allocation sample type
// (a CPU profile, say).
var ErrNoAllocSamples = errors.New("the profile has no allocation samples (alloc_space, alloc_objects, inuse_space or inuse_objects)")

// Frame is one function call on an allocation's stack.
type Frame struct {
	Func string `json:"func"`
	File string `json:"file"`
	Line int    `json:"line"`
}

// Stack is one distinct allocation stack of a profile, leaf first, with the
// runtime's allocation frames (mallocgc, newobject, growslice, ...)
// removed, and its bytes and objects for the chosen sample pair.
type Stack struct {
	Frames []Frame
	// Alloc is the runtime function that allocated for the first frame
	// kept (runtime.growslice for an append, say); empty when unknown.
	Alloc   string
	Bytes   int64
	Objects int64
}

// Sample selects what to rank by: "alloc_space" (the default),
// "alloc_objects", "inuse_space" or "inuse_objects". Space and objects
// come in pairs; the pair with the named prefix is read and the named one
// ranks.
type Sample string

// The valid samples.
var Samples = []Sample{"alloc_space", "alloc_objects", "inuse_space", "inuse_objects"}

// ByObjects reports whether the sample ranks by object count.
func (s Sample) ByObjects() bool { return strings.HasSuffix(string(s), "_objects") }

func (s Sample) prefix() string {
	return strings.TrimSuffix(strings.TrimSuffix(string(s), "_space"), "_objects")
}

// Stacks reads the allocation stacks of p for sample s. A heap profile
// holds all four sample types; one fetched from elsewhere may hold only the
// space or only the objects of a pair, and the missing one reads as 0.
func Stacks(p *profile.Profile, s Sample) ([]Stack, error) {
	if !validSample(s) {
		return nil, fmt.Errorf("unknown sample %q; use alloc_space, alloc_objects, inuse_space or inuse_objects", s)
	}
	bi, oi := -1, -1
	for i, st := range p.SampleType {
		switch st.Type {
		case s.prefix() + "_space":
			bi = i
		case s.prefix() + "_objects":
			oi = i
		}
	}
	if bi < 0 && oi < 0 {
		for _, st := range p.SampleType {
			if strings.HasSuffix(st.Type, "_space") || strings.HasSuffix(st.Type, "_objects") {
				return nil, fmt.Errorf("the profile has no %s samples; try --sample %s", s, st.Type)
			}
		}
		return nil, ErrNoAllocSamples
	}
	var out []Stack
	for _, smp := range p.Sample {
		fs, alloc := frames(smp.Location)
		st := Stack{Frames: fs, Alloc: alloc}
		if bi >= 0 {
			st.Bytes = smp.Value[bi]
		}
		if oi >= 0 {
			st.Objects = smp.Value[oi]
		}
		if st.Bytes == 0 && st.Objects == 0 {
			continue
		}
		out = append(out, st)
	}
	return out, nil
}

func validSample(s Sample) bool {
	for _, v := range Samples {
		if v == s {
			return true
		}
	}
	return false
}

// frames flattens locations (with their inlined calls) leaf first, and
// drops the runtime's allocation frames at the leaf end; alloc is the
// outermost of those (the one the kept code called).
func frames(locs []*profile.Location) (fs []Frame, alloc string) {
	for _, l := range locs {
		for _, ln := range l.Line { // Line[0] is the innermost inlined call
			f := Frame{Line: int(ln.Line)}
			if ln.Function != nil {
				f.Func, f.File = ln.Function.Name, ln.Function.Filename
			}
			fs = append(fs, f)
		}
	}
	i := 0
	for i < len(fs)-1 && isAllocFrame(fs[i].Func) {
		alloc = fs[i].Func
		i++
	}
	return fs[i:], alloc
}

// isAllocFrame reports whether fn is part of the runtime's allocator rather
// than the code that asked for memory: runtime.mallocgc, newobject,
// makeslice, growslice, concatstrings, convT64, rawstring, ..., and
// internal/bytealg.MakeNoZero (strings.Builder's buffer).
func isAllocFrame(fn string) bool {
	if strings.HasPrefix(fn, "runtime.") && !strings.HasPrefix(fn, "runtime/") {
		return true
	}
	switch fn {
	case "internal/bytealg.MakeNoZero", "":
		return true
	}
	return false
}

// shortFunc is fn without its package path: "main.search",
// "strings.ToLower", "bytes.(*Buffer).grow".
func shortFunc(fn string) string {
	return path.Base(fn)
}
