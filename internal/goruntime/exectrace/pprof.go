package exectrace

import (
	"cmp"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/google/pprof/profile"
)

type profData struct {
	sched, sys map[stackID]*stackStat
	block      map[blockKey]*stackStat
}

// ProfileNames are the pprof profiles WriteProfiles writes, after the
// prefix: scheduling latency, blocking (labelled with the wait reason
// and its category) and syscalls, each with contentions/count and
// delay/nanoseconds, as 'go tool trace -pprof' writes them.
var ProfileNames = []string{"sched-latency.pb.gz", "blocking.pb.gz", "syscalls.pb.gz"}

// WriteProfiles writes the pprof profiles to prefix+ProfileNames[i] and
// returns their paths.
func WriteProfiles(s *Summary, prefix string) ([]string, error) {
	var paths []string
	for i, name := range ProfileNames {
		p := s.newProfile()
		switch i {
		case 0:
			s.addStacks(p, s.prof.sched, nil)
		case 1:
			keys := make([]blockKey, 0, len(s.prof.block))
			for k := range s.prof.block {
				keys = append(keys, k)
			}
			slices.SortFunc(keys, func(x, y blockKey) int {
				return cmp.Or(cmp.Compare(x.category, y.category), cmp.Compare(x.reason, y.reason), cmp.Compare(x.stack, y.stack))
			})
			for _, k := range keys {
				s.addSample(p, k.stack, s.prof.block[k], map[string][]string{"category": {k.category}, "reason": {k.reason}})
			}
		case 2:
			s.addStacks(p, s.prof.sys, nil)
		}
		path := prefix + name
		if err := writeProfile(p.p, path); err != nil {
			return paths, err
		}
		paths = append(paths, path)
	}
	return paths, nil
}

func writeProfile(p *profile.Profile, path string) error {
	if err := p.CheckValid(); err != nil {
		return fmt.Errorf("profile %s: %w", path, err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if err := p.Write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// profileBuilder carries the locations and functions already added.
type profileBuilder struct {
	p     *profile.Profile
	locs  map[int32]*profile.Location
	funcs map[[2]string]*profile.Function
}

func (s *Summary) newProfile() *profileBuilder {
	return &profileBuilder{p: &profile.Profile{
		SampleType:        []*profile.ValueType{{Type: "contentions", Unit: "count"}, {Type: "delay", Unit: "nanoseconds"}},
		DefaultSampleType: "delay",
		PeriodType:        &profile.ValueType{Type: "contentions", Unit: "count"},
		Period:            1,
		DurationNanos:     int64(s.DurationMs * float64(time.Millisecond)),
		Comments:          []string{"from Go execution trace " + s.Name + " by wallprof trace"},
	}, locs: map[int32]*profile.Location{}, funcs: map[[2]string]*profile.Function{}}
}

func (s *Summary) addStacks(b *profileBuilder, m map[stackID]*stackStat, labels map[string][]string) {
	ids := make([]stackID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		s.addSample(b, id, m[id], labels)
	}
}

func (s *Summary) addSample(b *profileBuilder, id stackID, v *stackStat, labels map[string][]string) {
	if v.total <= 0 {
		return
	}
	sm := &profile.Sample{Value: []int64{v.count, int64(v.total)}, Label: labels}
	for _, fi := range s.stacks.stacks[id] {
		sm.Location = append(sm.Location, b.location(fi, s.stacks.frames[fi]))
	}
	if len(sm.Location) == 0 {
		sm.Location = append(sm.Location, b.location(-1, Frame{Func: "(no stack)"}))
	}
	b.p.Sample = append(b.p.Sample, sm)
}

func (b *profileBuilder) location(fi int32, f Frame) *profile.Location {
	if l, ok := b.locs[fi]; ok {
		return l
	}
	fk := [2]string{f.Func, f.File}
	fn, ok := b.funcs[fk]
	if !ok {
		fn = &profile.Function{ID: uint64(len(b.p.Function) + 1), Name: f.Func, SystemName: f.Func, Filename: f.File}
		b.funcs[fk] = fn
		b.p.Function = append(b.p.Function, fn)
	}
	l := &profile.Location{ID: uint64(len(b.p.Location) + 1), Address: f.PC, Line: []profile.Line{{Function: fn, Line: int64(f.Line)}}}
	b.locs[fi] = l
	b.p.Location = append(b.p.Location, l)
	return l
}
