package collect

import (
	"bytes"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/cilium/ebpf"

	"github.com/wallprof/wallprof/internal/collect/bpf"
	"github.com/wallprof/wallprof/internal/symbolize"
)

// This file fills the in-kernel unwinder's tables (doc/unwind.md): the rows
// of each file's .eh_frame, loaded once per file and shared by the
// processes that map it, in one array with a bounded number of rows; and
// each process's executable mappings. A file whose table does not fit, even
// after the tables no process uses any more are evicted, gets none: its
// frames are followed by frame pointer, and Unwind's counts say so.

// DefaultUnwindRows bounds the rows of all loaded tables (8 bytes each).
const DefaultUnwindRows = 1 << 21

// UNW_MAX_MAPS and UNW_MAX_PROCS: the mappings one process's slot holds,
// and the processes with tables at once.
const (
	maxUnwindMaps  = 256
	maxUnwindProcs = 512
)

// UnwindSource gives a process's mappings and their unwind tables
// (symbolize.Process).
type UnwindSource interface {
	UnwindMappings() []symbolize.UnwindMapping
	Refresh() error
}

// UnwindStats says what the tables held.
type UnwindStats struct {
	Files, Rows   int // loaded now
	IndexSlots    int // of the rows array, the bucket indexes' (two entries each)
	Capacity      int
	Refused       int // files whose table did not fit
	Evicted       int // tables dropped to make room
	Processes     int // with tables now
	TooManyMaps   int // processes with more mappings than an entry holds (the rest: frame pointers)
	LoadErrors    int
	FirstLoadErr  error
	LoadTime      time.Duration // spent building and loading tables
	MaxFileRows   int
	LargestFile   string
	ProcsWithout  int // loads of processes whose files have no CFI at all (frame pointers only)
	NoSlot        int // loads refused: UNW_MAX_PROCS processes had tables
	processSeen   map[uint32]bool
	refusedByName map[string]bool
}

type unwFile struct {
	id           uint32
	start, count uint32 // its extent of unw_rows: the rows, then the bucket index
	rows         uint32
	refs         int
	lastUse      time.Time
}

type extent struct{ start, count uint32 }

type unwindTables struct {
	mu       sync.Mutex
	rows     *ebpf.Map
	files    *ebpf.Map
	procs    *ebpf.Map
	maps     *ebpf.Map
	slots    map[uint32]uint32 // each process's slot in maps
	freeSlot []uint32
	capacity uint32
	free     []extent // sorted by start, coalesced
	byKey    map[string]*unwFile
	procKeys map[uint32][]string // the files each process holds a reference to
	sources  map[uint32]UnwindSource
	mapsSeen map[uint32][]byte // /proc/PID/maps when last loaded
	nextID   uint32
	loads    uint32 // the process entries loaded (unw_proc.gen)
	stats    UnwindStats

	// qmu guards what the reader hands over (it never waits for mu, which
	// is held while tables are built and loaded): processes to track, and
	// the processes whose mappings to re-read.
	qmu     sync.Mutex
	queued  map[uint32]UnwindSource
	nudged  map[uint32]time.Time // when each process last asked for a refresh
	pending map[uint32]bool
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

func newUnwindTables(rows, files, procs, maps *ebpf.Map, capacity uint32) *unwindTables {
	free := make([]uint32, maxUnwindProcs)
	for i := range free {
		free[i] = uint32(maxUnwindProcs - 1 - i)
	}
	return &unwindTables{rows: rows, files: files, procs: procs, maps: maps, capacity: capacity,
		slots: map[uint32]uint32{}, freeSlot: free,
		free:     []extent{{0, capacity}},
		byKey:    map[string]*unwFile{},
		procKeys: map[uint32][]string{},
		sources:  map[uint32]UnwindSource{},
		mapsSeen: map[uint32][]byte{},
		queued:   map[uint32]UnwindSource{},
		nudged:   map[uint32]time.Time{},
		pending:  map[uint32]bool{},
		wake:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		stats:    UnwindStats{Capacity: int(capacity), processSeen: map[uint32]bool{}, refusedByName: map[string]bool{}},
	}
}

// track loads pid's tables now (again if its mappings changed since they
// were loaded: an exec) and keeps them current while the recording runs
// (exec, dlopen) until the process is gone.
func (u *unwindTables) track(pid uint32, src UnwindSource) {
	if src == nil {
		return
	}
	u.mu.Lock()
	_, known := u.sources[pid]
	u.sources[pid] = src
	u.mu.Unlock()
	u.refresh(pid, src, !known)
}

// nudgeEvery bounds how often one process's samples make the tables
// re-read its mappings.
const nudgeEvery = 50 * time.Millisecond

// nudge asks for pid's mappings to be re-read soon: a sample of it was
// walked without tables, or its pc lay outside the mappings they know (an
// exec or a dlopen since, or JIT code). It never blocks.
func (u *unwindTables) nudge(pid uint32) {
	u.qmu.Lock()
	defer u.qmu.Unlock()
	if u.pending[pid] {
		return
	}
	now := time.Now()
	if now.Sub(u.nudged[pid]) < nudgeEvery {
		return
	}
	u.nudged[pid] = now
	u.pending[pid] = true
	select {
	case u.wake <- struct{}{}:
	default:
	}
}

// trackLater is track done by the tables' own goroutine, one process at a
// time: for the processes met while recording, whose tables the reader
// must not wait for. It never blocks.
func (u *unwindTables) trackLater(pid uint32, src UnwindSource) {
	if src == nil {
		return
	}
	u.qmu.Lock()
	u.queued[pid] = src
	u.qmu.Unlock()
	select {
	case u.wake <- struct{}{}:
	default:
	}
}

// run re-reads the mappings of the tracked processes until stopped: every
// 200 ms, or less often with many processes (reading a maps file costs tens
// of microseconds).
func (u *unwindTables) run() {
	defer close(u.done)
	for {
		u.mu.Lock()
		n := len(u.sources)
		u.mu.Unlock()
		every := min(200*time.Millisecond*time.Duration(max(1, n/8)), 5*time.Second)
		all := false
		select {
		case <-u.stop:
			return
		case <-time.After(every):
			all = true
		case <-u.wake:
		}
		u.qmu.Lock()
		queued, pending := u.queued, u.pending
		u.queued, u.pending = map[uint32]UnwindSource{}, map[uint32]bool{}
		u.qmu.Unlock()
		for pid, src := range queued {
			u.track(pid, src)
		}
		u.mu.Lock()
		srcs := make(map[uint32]UnwindSource, len(u.sources))
		for pid, s := range u.sources {
			if _, new := queued[pid]; !new && (all || pending[pid]) {
				srcs[pid] = s
			}
		}
		u.mu.Unlock()
		for pid, s := range srcs {
			select {
			case <-u.stop:
				return
			default:
			}
			u.refresh(pid, s, false)
		}
	}
}

func (u *unwindTables) close() {
	select {
	case <-u.stop:
	default:
		close(u.stop)
	}
}

// refresh loads pid's mappings when they changed since the last load (or
// first is set). A process that is gone loses its entry.
func (u *unwindTables) refresh(pid uint32, src UnwindSource, first bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil || len(data) == 0 {
		// Gone, or exiting (a zombie has no mappings).
		u.forget(pid)
		return
	}
	u.mu.Lock()
	same := bytes.Equal(u.mapsSeen[pid], data)
	u.mu.Unlock()
	if same && !first {
		return
	}
	// The resolver's mappings may be older than data (it was made before
	// an exec): read them again, so that the tables match data.
	if src.Refresh() != nil {
		u.forget(pid)
		return
	}
	t0 := time.Now()
	maps := src.UnwindMappings() // builds tables: outside the lock
	u.mu.Lock()
	defer u.mu.Unlock()
	u.mapsSeen[pid] = data
	if _, ok := u.sources[pid]; !ok {
		return // forgotten meanwhile
	}
	u.load(pid, maps)
	u.stats.LoadTime += time.Since(t0)
}

// forget drops pid's entry and its references.
func (u *unwindTables) forget(pid uint32) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.sources, pid)
	delete(u.mapsSeen, pid)
	u.dropEntry(pid)
}

// dropEntry deletes pid's entry, frees its slot and drops its references.
func (u *unwindTables) dropEntry(pid uint32) {
	_ = u.procs.Delete(pid)
	if slot, ok := u.slots[pid]; ok {
		delete(u.slots, pid)
		u.freeSlot = append(u.freeSlot, slot)
	}
	u.release(pid)
}

func (u *unwindTables) release(pid uint32) {
	now := time.Now()
	for _, k := range u.procKeys[pid] {
		if f := u.byKey[k]; f != nil {
			f.refs--
			f.lastUse = now
		}
	}
	delete(u.procKeys, pid)
}

// load writes pid's entry, loading the tables of files not loaded yet.
// Called with u.mu held.
func (u *unwindTables) load(pid uint32, maps []symbolize.UnwindMapping) {
	var keys []string
	hasTable := false
	for _, m := range maps {
		if m.HasTable || (m.Table != nil && len(m.Table.Rows) > 0) {
			hasTable = true
		}
	}
	u.stats.processSeen[pid] = true
	if !hasTable {
		// Frame pointers throughout (a Go binary linked internally):
		// no entry, and the program takes bpf_get_stack's walk.
		u.stats.ProcsWithout++
		u.dropEntry(pid)
		return
	}
	slot, ok := u.slots[pid]
	if !ok {
		if len(u.freeSlot) == 0 {
			u.stats.NoSlot++
			return
		}
		slot = u.freeSlot[len(u.freeSlot)-1]
		u.freeSlot = u.freeSlot[:len(u.freeSlot)-1]
		u.slots[pid] = slot
	}
	sort.Slice(maps, func(i, j int) bool { return maps[i].Start < maps[j].Start })
	if len(maps) > maxUnwindMaps {
		u.stats.TooManyMaps++
		maps = maps[:maxUnwindMaps]
	}
	// Take the new references before dropping the old ones, so that a
	// file the process still maps is not evicted in between.
	mkeys := make([]uint32, len(maps))
	entries := make([]bpf.WallprofUnwMap, len(maps))
	for i, m := range maps {
		mkeys[i] = slot*maxUnwindMaps + uint32(i)
		e := &entries[i]
		e.Start, e.End, e.Bias = m.Start, m.Limit, m.Bias
		if !m.HasTable && (m.Table == nil || len(m.Table.Rows) == 0) {
			continue
		}
		f := u.file(m.Key, m)
		m.Loaded() // the kernel has the rows
		if f == nil {
			continue
		}
		f.refs++
		keys = append(keys, m.Key)
		e.File = f.id
	}
	u.release(pid)
	u.procKeys[pid] = keys
	// The entry goes while its slot is rewritten: a sample in between is
	// walked by frame pointer rather than with a half-written slot.
	_ = u.procs.Delete(pid)
	if _, err := u.maps.BatchUpdate(mkeys, entries, nil); err != nil {
		u.loadError(fmt.Errorf("mappings of process %d: %w", pid, err))
		u.dropEntry(pid)
		return
	}
	u.loads++
	entry := bpf.WallprofUnwProc{N: uint32(len(maps)), Slot: slot, Gen: u.loads}
	for _, m := range maps {
		if m.Go {
			entry.Go = 1
		}
		if m.CgoCallback[0] != 0 {
			entry.CgocbLo, entry.CgocbHi = m.CgoCallback[0], m.CgoCallback[1]
			entry.GoexitLo, entry.GoexitHi = m.GoExit[0], m.GoExit[1]
		}
	}
	if err := u.procs.Update(pid, &entry, ebpf.UpdateAny); err != nil {
		u.loadError(fmt.Errorf("process %d: %w", pid, err))
		u.dropEntry(pid)
	}
}

func (u *unwindTables) loadError(err error) {
	u.stats.LoadErrors++
	if u.stats.FirstLoadErr == nil {
		u.stats.FirstLoadErr = err
	}
}

// file returns the loaded table of key, loading t if needed; nil when it
// does not fit.
func (u *unwindTables) file(key string, m symbolize.UnwindMapping) *unwFile {
	if f := u.byKey[key]; f != nil {
		f.lastUse = time.Now()
		return f
	}
	t := m.LoadTable()
	if t == nil || len(t.Rows) == 0 {
		return nil
	}
	rows := uint32(len(t.Rows))
	shift, index := bucketIndex(t.Rows)
	n := rows + uint32(len(index)+1)/2
	if uint64(len(t.Rows))+uint64(len(index)+1)/2 > uint64(u.capacity) {
		u.refuse(key)
		return nil
	}
	start, ok := u.alloc(n)
	for !ok && u.evictOne() {
		start, ok = u.alloc(n)
	}
	if !ok {
		u.refuse(key)
		return nil
	}
	keys := make([]uint32, n)
	vals := make([]bpf.WallprofUnwRow, n)
	for i, r := range t.Rows {
		keys[i] = start + uint32(i)
		vals[i] = bpf.WallprofUnwRow{Pc: r.PC, CfaOff: r.CFAOff, Kind: uint8(r.Kind), BpOff: r.BPOff}
	}
	// The index, two entries per slot: the first in Pc, the second in
	// the rest of the slot's 8 bytes, as the program reads them.
	for j, first := range index {
		i := rows + uint32(j/2)
		keys[i] = start + i
		if j%2 == 0 {
			vals[i].Pc = first
		} else {
			vals[i].CfaOff, vals[i].Kind, vals[i].BpOff = uint16(first), uint8(first>>16), int8(first>>24)
		}
	}
	if _, err := u.rows.BatchUpdate(keys, vals, nil); err != nil {
		u.freeExtent(extent{start, n})
		u.loadError(fmt.Errorf("unwind rows of %s: %w", key, err))
		return nil
	}
	u.nextID++
	f := &unwFile{id: u.nextID, start: start, count: n, rows: rows, lastUse: time.Now()}
	entry := bpf.WallprofUnwFile{Base: t.Base, Start: start, Count: rows, Buckets: uint32(len(index)), Shift: shift}
	if err := u.files.Update(f.id, &entry, ebpf.UpdateAny); err != nil {
		u.freeExtent(extent{start, n})
		u.loadError(fmt.Errorf("unwind table of %s: %w", key, err))
		return nil
	}
	u.byKey[key] = f
	u.stats.Files++
	u.stats.Rows += int(rows)
	u.stats.IndexSlots += int(n - rows)
	if int(rows) > u.stats.MaxFileRows {
		u.stats.MaxFileRows, u.stats.LargestFile = int(rows), key
	}
	return f
}

// bucketIndex returns the bucket index of a table whose rows are sorted by
// pc: entry j is the first row whose pc is at or after j<<shift, for the
// buckets up to the last row's, so that the program searches a bucket's few
// rows rather than the whole table. The buckets are the smallest, of at
// least 16 bytes of code, that keep the index to half as many entries as
// rows (a quarter of the table's size); a table of a few rows has none.
func bucketIndex(rows []symbolize.UnwindRow) (shift uint32, index []uint32) {
	if len(rows) < 16 {
		return 0, nil
	}
	last := uint64(rows[len(rows)-1].PC)
	shift = 4
	for (last>>shift)+2 > uint64(len(rows)/2) {
		shift++
	}
	index = make([]uint32, (last>>shift)+2)
	i := 0
	for j := range index {
		for i < len(rows) && uint64(rows[i].PC) < uint64(j)<<shift {
			i++
		}
		index[j] = uint32(i)
	}
	return shift, index
}

func (u *unwindTables) refuse(key string) {
	if !u.stats.refusedByName[key] {
		u.stats.refusedByName[key] = true
		u.stats.Refused++
	}
}

// evictOne drops the least recently used table that no process uses.
func (u *unwindTables) evictOne() bool {
	var victim string
	var oldest time.Time
	for k, f := range u.byKey {
		if f.refs <= 0 && (victim == "" || f.lastUse.Before(oldest)) {
			victim, oldest = k, f.lastUse
		}
	}
	if victim == "" {
		return false
	}
	f := u.byKey[victim]
	// The file's entry first: no process refers to it, and without it the
	// program cannot reach the rows that are about to be reused.
	_ = u.files.Delete(f.id)
	delete(u.byKey, victim)
	u.freeExtent(extent{f.start, f.count})
	u.stats.Files--
	u.stats.Rows -= int(f.rows)
	u.stats.IndexSlots -= int(f.count - f.rows)
	u.stats.Evicted++
	return true
}

// alloc takes n rows from the free list (first fit).
func (u *unwindTables) alloc(n uint32) (uint32, bool) {
	for i, e := range u.free {
		if e.count >= n {
			start := e.start
			u.free[i] = extent{e.start + n, e.count - n}
			if u.free[i].count == 0 {
				u.free = append(u.free[:i], u.free[i+1:]...)
			}
			return start, true
		}
	}
	return 0, false
}

// freeExtent returns rows to the free list, merging neighbours.
func (u *unwindTables) freeExtent(x extent) {
	i := sort.Search(len(u.free), func(i int) bool { return u.free[i].start > x.start })
	u.free = append(u.free, extent{})
	copy(u.free[i+1:], u.free[i:])
	u.free[i] = x
	// Merge with the next, then the previous.
	if i+1 < len(u.free) && u.free[i].start+u.free[i].count == u.free[i+1].start {
		u.free[i].count += u.free[i+1].count
		u.free = append(u.free[:i+1], u.free[i+2:]...)
	}
	if i > 0 && u.free[i-1].start+u.free[i-1].count == u.free[i].start {
		u.free[i-1].count += u.free[i].count
		u.free = append(u.free[:i], u.free[i+1:]...)
	}
}

func (u *unwindTables) snapshot() UnwindStats {
	u.mu.Lock()
	defer u.mu.Unlock()
	st := u.stats
	st.Processes = len(u.procKeys)
	return st
}
