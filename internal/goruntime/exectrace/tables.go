package exectrace

import (
	"time"
	"unsafe"

	"golang.org/x/exp/trace"
)

// The per-event bookkeeping works on small integers: wait reasons and
// their categories are interned once, per-category times live in slices
// indexed by category, per-stack statistics in slices indexed by stackID.
// The maps the summary reads (by string and by stackID) are built from
// them once, at the end (analyzer.materialize).

// reasonTable interns the runtime's wait reasons and their categories.
// Reason 0 is "" (a goroutine waiting when the trace started).
type reasonTable struct {
	names    []string // reason i
	cat      []int32  // category of reason i
	byName   map[string]int32
	cats     []string // category i
	catOf    map[string]int32
	syscallC int32 // the "syscall" category
	// recent caches lookups by the address of the parser's string: the
	// parser hands out the same string from its table each time, within
	// a generation (forget is called at each generation).
	recent [8]struct {
		p  *byte
		n  int
		id int32
	}
	next int
}

// forget empties the cache of the parser's strings, whose table goes with
// its generation.
func (t *reasonTable) forget() { clear(t.recent[:]) }

func newReasonTable() *reasonTable {
	t := &reasonTable{byName: map[string]int32{"": 0}, catOf: map[string]int32{}, names: []string{""}}
	t.cat = []int32{t.category(blockCategory(""))}
	t.syscallC = t.category("syscall")
	return t
}

func (t *reasonTable) category(name string) int32 {
	c, ok := t.catOf[name]
	if !ok {
		c = int32(len(t.cats))
		t.cats = append(t.cats, name)
		t.catOf[name] = c
	}
	return c
}

// id interns a wait reason.
func (t *reasonTable) id(reason string) int32 {
	p, n := unsafe.StringData(reason), len(reason)
	if n == 0 {
		return 0
	}
	for i := range t.recent {
		if c := &t.recent[i]; c.p == p && c.n == n && p != nil {
			return c.id
		}
	}
	r, ok := t.byName[reason]
	if !ok {
		r = int32(len(t.names))
		reason = cloneString(reason) // the parser's string table goes with its generation
		t.names = append(t.names, reason)
		t.cat = append(t.cat, t.category(blockCategory(reason)))
		t.byName[reason] = r
	}
	t.recent[t.next] = struct {
		p  *byte
		n  int
		id int32
	}{p, n, r}
	t.next = (t.next + 1) % len(t.recent)
	return r
}

func cloneString(s string) string { return string([]byte(s)) }

// catTimes is a time per category; seen says which categories were
// added to at all (the summary lists a category added zero time).
type catTimes struct {
	d    []time.Duration
	seen []bool
}

func (c *catTimes) add(cat int32, d time.Duration) {
	if int(cat) >= len(c.d) {
		n := int(cat) + 1
		c.d = append(c.d, make([]time.Duration, n-len(c.d))...)
		c.seen = append(c.seen, make([]bool, n-len(c.seen))...)
	}
	c.d[cat] += d
	c.seen[cat] = true
}

func (c *catTimes) toMap(cats []string) map[string]time.Duration {
	m := map[string]time.Duration{}
	for i, ok := range c.seen {
		if ok {
			m[cats[i]] = c.d[i]
		}
	}
	return m
}

// stackStats is a stackStat per stackID; a stack with count 0 was never
// added to.
type stackStats []stackStat

func (s *stackStats) at(id stackID) *stackStat {
	if int(id) >= len(*s) {
		*s = append(*s, make([]stackStat, int(id)+1-len(*s))...)
	}
	return &(*s)[id]
}

func (s stackStats) toMap() map[stackID]*stackStat {
	m := map[stackID]*stackStat{}
	for i := range s {
		if s[i].count > 0 {
			m[stackID(i)] = &s[i]
		}
	}
	return m
}

// blockStat is the blocking time for one reason and stack.
type blockStat struct {
	reason int32
	stack  stackID
	stackStat
}

// blockTable is the blocking times by reason and stack.
type blockTable struct {
	byKey map[uint64]int32 // reason<<32 | stack -> index in stats
	stats []blockStat
}

func (b *blockTable) at(reason int32, stack stackID, g *gstate) *blockStat {
	k := uint64(uint32(reason))<<32 | uint64(uint32(stack))
	if g.lastBlock == k && g.lastBlockAt > 0 {
		return &b.stats[g.lastBlockAt-1]
	}
	i, ok := b.byKey[k]
	if !ok {
		i = int32(len(b.stats))
		b.stats = append(b.stats, blockStat{reason: reason, stack: stack})
		b.byKey[k] = i
	}
	g.lastBlock, g.lastBlockAt = k, i+1
	return &b.stats[i]
}

// goTable is the live goroutines: a map, with a direct-mapped cache in
// front of it (a trace names the same few goroutines over and over).
type goTable struct {
	m     map[trace.GoID]*gstate
	cache [1024]struct {
		id trace.GoID
		g  *gstate
	}
}

func (t *goTable) get(id trace.GoID) *gstate {
	c := &t.cache[uint64(id)%uint64(len(t.cache))]
	if c.g != nil && c.id == id {
		return c.g
	}
	g := t.m[id]
	if g != nil {
		c.id, c.g = id, g
	}
	return g
}

func (t *goTable) put(id trace.GoID, g *gstate) {
	t.m[id] = g
	c := &t.cache[uint64(id)%uint64(len(t.cache))]
	c.id, c.g = id, g
}

func (t *goTable) del(id trace.GoID) {
	delete(t.m, id)
	c := &t.cache[uint64(id)%uint64(len(t.cache))]
	if c.id == id {
		c.g = nil
	}
}

// materialize builds the maps the summary reads from the slices the
// analysis fills.
func (a *analyzer) materialize() {
	a.schedStack = a.schedBy.toMap()
	a.sysStack = a.sysBy.toMap()
	a.blockTotal = a.blockBy.toMap(a.rs.cats)
	a.block = map[blockKey]*stackStat{}
	for i := range a.blocks.stats {
		b := &a.blocks.stats[i]
		a.block[blockKey{category: a.rs.cats[a.rs.cat[b.reason]], reason: a.rs.names[b.reason], stack: b.stack}] = &b.stackStat
	}
	for _, gr := range a.groups {
		gr.blocked = gr.blockBy.toMap(a.rs.cats)
	}
}
