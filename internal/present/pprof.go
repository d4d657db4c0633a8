package present

import (
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/wallprof/wallprof/internal/profile"
)

// kernelFile is the file name of the kernel mapping, as perf writes it.
const kernelFile = "[kernel.kallsyms]"

// Sample label keys written on every sample. Sample.Labels may not use them.
const (
	labelPID    = "pid"
	labelTID    = "tid"
	labelThread = "thread"
	labelState  = "state"
)

// WritePprof writes p as a gzip-compressed pprof protobuf.
//
// Sample types are, in order, wall/nanoseconds (the default), cpu/nanoseconds
// and offcpu/nanoseconds; each sample's values are its Value split by its
// State. Every sample carries numeric labels pid and tid and string labels
// thread and state, plus its own Labels. Everything pprof has no field for
// is stored in "wallprof:v1" comments (see comments.go). The output depends
// only on p: the same profile gives the same bytes.
//
// A Go program's goroutine view (p.Goroutines) adds a fourth sample type,
// goroutine/nanoseconds, which becomes the default: goroutine samples carry
// their time there (0 in the thread types, and thread samples 0 in it),
// with numeric labels pid and goid and string labels gstate, wait_reason,
// created_by, gofunc and the goroutine's own pprof labels.
func WritePprof(w io.Writer, p *profile.Profile) error {
	pp, err := toPprof(p)
	if err != nil {
		return fmt.Errorf("write pprof: %w", err)
	}
	if err := pp.CheckValid(); err != nil {
		return fmt.Errorf("write pprof: invalid profile: %w", err)
	}
	// pprof's gzip writer leaves the header's modification time at zero, so
	// the bytes are reproducible.
	if err := pp.Write(w); err != nil {
		return fmt.Errorf("write pprof: %w", err)
	}
	return nil
}

// toPprof converts p to the pprof model.
func toPprof(p *profile.Profile) (*pprof.Profile, error) {
	if p == nil {
		return nil, fmt.Errorf("nil profile")
	}
	pp := &pprof.Profile{
		SampleType: []*pprof.ValueType{
			{Type: Wall.String(), Unit: "nanoseconds"},
			{Type: CPU.String(), Unit: "nanoseconds"},
			{Type: OffCPU.String(), Unit: "nanoseconds"},
		},
		DefaultSampleType: Wall.String(),
		PeriodType:        &pprof.ValueType{Type: Wall.String(), Unit: "nanoseconds"},
		Period:            p.Period,
		DurationNanos:     int64(p.Duration),
	}
	human, records := encodeComments(p)
	pp.Comments = human
	if !p.Start.IsZero() {
		pp.TimeNanos = p.Start.UnixNano()
	}
	mappings := make(map[*profile.Mapping]*pprof.Mapping, len(p.Mappings))
	for _, m := range p.Mappings {
		if m == nil {
			return nil, fmt.Errorf("nil mapping")
		}
		file := m.File
		if m.Kernel && file == "" {
			file = kernelFile
		}
		pm := &pprof.Mapping{
			ID: m.ID, Start: m.Start, Limit: m.Limit, Offset: m.Offset,
			File: file, BuildID: m.BuildID,
			// Frames are symbolized already: pprof must not try again.
			HasFunctions: true, HasFilenames: true, HasLineNumbers: true, HasInlineFrames: true,
		}
		mappings[m] = pm
		pp.Mapping = append(pp.Mapping, pm)
	}
	mainFirst(pp, p.Program, p.Command)
	locs, err := pprofLocations(pp, p.Locs, mappings)
	if err != nil {
		return nil, err
	}
	goView := len(p.Goroutines) > 0
	if goView {
		pp.SampleType = append(pp.SampleType, &pprof.ValueType{Type: goroutineType, Unit: "nanoseconds"})
		pp.DefaultSampleType = goroutineType
	}
	ls := newLabelSets()
	pp.Sample = make([]*pprof.Sample, 0, len(p.Samples)+len(p.Goroutines))
	for i, s := range p.Samples {
		ps, err := pprofSample(s, locs, ls, goView)
		if err != nil {
			return nil, fmt.Errorf("sample %d: %w", i, err)
		}
		pp.Sample = append(pp.Sample, ps)
	}
	for i, g := range p.Goroutines {
		ps, err := pprofGoSample(g, locs, ls)
		if err != nil {
			return nil, fmt.Errorf("goroutine sample %d: %w", i, err)
		}
		pp.Sample = append(pp.Sample, ps)
	}
	for _, r := range records {
		pp.Function = append(pp.Function, &pprof.Function{ID: uint64(len(pp.Function) + 1), Name: r, SystemName: recordFunction})
	}
	return pp, nil
}

// mainFirst moves the mapping of the profiled program's executable to the
// front: pprof names the first mapping as the profile's "File". That is the
// first mapping of program (Profile.Program, the path the program was run
// as, which its mappings carry) when there is one; otherwise, for profiles
// that do not say (converted, or older), the first user mapping whose base
// name is the command's first word, or else the first user mapping.
func mainFirst(pp *pprof.Profile, program, command string) {
	exe := ""
	if f := strings.Fields(command); len(f) > 0 {
		exe = path.Base(f[0])
	}
	best := -1
	for i, m := range pp.Mapping {
		if m.File == kernelFile || strings.HasPrefix(m.File, "[") {
			continue
		}
		if program != "" && m.File == program {
			best = i
			break
		}
		if best < 0 || exe != "" && path.Base(m.File) == exe && path.Base(pp.Mapping[best].File) != exe {
			best = i
		}
	}
	if best > 0 {
		m := pp.Mapping[best]
		copy(pp.Mapping[1:best+1], pp.Mapping[:best])
		pp.Mapping[0] = m
	}
}

// goroutineType is the sample type of the goroutine view: each goroutine's
// time, running, runnable or waiting. Thread samples have 0 in it, and
// goroutine samples 0 in the thread types, so no sum counts time twice.
const goroutineType = "goroutine"

// Goroutine label keys.
const (
	labelGoID       = "goid"
	labelGState     = "gstate"
	labelWaitReason = "wait_reason"
	labelCreatedBy  = "created_by"
	labelGoFunc     = "gofunc"
)

func pprofGoSample(g *profile.GoSample, locs map[*profile.Location]*pprof.Location, ls *labelSets) (*pprof.Sample, error) {
	if g == nil {
		return nil, fmt.Errorf("nil sample")
	}
	if g.State >= profile.NumGStates {
		return nil, fmt.Errorf("unknown goroutine state %d", g.State)
	}
	ps := &pprof.Sample{Value: []int64{0, 0, 0, g.Value}, Location: make([]*pprof.Location, 0, len(g.Stack))}
	ps.Label, ps.NumLabel = ls.get(func(add func(k, v string), num func(k string, v int64)) {
		num(labelPID, int64(g.PID))
		if g.GoID != 0 {
			num(labelGoID, int64(g.GoID))
		}
		add(labelGState, g.State.String())
		for _, kv := range [...][2]string{{labelWaitReason, g.WaitReason}, {labelCreatedBy, g.CreatedBy}, {labelGoFunc, g.Func}} {
			if kv[1] != "" {
				add(kv[0], kv[1])
			}
		}
		for _, k := range sortedKeys(g.Labels) {
			// The goroutine's own label cannot hide wallprof's.
			switch {
			case k == labelGState, k == labelPID, k == labelGoID,
				k == labelWaitReason && g.WaitReason != "",
				k == labelCreatedBy && g.CreatedBy != "",
				k == labelGoFunc && g.Func != "":
				continue
			}
			add(k, g.Labels[k])
		}
	})
	for _, l := range g.Stack {
		pl := locs[l]
		if pl == nil {
			return nil, fmt.Errorf("stack location is not in Profile.Locs")
		}
		ps.Location = append(ps.Location, pl)
	}
	return ps, nil
}

// pprofLocations converts locs, adding them and their functions to pp.
// Functions are deduplicated by (name, file).
func pprofLocations(pp *pprof.Profile, locs []*profile.Location, mappings map[*profile.Mapping]*pprof.Mapping) (map[*profile.Location]*pprof.Location, error) {
	type funcKey struct{ name, file string }
	funcs := map[funcKey]*pprof.Function{}
	out := make(map[*profile.Location]*pprof.Location, len(locs))
	for _, l := range locs {
		if l == nil {
			return nil, fmt.Errorf("nil location")
		}
		pl := &pprof.Location{ID: l.ID, Address: l.Address}
		if l.Mapping != nil {
			pl.Mapping = mappings[l.Mapping]
			if pl.Mapping == nil {
				return nil, fmt.Errorf("location %d: its mapping %d is not in Profile.Mappings", l.ID, l.Mapping.ID)
			}
		}
		for _, f := range l.Frames {
			k := funcKey{f.Function, f.File}
			fn := funcs[k]
			if fn == nil {
				fn = &pprof.Function{ID: uint64(len(pp.Function) + 1), Name: f.Function, SystemName: f.Function, Filename: f.File}
				funcs[k] = fn
				pp.Function = append(pp.Function, fn)
			}
			pl.Line = append(pl.Line, pprof.Line{Function: fn, Line: int64(f.Line)})
		}
		out[l] = pl
		pp.Location = append(pp.Location, pl)
	}
	return out, nil
}

func pprofSample(s *profile.Sample, locs map[*profile.Location]*pprof.Location, ls *labelSets, goView bool) (*pprof.Sample, error) {
	if s == nil {
		return nil, fmt.Errorf("nil sample")
	}
	if s.State >= profile.NumStates {
		return nil, fmt.Errorf("unknown state %d", s.State)
	}
	for k := range s.Labels {
		switch k {
		case labelPID, labelTID, labelThread, labelState:
			return nil, fmt.Errorf("label key %q is reserved", k)
		}
	}
	ps := &pprof.Sample{Location: make([]*pprof.Location, 0, len(s.Stack))}
	if goView {
		ps.Value = []int64{Wall.of(s), CPU.of(s), OffCPU.of(s), 0}
	} else {
		ps.Value = []int64{Wall.of(s), CPU.of(s), OffCPU.of(s)}
	}
	ps.Label, ps.NumLabel = ls.get(func(add func(k, v string), num func(k string, v int64)) {
		num(labelPID, int64(s.PID))
		num(labelTID, int64(s.TID))
		add(labelThread, s.Thread)
		add(labelState, s.State.String())
		for _, k := range sortedKeys(s.Labels) {
			add(k, s.Labels[k])
		}
	})
	for _, l := range s.Stack {
		pl := locs[l]
		if pl == nil {
			if l == nil {
				return nil, fmt.Errorf("nil location in stack")
			}
			return nil, fmt.Errorf("stack location %d is not in Profile.Locs", l.ID)
		}
		ps.Location = append(ps.Location, pl)
	}
	return ps, nil
}

// fromPprof converts a parsed pprof profile to the model.
// Its samples are ps's, decoded one at a time, or pp's when ps is nil.
func fromPprof(pp *pprof.Profile, ps *pprofSamples) (*profile.Profile, error) {
	var st commentState
	var foreignComments []string
	for _, f := range pp.Function {
		if f.SystemName == recordFunction {
			if _, err := st.decodeComment(f.Name); err != nil {
				return nil, err
			}
		}
	}
	for _, c := range pp.Comments {
		other, err := st.decodeComment(c)
		if err != nil {
			return nil, err
		}
		if other {
			foreignComments = append(foreignComments, c)
		}
	}
	vi, scale, err := pickValue(pp)
	if err != nil {
		return nil, err
	}
	p := &profile.Profile{
		Duration: time.Duration(pp.DurationNanos),
		Command:  st.command,
		Program:  st.program,
		Threads:  st.threads,
		Lost:     st.lost,
		Cost:     st.cost,
		Notes:    st.notes,
		Recorder: st.recorder,
	}
	if pp.TimeNanos != 0 {
		p.Start = time.Unix(0, pp.TimeNanos).UTC()
	}
	if pt := pp.PeriodType; pt != nil {
		if s, ok := timeUnits[pt.Unit]; ok {
			p.Period = pp.Period * s
		}
	}
	defState := profile.Other
	if pp.SampleType[vi].Type == CPU.String() {
		defState = profile.OnCPU
	}
	if !st.found {
		p.Notes = append(foreignComments, foreignNote(pp, vi))
	}
	locs := modelLocations(p, pp, st.kernelMappings)
	gi := -1
	for i, t := range pp.SampleType {
		if t.Type == goroutineType && t.Unit == "nanoseconds" && st.found {
			gi = i
		}
	}
	add := func(s *rawSample) error {
		if len(s.values) != len(pp.SampleType) {
			return fmt.Errorf("a sample has %d values for %d sample types", len(s.values), len(pp.SampleType))
		}
		if gi >= 0 && s.values[gi] != 0 {
			g, err := modelGoSample(s, locs, gi)
			if err != nil {
				return err
			}
			p.Goroutines = append(p.Goroutines, g)
			return nil
		}
		m, err := modelSample(s, locs, vi, scale, defState)
		if err != nil {
			return err
		}
		p.Samples = append(p.Samples, m)
		return nil
	}
	var raw rawSample
	if ps != nil {
		if ps.n > 0 {
			p.Samples = make([]*profile.Sample, 0, ps.n)
		}
		if err := ps.each(&raw, add); err != nil {
			return nil, err
		}
	} else {
		for _, s := range pp.Sample {
			fromPprofSample(s, &raw)
			if err := add(&raw); err != nil {
				return nil, err
			}
		}
	}
	p.GoInfo = st.goInfo
	return p, nil
}

// timeUnits maps pprof time units to nanoseconds.
var timeUnits = map[string]int64{"nanoseconds": 1, "microseconds": 1e3, "milliseconds": 1e6, "seconds": 1e9}

// pickValue chooses the sample value to read: wall, else cpu, else the
// default sample type, else the first sample type measured in time.
func pickValue(pp *pprof.Profile) (index int, scale int64, err error) {
	index = -1
	for _, want := range []string{Wall.String(), CPU.String(), pp.DefaultSampleType} {
		if want == goroutineType {
			continue // the second view, read separately
		}
		for i, st := range pp.SampleType {
			if _, ok := timeUnits[st.Unit]; ok && st.Type == want && index < 0 {
				index = i
			}
		}
	}
	for i, st := range pp.SampleType {
		if _, ok := timeUnits[st.Unit]; ok && index < 0 {
			index = i
		}
	}
	if index < 0 {
		var types []string
		for _, st := range pp.SampleType {
			types = append(types, st.Type+"/"+st.Unit)
		}
		return 0, 0, fmt.Errorf("it has no sample type measured in time (it has %v), and wallprof reads time profiles", types)
	}
	return index, timeUnits[pp.SampleType[index].Unit], nil
}

func foreignNote(pp *pprof.Profile, vi int) string {
	st := pp.SampleType[vi]
	n := fmt.Sprintf("read from a pprof profile not written by wallprof, using its %s/%s values; thread times and lost events are unknown", st.Type, st.Unit)
	if st.Type == CPU.String() {
		return n + "; all time is on-CPU"
	}
	return n + "; without state labels, time is counted as state other"
}

// modelLocations adds pp's mappings and locations to p, and returns them
// by ID.
func modelLocations(p *profile.Profile, pp *pprof.Profile, kernel map[uint64]bool) map[uint64]*profile.Location {
	mappings := make(map[*pprof.Mapping]*profile.Mapping, len(pp.Mapping))
	for _, pm := range pp.Mapping {
		m := &profile.Mapping{
			ID: pm.ID, Start: pm.Start, Limit: pm.Limit, Offset: pm.Offset,
			File: pm.File, BuildID: pm.BuildID,
			Kernel: isKernelFile(pm.File) || kernel[pm.ID],
		}
		mappings[pm] = m
		p.Mappings = append(p.Mappings, m)
	}
	locs := make(map[uint64]*profile.Location, len(pp.Location))
	for _, pl := range pp.Location {
		l := &profile.Location{ID: pl.ID, Address: pl.Address}
		if pl.Mapping != nil {
			l.Mapping = mappings[pl.Mapping]
		}
		for _, ln := range pl.Line {
			f := profile.Frame{Line: int(ln.Line)}
			if ln.Function != nil {
				f.Function, f.File = ln.Function.Name, ln.Function.Filename
			}
			l.Frames = append(l.Frames, f)
		}
		locs[pl.ID] = l
		p.Locs = append(p.Locs, l)
	}
	return locs
}

func modelSample(rs *rawSample, locs map[uint64]*profile.Location, vi int, scale int64, defState profile.State) (*profile.Sample, error) {
	s := &profile.Sample{
		Value: rs.values[vi] * scale,
		State: defState,
		PID:   int(rs.numLabel(labelPID)),
		TID:   int(rs.numLabel(labelTID)),
	}
	for _, l := range rs.str {
		switch l.key {
		case labelThread:
			if s.Thread == "" {
				s.Thread = l.value
			}
		case labelState:
			if st, ok := profile.ParseState(l.value); ok {
				s.State = st
			}
		case labelPID, labelTID:
			// Reserved for the numeric labels; WritePprof would refuse them.
		default:
			if s.Labels == nil {
				s.Labels = map[string]string{}
			}
			if _, ok := s.Labels[l.key]; !ok {
				s.Labels[l.key] = l.value
			}
		}
	}
	stack, err := modelStack(rs, locs)
	s.Stack = stack
	return s, err
}

// modelStack is a sample's stack; an ID no location has is an error.
func modelStack(rs *rawSample, locs map[uint64]*profile.Location) ([]*profile.Location, error) {
	if len(rs.locs) == 0 {
		return nil, nil
	}
	stack := make([]*profile.Location, 0, len(rs.locs))
	for _, id := range rs.locs {
		l := locs[id]
		if l == nil {
			return nil, fmt.Errorf("a sample names location %d, which the profile does not have", id)
		}
		stack = append(stack, l)
	}
	return stack, nil
}

func modelGoSample(rs *rawSample, locs map[uint64]*profile.Location, gi int) (*profile.GoSample, error) {
	g := &profile.GoSample{
		Value: rs.values[gi],
		PID:   int(rs.numLabel(labelPID)),
		GoID:  uint64(rs.numLabel(labelGoID)),
		State: profile.GWaiting,
	}
	for _, l := range rs.str {
		switch l.key {
		case labelGState:
			if st, ok := profile.ParseGState(l.value); ok {
				g.State = st
			}
		case labelWaitReason:
			g.WaitReason = l.value
		case labelCreatedBy:
			g.CreatedBy = l.value
		case labelGoFunc:
			g.Func = l.value
		default:
			if g.Labels == nil {
				g.Labels = map[string]string{}
			}
			if _, ok := g.Labels[l.key]; !ok {
				g.Labels[l.key] = l.value
			}
		}
	}
	stack, err := modelStack(rs, locs)
	g.Stack = stack
	return g, err
}

// labelSets shares the label maps of the samples that have the same
// labels: a recording's samples have few distinct sets (a thread's, in
// each state), and maps of their own per sample were most of the memory
// of writing a large profile. The maps are only read after this (the
// encoder sorts their keys into its own slices): nothing may change them.
type labelSets struct {
	sets map[string]labelSet
	key  []byte
	strs []string   // the set being looked up: key, value, key, value...
	nums []numLabel // its numeric labels
}

type labelSet struct {
	str map[string][]string
	num map[string][]int64
}

type numLabel struct {
	k string
	v int64
}

func newLabelSets() *labelSets { return &labelSets{sets: map[string]labelSet{}} }

// get returns the maps of the labels that fill adds, shared with every
// sample that has the same ones.
func (ls *labelSets) get(fill func(add func(k, v string), num func(k string, v int64))) (map[string][]string, map[string][]int64) {
	ls.key, ls.strs, ls.nums = ls.key[:0], ls.strs[:0], ls.nums[:0]
	fill(func(k, v string) {
		ls.strs = append(ls.strs, k, v)
		ls.key = append(append(append(append(ls.key, k...), 0), v...), 0)
	}, func(k string, v int64) {
		ls.nums = append(ls.nums, numLabel{k, v})
		ls.key = strconv.AppendInt(append(append(ls.key, k...), 1), v, 10)
		ls.key = append(ls.key, 0)
	})
	if s, ok := ls.sets[string(ls.key)]; ok {
		return s.str, s.num
	}
	s := labelSet{str: make(map[string][]string, len(ls.strs)/2), num: make(map[string][]int64, len(ls.nums))}
	for i := 0; i < len(ls.strs); i += 2 {
		s.str[ls.strs[i]] = []string{ls.strs[i+1]}
	}
	for _, n := range ls.nums {
		s.num[n.k] = []int64{n.v}
	}
	ls.sets[string(ls.key)] = s
	return s.str, s.num
}

func sortedKeys(m map[string]string) []string {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
