package convert

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/profile"
)

// SpeedscopeSchema is the $schema URL of speedscope's file format.
const SpeedscopeSchema = "https://www.speedscope.app/file-format-schema.json"

// SpeedscopeOptions configures WriteSpeedscope.
type SpeedscopeOptions struct {
	// Name is the file's profile-group name; "" uses the profile's command
	// or "wallprof profile".
	Name string
	// Weight is the time counted: present.Wall (the zero value), CPU or OffCPU.
	Weight present.Weight
	// PerThread writes one sampled profile per thread instead of one merged.
	PerThread bool
	// States adds the scheduler state as an extra leaf frame, "[sleeping]".
	States bool
}

// The file format, as documented in speedscope's file-format-spec.ts.
type ssFile struct {
	Schema             string      `json:"$schema"`
	Shared             ssShared    `json:"shared"`
	Profiles           []ssProfile `json:"profiles"`
	Name               string      `json:"name"`
	ActiveProfileIndex int         `json:"activeProfileIndex"`
	Exporter           string      `json:"exporter"`
}

type ssShared struct {
	Frames []ssFrame `json:"frames"`
}

type ssFrame struct {
	Name string `json:"name"`
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"`
}

type ssProfile struct {
	Type       string  `json:"type"`
	Name       string  `json:"name"`
	Unit       string  `json:"unit"`
	StartValue int64   `json:"startValue"`
	EndValue   int64   `json:"endValue"`
	Samples    [][]int `json:"samples"`
	Weights    []int64 `json:"weights"`
}

// WriteSpeedscope writes p as a speedscope JSON file: "sampled" profiles
// in nanoseconds sharing one frame table, each sample a stack of frame
// indices from the root to the leaf (inlined functions expanded, caller
// first) with its time as weight. Samples with no time under the weight are
// left out. The output depends only on p and opt.
func WriteSpeedscope(w io.Writer, p *profile.Profile, opt SpeedscopeOptions) error {
	if p == nil {
		return fmt.Errorf("write speedscope: nil profile")
	}
	f := ssFile{Schema: SpeedscopeSchema, Name: opt.Name, Exporter: "wallprof", Shared: ssShared{Frames: []ssFrame{}}}
	if f.Name == "" {
		f.Name = p.Command
	}
	if f.Name == "" {
		f.Name = "wallprof profile"
	}
	frames := map[ssFrame]int{}
	intern := func(fr ssFrame) int {
		i, ok := frames[fr]
		if !ok {
			i = len(f.Shared.Frames)
			frames[fr] = i
			f.Shared.Frames = append(f.Shared.Frames, fr)
		}
		return i
	}
	for _, g := range speedscopeGroups(p, opt) {
		sp := ssProfile{Type: "sampled", Name: g.name, Unit: "nanoseconds", Samples: [][]int{}, Weights: []int64{}}
		for _, s := range g.samples {
			v := weightOf(opt.Weight, s)
			if v <= 0 {
				continue
			}
			sp.Samples = append(sp.Samples, speedscopeStack(s, opt.States, intern))
			sp.Weights = append(sp.Weights, v)
			sp.EndValue += v
		}
		f.Profiles = append(f.Profiles, sp)
	}
	enc := json.NewEncoder(w)
	if err := enc.Encode(&f); err != nil {
		return fmt.Errorf("write speedscope: %w", err)
	}
	return nil
}

// weightOf is the part of s's value counted under wt.
func weightOf(wt present.Weight, s *profile.Sample) int64 {
	switch {
	case wt == present.Wall,
		wt == present.CPU && s.State == profile.OnCPU,
		wt == present.OffCPU && s.State.OffCPU():
		return s.Value
	}
	return 0
}

type ssGroup struct {
	name    string
	samples []*profile.Sample
}

// speedscopeGroups splits the samples into one group, or one per thread
// ordered by PID, TID and name.
func speedscopeGroups(p *profile.Profile, opt SpeedscopeOptions) []ssGroup {
	if !opt.PerThread {
		name := "all threads (" + opt.Weight.String() + ")"
		return []ssGroup{{name: name, samples: p.Samples}}
	}
	type key struct {
		pid, tid int
		name     string
	}
	groups := map[key]*ssGroup{}
	var keys []key
	for _, s := range p.Samples {
		k := key{s.PID, s.TID, s.Thread}
		g := groups[k]
		if g == nil {
			name := fmt.Sprintf("%s %d/%d (%s)", s.Thread, s.PID, s.TID, opt.Weight)
			if s.TID == 0 && s.PID == 0 && s.Thread == "" {
				name = "unknown thread (" + opt.Weight.String() + ")"
			}
			g = &ssGroup{name: name}
			groups[k] = g
			keys = append(keys, k)
		}
		g.samples = append(g.samples, s)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.pid != b.pid {
			return a.pid < b.pid
		}
		if a.tid != b.tid {
			return a.tid < b.tid
		}
		return a.name < b.name
	})
	out := make([]ssGroup, len(keys))
	for i, k := range keys {
		out[i] = *groups[k]
	}
	if len(out) == 0 {
		out = append(out, ssGroup{name: "no samples"})
	}
	return out
}

// speedscopeStack returns s's frame indices from the root to the leaf.
func speedscopeStack(s *profile.Sample, states bool, intern func(ssFrame) int) []int {
	var st []int
	for i := len(s.Stack) - 1; i >= 0; i-- {
		loc := s.Stack[i]
		if loc == nil {
			continue
		}
		if len(loc.Frames) == 0 {
			st = append(st, intern(ssFrame{Name: loc.UnknownName()}))
			continue
		}
		for j := len(loc.Frames) - 1; j >= 0; j-- {
			fr := loc.Frames[j]
			name := fr.Function
			if name == "" {
				name = "[unknown]"
			}
			st = append(st, intern(ssFrame{Name: name, File: fr.File, Line: fr.Line}))
		}
	}
	if len(st) == 0 {
		st = append(st, intern(ssFrame{Name: "[no stack]"}))
	}
	if states {
		st = append(st, intern(ssFrame{Name: "[" + s.State.String() + "]"}))
	}
	return st
}
