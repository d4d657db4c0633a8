package convert

import (
	"bytes"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wallprof/wallprof/internal/profile"
)

// frame is one parsed stack frame, as an input states it.
type frame struct {
	Function string // "" when the input gives no name
	File     string // source file, if known
	Line     int
	Module   string // executable or library (perf's dso), if known
	Address  uint64 // 0 if unknown
	Kernel   bool
}

// name is the frame's function name, or "module+0xaddr"/"0xaddr" for an
// unnamed frame, so unknown code is shown, never hidden.
func (f frame) name() string {
	if f.Function != "" {
		return f.Function
	}
	if f.Module != "" {
		return fmt.Sprintf("%s+0x%x", path.Base(f.Module), f.Address)
	}
	return fmt.Sprintf("0x%x", f.Address)
}

// threadKey identifies a thread; zero values mean unknown.
type threadKey struct {
	PID, TID int
	Name     string
}

type locKey struct {
	module, function, file string
	line                   int
	address                uint64
}

type sampleKey struct {
	thread threadKey
	state  profile.State
	stack  string
}

// builder assembles a profile: it interns mappings and locations and merges
// samples with the same thread, state and stack.
type builder struct {
	p         *profile.Profile
	mappings  map[string]*profile.Mapping
	locs      map[locKey]*profile.Location
	samples   map[sampleKey]*profile.Sample
	threads   map[threadKey]*profile.Thread
	perThread bool // fill Profile.Threads from the samples
	pids      map[int]bool
	dropped   int // samples left out by the PID filter
}

func newBuilder(period time.Duration, perThread bool, pids []int) *builder {
	b := &builder{
		p:         &profile.Profile{Period: int64(period)},
		mappings:  map[string]*profile.Mapping{},
		locs:      map[locKey]*profile.Location{},
		samples:   map[sampleKey]*profile.Sample{},
		threads:   map[threadKey]*profile.Thread{},
		perThread: perThread,
	}
	if len(pids) > 0 {
		b.pids = map[int]bool{}
		for _, p := range pids {
			b.pids[p] = true
		}
	}
	return b
}

// keep reports whether samples of process pid are kept.
func (b *builder) keep(pid int) bool { return b.pids == nil || b.pids[pid] }

func (b *builder) mapping(file string, kernel bool) *profile.Mapping {
	if file == "" {
		return nil
	}
	m := b.mappings[file]
	if m == nil {
		m = &profile.Mapping{ID: uint64(len(b.p.Mappings) + 1), File: file, Kernel: kernel}
		b.mappings[file] = m
		b.p.Mappings = append(b.p.Mappings, m)
	}
	return m
}

func (b *builder) location(f frame) *profile.Location {
	k := locKey{f.Module, f.name(), f.File, f.Line, f.Address}
	l := b.locs[k]
	if l == nil {
		l = &profile.Location{
			ID:      uint64(len(b.p.Locs) + 1),
			Mapping: b.mapping(f.Module, f.Kernel),
			Address: f.Address,
			Frames:  []profile.Frame{{Function: f.name(), File: f.File, Line: f.Line}},
		}
		b.locs[k] = l
		b.p.Locs = append(b.p.Locs, l)
	}
	return l
}

// add records value nanoseconds spent in stack (leaf first) by thread t in
// state st. An empty stack is recorded as one "[no stack]" frame, so the
// time is still counted.
func (b *builder) add(t threadKey, st profile.State, stack []frame, value int64) {
	if value < 0 {
		value = 0
	}
	if !b.keep(t.PID) {
		b.dropped++
		return
	}
	if len(stack) == 0 {
		stack = []frame{{Function: "[no stack]"}}
	}
	locs := make([]*profile.Location, len(stack))
	var key strings.Builder
	for i, f := range stack {
		locs[i] = b.location(f)
		key.WriteString(strconv.FormatUint(locs[i].ID, 36))
		key.WriteByte(',')
	}
	sk := sampleKey{t, st, key.String()}
	s := b.samples[sk]
	if s == nil {
		s = &profile.Sample{Stack: locs, PID: t.PID, TID: t.TID, Thread: t.Name, State: st}
		b.samples[sk] = s
		b.p.Samples = append(b.p.Samples, s)
	}
	s.Value += value
	if b.perThread && t != (threadKey{}) {
		th := b.threads[t]
		if th == nil {
			th = &profile.Thread{PID: t.PID, TID: t.TID, Name: t.Name}
			b.threads[t] = th
			b.p.Threads = append(b.p.Threads, th)
		}
		th.Time[st] += time.Duration(value)
		th.Samples++
	}
}

// note adds a remark about what the input could not tell.
func (b *builder) note(format string, args ...any) {
	b.p.Notes = append(b.p.Notes, fmt.Sprintf(format, args...))
}

// lost counts something the input lost, by cause.
func (b *builder) lost(cause string, n uint64) {
	if n == 0 {
		return
	}
	if b.p.Lost == nil {
		b.p.Lost = map[string]uint64{}
	}
	b.p.Lost[cause] += n
}

// finish returns the profile with threads sorted.
func (b *builder) finish() *profile.Profile {
	if b.pids != nil {
		var ps []int
		for p := range b.pids {
			ps = append(ps, p)
		}
		sort.Ints(ps)
		b.note("kept only the samples of process %v: %d others were left out", ps, b.dropped)
	}
	sort.SliceStable(b.p.Threads, func(i, j int) bool {
		x, y := b.p.Threads[i], b.p.Threads[j]
		if x.PID != y.PID {
			return x.PID < y.PID
		}
		if x.TID != y.TID {
			return x.TID < y.TID
		}
		return x.Name < y.Name
	})
	return b.p
}

// lineReader splits data into lines without their line ending.
type lineReader struct {
	data []byte
	n    int // number of the line last returned, 1-based
}

func (r *lineReader) next() (string, bool) {
	if len(r.data) == 0 {
		return "", false
	}
	var line []byte
	if i := bytes.IndexByte(r.data, '\n'); i >= 0 {
		line, r.data = r.data[:i], r.data[i+1:]
	} else {
		line, r.data = r.data, nil
	}
	r.n++
	return strings.TrimSuffix(string(line), "\r"), true
}
