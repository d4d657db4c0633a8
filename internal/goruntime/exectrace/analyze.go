// Package exectrace summarises a Go execution trace (runtime/trace, Go
// 1.22 and later) in one streaming pass: stop-the-world and GC pauses and
// their period, GC cycles, mark assists and the GC workers' share of CPU,
// scheduling latency, blocking by reason, long syscalls, goroutine churn,
// and user regions and tasks, each with the stacks involved.
//
// Contract: Analyze reads the trace once, front to back, and holds state
// for the live goroutines, open regions and tasks, the distinct stacks and
// one record per pause; never the events themselves. The parser
// (golang.org/x/exp/trace) buffers one generation of the trace (about a
// second of it, longer when the traced program starves the runtime's
// advancer); genEvents gives it one generation at a time and spares it a
// copy of each batch, so that peak memory is about 1.1 times the largest
// generation (for large ones), whatever the trace's length. It never
// panics on
// bad input: a file that is not a trace, a trace older than Go 1.22 and an
// empty file are errors (ErrNotTrace, ErrOldTrace, ErrEmpty); a trace
// that stops early is summarised up to where it stops, with Truncated set.
package exectrace

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"golang.org/x/exp/trace"
)

// Errors for input that is not a trace this package reads.
var (
	ErrEmpty    = errors.New("the file is empty")
	ErrNotTrace = errors.New("not a Go execution trace")
	ErrOldTrace = errors.New("trace format older than Go 1.22")
	ErrNewTrace = errors.New("trace format newer than this wallprof reads")
	// ErrTruncated is returned when a trace stops before any event could
	// be read; a trace that stops later is summarised, with
	// Summary.Truncated set.
	ErrTruncated = errors.New("truncated trace")
)

// Options tunes Analyze.
type Options struct {
	// Name labels the trace in reports.
	Name string
	// Size is the input's size in bytes, if known (for progress).
	Size int64
	// Progress, if set, is called now and then with the bytes read so far.
	Progress func(read int64)
	// Worst is how many worst cases to keep per list (default 10).
	Worst int
	// Stop, if set, is checked now and then; Analyze returns its error
	// when it returns one (say, a context's Err on Ctrl-C).
	Stop func() error

	// oneReader reads the trace with a single trace.Reader rather than
	// one per generation (genEvents), for the tests to compare.
	oneReader bool
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// minVersion and maxVersion are the trace format versions (Go 1.N) read.
const minVersion, maxVersion = 22, 26

// checkHeader reads the trace header ("go 1.N trace\0\0\0") without
// consuming it and says what is wrong with it, if anything.
func checkHeader(br *bufio.Reader) (int, error) {
	h, err := br.Peek(16)
	if len(h) == 0 && (err == io.EOF || err == nil) {
		return 0, ErrEmpty
	}
	var v int
	if _, serr := fmt.Sscanf(string(h), "go 1.%d trace", &v); serr != nil || len(h) < 16 {
		return 0, ErrNotTrace
	}
	switch {
	case v < minVersion:
		return v, fmt.Errorf("%w: it was written by Go 1.%d; wallprof trace reads the format of Go 1.%d to 1.%d, so record it again with a newer Go", ErrOldTrace, v, minVersion, maxVersion)
	case v > maxVersion:
		return v, fmt.Errorf("%w: it was written by Go 1.%d and this wallprof reads Go 1.%d to 1.%d; update wallprof", ErrNewTrace, v, minVersion, maxVersion)
	}
	return v, nil
}

// Analyze reads a trace and summarises it.
func Analyze(r io.Reader, opt Options) (*Summary, error) {
	if opt.Worst <= 0 {
		opt.Worst = 10
	}
	cr := &countingReader{r: r}
	br := bufio.NewReaderSize(cr, 1<<16)
	v, err := checkHeader(br)
	if err != nil {
		return nil, err
	}
	var read readFunc
	if opt.oneReader {
		var tr *trace.Reader
		tr, err = trace.NewReader(br)
		read = func(dst *trace.Event) (err error) {
			*dst, err = tr.ReadEvent()
			return err
		}
	} else {
		var g *genEvents
		g, err = newGenEvents(br, v)
		read = g.read
	}
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNotTrace, err)
	}
	a := newAnalyzer(opt)
	a.version = v
	events, nread, err := a.readAll(read, cr)
	if err != nil {
		return nil, err
	}
	a.events = events
	a.bytes = nread
	if events <= 1 { // a trace starts with a Sync event
		if a.truncated != "" {
			return nil, fmt.Errorf("%w: %s, before its first complete batch of events", ErrTruncated, a.truncated)
		}
		return nil, fmt.Errorf("%w: it holds no event", ErrNotTrace)
	}
	if a.truncated != "" {
		a.truncated += fmt.Sprintf("; the %d events before it, up to %s into the trace, are summarised", events, fmtMs(ms(a.last.Sub(a.first))))
	}
	return a.summary(), nil
}

// readFunc reads the next event into dst: genEvents.read, or
// trace.Reader.ReadEvent.
type readFunc func(dst *trace.Event) error

// evBatch is a run of events the parser read, passed from the reading
// goroutine to the analysing one.
type evBatch struct {
	evs  []trace.Event
	read int64 // bytes read when the last of them was
	// end, in the last batch: where and why the reading stopped ("" at
	// the end of the trace).
	last bool
	end  string
}

// batchEvents is the events per batch: 1.6 MB; fewer hand-overs (each
// wakes the other goroutine) cost less than more.
const batchEvents = 16384

// readAll feeds the trace's events to the analyser and counts them.
//
// The parser runs on a goroutine of its own and hands over the events in
// batches, so that parsing and analysis overlap on two CPUs (the parser
// takes about 60% of the CPU time, the analysis 40%). The events are analysed in the order read; an
// Event stays valid after the next is read (it refers to its
// generation's tables, which nothing changes).
//
// A read error, or a panic in the parser (on input it does not expect),
// ends the reading and is noted as where the trace stops, so a damaged
// trace never crashes the command. The error returned is Options.Stop's.
func (a *analyzer) readAll(read readFunc, cr *countingReader) (events int64, nread int64, err error) {
	full := make(chan *evBatch, 2)
	free := make(chan *evBatch, 4)
	for range cap(free) {
		free <- &evBatch{evs: make([]trace.Event, 0, batchEvents)}
	}
	done := make(chan struct{})
	defer close(done)
	go readEvents(read, cr, full, free, done)
	for b := range full {
		for i := range b.evs {
			a.event(&b.evs[i])
			events++
			if events%(1<<16) == 0 {
				if a.opt.Progress != nil {
					a.opt.Progress(b.read)
				}
				if a.opt.Stop != nil {
					if err := a.opt.Stop(); err != nil {
						return events, b.read, fmt.Errorf("stopped after %s: %w", sizeString(b.read), err)
					}
				}
			}
		}
		nread = b.read
		if b.last {
			a.truncated = b.end
			return events, nread, nil
		}
		clear(b.evs) // drop the references to the generation's tables
		b.evs = b.evs[:0]
		free <- b
	}
	return events, nread, nil
}

// readEvents reads the trace into batches until its end, an error or
// done, and sends them on full; the last batch says how the reading
// ended.
func readEvents(read readFunc, cr *countingReader, full chan<- *evBatch, free <-chan *evBatch, done <-chan struct{}) {
	defer close(full)
	var b *evBatch
	select {
	case b = <-free:
	case <-done:
		return
	}
	send := func() bool {
		b.read = cr.n
		select {
		case full <- b:
		case <-done:
			return false
		}
		if b.last {
			return false
		}
		select {
		case b = <-free:
			return true
		case <-done:
			return false
		}
	}
	defer func() {
		if r := recover(); r != nil {
			b.last, b.end = true, fmt.Sprintf("the trace is cut short or damaged after %s (%v)", sizeString(cr.n), fmt.Errorf("the trace parser failed: %v", r))
			send()
		}
	}()
	for {
		n := len(b.evs)
		b.evs = b.evs[:n+1]
		err := read(&b.evs[n]) // into its place in the batch
		if err != nil {
			b.evs = b.evs[:n]
		}
		if err == io.EOF {
			b.last = true
			send()
			return
		}
		if err != nil {
			b.last, b.end = true, fmt.Sprintf("the trace is cut short or damaged after %s (%v)", sizeString(cr.n), err)
			send()
			return
		}
		if len(b.evs) == batchEvents && !send() {
			return
		}
	}
}

func sizeString(n int64) string {
	switch {
	case n <= 0:
		return "an unknown size"
	case n < 1<<20:
		return strconv.FormatInt(n, 10) + " bytes"
	default:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	}
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

// gstate is what the analyser knows of one live goroutine.
type gstate struct {
	group  int32 // index in analyzer.groups; -1 until known
	state  trace.GoState
	since  trace.Time // when it entered state
	stack  stackID    // its stack when it last stopped running
	reason int32      // why it is waiting (index in analyzer.rs)
	// lastStk is the parser's handle of the stack it last stopped in,
	// and lastID its interned ID (goroutines stop at the same few
	// places over and over); cleared at each generation.
	lastStk trace.Stack
	lastID  stackID
	// lastBlock is the reason and stack it last blocked with, and
	// lastBlockAt 1 + their index in analyzer.blocks (0: none).
	lastBlock   uint64
	lastBlockAt int32
	pendRun     time.Duration
	assistAt    trace.Time // start of an open mark assist, or 0
	regions     []openRegion
}

type openRegion struct {
	typ   string
	start trace.Time
}

type openTask struct {
	typ   string
	start trace.Time
}

// group is goroutines with the same start function.
type group struct {
	name      string
	created   string // a creation site, file:line
	count     int64  // goroutines seen
	running   time.Duration
	assist    time.Duration
	sched     hist
	blocked   map[string]time.Duration // category -> time (built by materialize)
	blockBy   catTimes
	syscallNS time.Duration
}

// stackStat is a count and a time for one stack.
type stackStat struct {
	count int64
	total time.Duration
}

type blockKey struct {
	category, reason string
	stack            stackID
}

// event is one occurrence worth listing among the worst cases.
type event struct {
	at    trace.Time
	dur   time.Duration
	g     trace.GoID
	group int32
	stack stackID
}

type pause struct {
	start trace.Time
	dur   time.Duration
	name  string
	stack stackID
}

type analyzer struct {
	opt       Options
	version   int
	events    int64
	syncs     int
	bytes     int64
	truncated string
	first     trace.Time
	last      trace.Time
	lastTs    trace.Time // the time of the event before
	procs     int64
	maxProc   trace.ProcID

	st                      *stackTable
	gs                      goTable
	rs                      *reasonTable
	groups                  []*group
	groupOf                 map[string]int32
	live, running, runnable int64

	sched      hist
	schedStack map[stackID]*stackStat // built by materialize from schedBy
	schedBy    stackStats
	schedWorst []event

	block      map[blockKey]*stackStat  // built by materialize from blocks
	blockTotal map[string]time.Duration // built by materialize from blockBy
	blocks     blockTable
	blockBy    catTimes

	sys      hist
	sysStack map[stackID]*stackStat // built by materialize from sysBy
	sysBy    stackStats
	sysWorst []event
	sysLostP int64

	stwOpen  map[string]pause // by range name and scope
	pauses   []pause
	gcOpen   trace.Time
	gcCycles []trace.Time
	gcMark   time.Duration

	created, exited int64
	regions         map[string]*hist
	tasks           map[trace.TaskID]openTask
	taskDur         map[string]*hist

	tl timeline
}

func newAnalyzer(opt Options) *analyzer {
	return &analyzer{opt: opt, st: newStackTable(), gs: goTable{m: map[trace.GoID]*gstate{}}, rs: newReasonTable(),
		groupOf: map[string]int32{}, blocks: blockTable{byKey: map[uint64]int32{}},
		stwOpen: map[string]pause{}, regions: map[string]*hist{},
		tasks: map[trace.TaskID]openTask{}, taskDur: map[string]*hist{}, maxProc: -1}
}

func (a *analyzer) event(ev *trace.Event) {
	// The Reader's fix-up: times increase strictly. A no-op on one
	// Reader's events; across the Readers of genEvents, what one Reader
	// would have done.
	t := ev.Time()
	if t <= a.lastTs {
		t = a.lastTs + 1
	}
	a.lastTs = t
	if a.first == 0 {
		a.first = t
		a.tl.init(t)
	}
	a.last = max(a.last, t)
	if p := ev.Proc(); p > a.maxProc {
		a.maxProc = p
	}
	switch ev.Kind() {
	case trace.EventSync:
		a.st.newGeneration()
		a.rs.forget()
		for _, g := range a.gs.m {
			g.lastStk = trace.NoStack
		}
		a.syncs++
	case trace.EventMetric:
		if m := ev.Metric(); m.Name == "/sched/gomaxprocs:threads" {
			a.procs = int64(m.Value.Uint64())
		}
	case trace.EventStateTransition:
		st := ev.StateTransition()
		if st.Resource.Kind == trace.ResourceGoroutine {
			a.goTransition(ev, &st, t)
		} else if st.Resource.Kind == trace.ResourceProc {
			// A P that starts running is bound to a thread: the events
			// after it there name it. Counted here too, because at the
			// start of a generation a Reader that did not read the
			// previous one (genEvents) does not know the binding yet.
			if _, to := st.Proc(); to == trace.ProcRunning {
				a.maxProc = max(a.maxProc, st.Resource.Proc())
			}
		}
	case trace.EventRangeBegin, trace.EventRangeActive:
		a.rangeBegin(ev, t)
	case trace.EventRangeEnd:
		a.rangeEnd(ev, t)
	case trace.EventRegionBegin:
		if g := a.gs.get(ev.Goroutine()); g != nil && len(g.regions) < 1024 {
			g.regions = append(g.regions, openRegion{typ: ev.Region().Type, start: t})
		}
	case trace.EventRegionEnd:
		a.regionEnd(ev, t)
	case trace.EventTaskBegin:
		tk := ev.Task()
		a.tasks[tk.ID] = openTask{typ: tk.Type, start: t}
	case trace.EventTaskEnd:
		tk := ev.Task()
		if o, ok := a.tasks[tk.ID]; ok {
			delete(a.tasks, tk.ID)
			histIn(a.taskDur, o.typ).add(t.Sub(o.start))
		}
	}
}

func histIn(m map[string]*hist, k string) *hist {
	h := m[k]
	if h == nil {
		h = &hist{}
		m[k] = h
	}
	return h
}

func (a *analyzer) regionEnd(ev *trace.Event, t trace.Time) {
	g := a.gs.get(ev.Goroutine())
	if g == nil {
		return
	}
	typ := ev.Region().Type
	for i := len(g.regions) - 1; i >= 0; i-- {
		if g.regions[i].typ == typ {
			histIn(a.regions, typ).add(t.Sub(g.regions[i].start))
			g.regions = g.regions[:i]
			return
		}
	}
}

// groupIndex returns the group of goroutines starting in fn.
func (a *analyzer) groupIndex(fn string) int32 {
	if fn == "" {
		fn = "(unknown start)"
	}
	i, ok := a.groupOf[fn]
	if !ok {
		i = int32(len(a.groups))
		a.groups = append(a.groups, &group{name: fn})
		a.groupOf[fn] = i
	}
	return i
}

// learnGroup sets a goroutine's group from a stack of it, the first time
// one is seen, and credits the running time it had until then.
func (a *analyzer) learnGroup(g *gstate, s stackID) {
	if g.group >= 0 || s == 0 {
		return
	}
	g.group = a.groupIndex(a.st.root(s))
	gr := a.groups[g.group]
	gr.count++
	gr.running += g.pendRun
	g.pendRun = 0
}
