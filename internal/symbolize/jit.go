package symbolize

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wallprof/wallprof/internal/profile"
)

// JIT compilers and interpreters name the code they generate in two ways,
// both defined by Linux perf:
//   - a perf map, /tmp/perf-PID.map, text lines "START SIZE name" in hex,
//     appended as code is generated (node --perf-basic-prof, python -X perf,
//     the JVM's -XX:+DumpPerfMapAtExit or perf-map-agent);
//   - a jitdump file, jit-PID.dump, a binary log of code loads and moves
//     with timestamps and source lines (tools/perf/Documentation/
//     jitdump-specification.txt in the kernel tree), which the runtime maps
//     executable so that profilers find it in /proc/PID/maps (python
//     -X perf_jit, the JVM's and V8's jitdump agents).
// Both are read through the process's mount namespace, with the PID the
// process has there (a container's PID 1 writes /tmp/perf-1.map inside the
// container).

// jitRereadEvery bounds how often an address that no perf map or jitdump
// names makes them be read again (they grow while the program runs).
const jitRereadEvery = 100 * time.Millisecond

// jitScanBack bounds how many earlier entries a lookup examines for one
// that covers the address (code reused in place leaves overlapping ranges).
const jitScanBack = 256

// jitEntry is one named range of generated code.
type jitEntry struct {
	start, end uint64
	// order decides between entries covering the same address: a perf
	// map's line number, a jitdump record's timestamp. The higher is newer.
	order uint64
	name  string
	lines []jitLine // jitdump debug info, sorted by address
}

type jitLine struct {
	addr uint64
	file string
	line int
}

// jitIndex is a set of entries sorted by start.
type jitIndex struct {
	entries []jitEntry
	maxLen  uint64
}

func (x *jitIndex) add(es []jitEntry) {
	if len(es) == 0 {
		return
	}
	for _, e := range es {
		x.maxLen = max(x.maxLen, e.end-e.start)
	}
	x.entries = append(x.entries, es...)
	sort.SliceStable(x.entries, func(i, j int) bool { return x.entries[i].start < x.entries[j].start })
}

// lookup returns the newest entry covering addr whose order is at most at,
// or the newest of all when at is 0.
func (x *jitIndex) lookup(addr, at uint64) *jitEntry {
	i := sort.Search(len(x.entries), func(i int) bool { return x.entries[i].start > addr }) - 1
	var best *jitEntry
	for j := i; j >= 0 && j > i-jitScanBack && x.entries[j].start+x.maxLen > addr; j-- {
		e := &x.entries[j]
		if addr >= e.end || (at != 0 && e.order > at) {
			continue
		}
		if best == nil || e.order > best.order {
			best = e
		}
	}
	return best
}

// frame is the entry's frame at addr.
func (e *jitEntry) frame(addr uint64) profile.Frame {
	f := profile.Frame{Function: e.name}
	i := sort.Search(len(e.lines), func(i int) bool { return e.lines[i].addr > addr }) - 1
	if i >= 0 {
		f.File, f.Line = e.lines[i].file, e.lines[i].line
	}
	return f
}

// jitSource is one perf map or jitdump file, read incrementally.
type jitSource struct {
	path string // in the process's mount namespace
	dump bool
	open func() (*os.File, error)
	f    *os.File // kept open once found: still readable after the process exits

	off   int64 // bytes parsed so far (complete lines or records)
	size  int64 // size and modification time at the last read
	mtime time.Time
	line  uint64 // perf map: lines read
	dec   *jitdumpDecoder
	idx   jitIndex
}

// refresh reads what was appended since the last read. A file that shrank
// or was replaced is read again from the start.
func (s *jitSource) refresh() error {
	if s.f == nil {
		f, err := s.open()
		if err != nil {
			return err
		}
		s.f = f
	}
	fi, err := s.f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() == s.size && fi.ModTime().Equal(s.mtime) {
		return nil
	}
	if fi.Size() < s.off {
		s.off, s.line, s.dec, s.idx = 0, 0, nil, jitIndex{}
	}
	s.size, s.mtime = fi.Size(), fi.ModTime()
	data := make([]byte, fi.Size()-s.off)
	n, err := s.f.ReadAt(data, s.off)
	if err != nil && err != io.EOF {
		return err
	}
	data = data[:n]
	var es []jitEntry
	var used int
	if s.dump {
		if s.dec == nil {
			s.dec = &jitdumpDecoder{codeIndex: map[uint64]string{}, debug: map[uint64][]jitLine{}}
		}
		es, used, err = s.dec.decode(data)
	} else {
		es, used = parsePerfMap(data, &s.line)
	}
	s.off += int64(used)
	s.idx.add(es)
	return err
}

// parsePerfMap parses the complete lines of perf map text. line counts the
// lines read before (it orders entries: a later line names reused code). It
// returns the entries and how many bytes it consumed.
func parsePerfMap(data []byte, line *uint64) ([]jitEntry, int) {
	var out []jitEntry
	used := 0
	for {
		nl := bytes.IndexByte(data[used:], '\n')
		if nl < 0 {
			return out, used
		}
		text := string(data[used : used+nl])
		used += nl + 1
		*line++
		f := strings.SplitN(strings.TrimSpace(text), " ", 3)
		if len(f) < 3 {
			continue
		}
		start, err1 := strconv.ParseUint(strings.TrimPrefix(f[0], "0x"), 16, 64)
		size, err2 := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 64)
		name := strings.TrimSpace(f[2])
		if err1 != nil || err2 != nil || size == 0 || name == "" || start+size < start {
			continue
		}
		out = append(out, jitEntry{start: start, end: start + size, order: *line, name: name})
	}
}

// jitSymbols names a process's generated code from its perf map and jitdump
// files.
type jitSymbols struct {
	mu      sync.Mutex
	nspid   int
	perfMap *jitSource
	dumps   []*jitSource
	last    time.Time // when the sources were last read
}

// newJITSymbols returns the JIT symbols of a process whose PID in its own
// PID namespace is nspid and whose root directory is root.
func newJITSymbols(root fsRoot, nspid int) *jitSymbols {
	p := path.Join("tmp", fmt.Sprintf("perf-%d.map", nspid))
	return &jitSymbols{
		nspid:   nspid,
		perfMap: &jitSource{path: "/" + p, open: func() (*os.File, error) { return root.Open(p) }},
	}
}

// openPerfMap opens the perf map, if it exists and is not open yet, and has
// it read at the next lookup. Called while the process lives: its file may
// not be reachable once it has exited (a container's /tmp, a tmpfs mounted
// in its mount namespace, goes with the namespace), but a file kept open
// stays readable.
func (j *jitSymbols) openPerfMap() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.perfMap.f != nil {
		return
	}
	if f, err := j.perfMap.open(); err == nil {
		j.perfMap.f = f
		j.last = time.Time{}
	}
}

// isJitdump reports whether a mapped file is a jitdump file.
func isJitdump(file string) bool {
	b := path.Base(strings.TrimSuffix(file, " (deleted)"))
	return strings.HasPrefix(b, "jit-") && strings.HasSuffix(b, ".dump")
}

// addDump adds a jitdump file the process maps; open opens it.
func (j *jitSymbols) addDump(file string, open func() (*os.File, error)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, d := range j.dumps {
		if d.path == file {
			return
		}
	}
	s := &jitSource{path: file, dump: true, open: open}
	if f, err := open(); err == nil { // now, while the process (and its /proc entry) is alive
		s.f = f
	}
	j.dumps = append(j.dumps, s)
	j.last = time.Time{} // read it at the next lookup
}

// lookup names addr from the jitdump files, then the perf map. at is the
// sample's time (CLOCK_MONOTONIC nanoseconds, as jitdump timestamps are by
// default) or 0 when unknown: then the latest code loaded at addr names it.
// An address nothing names makes the sources be read again if they
// changed, at most every jitRereadEvery.
func (j *jitSymbols) lookup(addr, at uint64) (profile.Frame, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for pass := 0; pass < 2; pass++ {
		for _, s := range j.dumps {
			if e := s.idx.lookup(addr, at); e != nil {
				return e.frame(addr), true
			}
		}
		if e := j.perfMap.idx.lookup(addr, 0); e != nil {
			return e.frame(addr), true
		}
		if pass > 0 || time.Since(j.last) < jitRereadEvery {
			break
		}
		j.last = time.Now()
		for _, s := range append([]*jitSource{j.perfMap}, j.dumps...) {
			_ = s.refresh() // a missing or unreadable file names nothing
		}
	}
	return profile.Frame{}, false
}

// sources returns the paths of the perf map and jitdump files that were
// found.
func (j *jitSymbols) sources() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []string
	for _, s := range append([]*jitSource{j.perfMap}, j.dumps...) {
		if s.f != nil {
			out = append(out, s.path)
		}
	}
	return out
}

func (j *jitSymbols) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, s := range append([]*jitSource{j.perfMap}, j.dumps...) {
		if s.f != nil {
			s.f.Close()
			s.f = nil
		}
	}
	return nil
}

// fsRoot opens files by their path relative to a process's root directory
// (*os.Root on /proc/PID/root, or hostRoot).
type fsRoot interface {
	Open(name string) (*os.File, error)
}

// hostRoot opens paths in wallprof's own mount namespace.
type hostRoot struct{}

func (hostRoot) Open(name string) (*os.File, error) { return os.Open("/" + name) }

// readNSpid returns the PID of process pid in its innermost PID namespace
// (the last field of NSpid in /proc/PID/status), or pid when unknown.
func readNSpid(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return pid
	}
	return parseNSpid(data, pid)
}

func parseNSpid(status []byte, pid int) int {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "NSpid:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return pid
		}
		if n, err := strconv.Atoi(f[len(f)-1]); err == nil && n > 0 {
			return n
		}
		return pid
	}
	return pid
}

// Jitdump record types.
const (
	jitCodeLoad      = 0
	jitCodeMove      = 1
	jitCodeDebugInfo = 2
	jitCodeClose     = 3
)

const jitdumpMagic = 0x4A695444 // "JiTD"

// jitdumpDecoder parses a jitdump file record by record, keeping what
// later records refer to.
type jitdumpDecoder struct {
	header    bool
	order     binary.ByteOrder
	codeIndex map[uint64]string    // code_index → name, for moves
	debug     map[uint64][]jitLine // debug info by code address, before its load
	closed    bool
}

// decode parses the complete records in data (which follows what earlier
// calls consumed) and returns the code they name and how many bytes it
// consumed. A malformed file is an error; what was parsed before is kept.
func (d *jitdumpDecoder) decode(data []byte) ([]jitEntry, int, error) {
	used := 0
	if !d.header {
		if len(data) < 40 {
			return nil, 0, nil
		}
		switch {
		case binary.LittleEndian.Uint32(data) == jitdumpMagic:
			d.order = binary.LittleEndian
		case binary.BigEndian.Uint32(data) == jitdumpMagic:
			d.order = binary.BigEndian
		default:
			return nil, 0, fmt.Errorf("not a jitdump file (magic %#x)", binary.LittleEndian.Uint32(data))
		}
		size := int(d.order.Uint32(data[8:]))
		if size < 40 || size > 1<<20 {
			return nil, 0, fmt.Errorf("jitdump header size %d", size)
		}
		if len(data) < size {
			return nil, 0, nil
		}
		d.header, used = true, size
	}
	var out []jitEntry
	for !d.closed && len(data)-used >= 16 {
		rec := data[used:]
		typ, size, ts := d.order.Uint32(rec), int(d.order.Uint32(rec[4:])), d.order.Uint64(rec[8:])
		if size < 16 {
			return out, used, fmt.Errorf("jitdump record of %d bytes at offset %d", size, used)
		}
		if len(rec) < size {
			break // still being written
		}
		body := rec[16:size]
		used += size
		switch typ {
		case jitCodeLoad:
			if e, ok := d.load(body, ts); ok {
				out = append(out, e)
			}
		case jitCodeMove:
			if e, ok := d.move(body, ts); ok {
				out = append(out, e)
			}
		case jitCodeDebugInfo:
			d.debugInfo(body)
		case jitCodeClose:
			d.closed = true
		}
	}
	return out, used, nil
}

// load: pid u32, tid u32, vma u64, code_addr u64, code_size u64,
// code_index u64, name (NUL-terminated), code.
func (d *jitdumpDecoder) load(b []byte, ts uint64) (jitEntry, bool) {
	if len(b) < 40 {
		return jitEntry{}, false
	}
	addr, size, index := d.order.Uint64(b[16:]), d.order.Uint64(b[24:]), d.order.Uint64(b[32:])
	name := cString(b[40:])
	if size == 0 || addr+size < addr {
		return jitEntry{}, false
	}
	d.codeIndex[index] = name
	e := jitEntry{start: addr, end: addr + size, order: ts, name: name, lines: d.debug[addr]}
	delete(d.debug, addr)
	return e, true
}

// move: pid u32, tid u32, vma u64, old_code_addr u64, new_code_addr u64,
// code_size u64, code_index u64.
func (d *jitdumpDecoder) move(b []byte, ts uint64) (jitEntry, bool) {
	if len(b) < 48 {
		return jitEntry{}, false
	}
	addr, size, index := d.order.Uint64(b[24:]), d.order.Uint64(b[32:]), d.order.Uint64(b[40:])
	name, ok := d.codeIndex[index]
	if !ok || size == 0 || addr+size < addr {
		return jitEntry{}, false
	}
	return jitEntry{start: addr, end: addr + size, order: ts, name: name}, true
}

// debugInfo: code_addr u64, nr_entry u64, then entries of addr u64,
// line u32, discrim u32, file name (NUL-terminated). It comes before the
// load of the code it describes.
func (d *jitdumpDecoder) debugInfo(b []byte) {
	if len(b) < 16 {
		return
	}
	code, n := d.order.Uint64(b), d.order.Uint64(b[8:])
	b = b[16:]
	var lines []jitLine
	for ; n > 0 && len(b) >= 16; n-- {
		l := jitLine{addr: d.order.Uint64(b), line: int(d.order.Uint32(b[8:]))}
		l.file = cString(b[16:])
		lines = append(lines, l)
		b = b[min(len(b), 16+len(l.file)+1):]
	}
	sort.SliceStable(lines, func(i, j int) bool { return lines[i].addr < lines[j].addr })
	if len(d.debug) < 1<<20 {
		d.debug[code] = lines
	}
}

func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return string(b[:i])
	}
	return string(b)
}
