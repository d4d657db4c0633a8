package symbolize

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wallprof/wallprof/internal/profile"
)

// Process symbolizes the addresses of one process. It is safe for
// concurrent use.
type Process struct {
	pid   int
	cache *Cache

	mu       sync.RWMutex
	maps     []*region // sorted by start, non-overlapping
	nextID   uint64
	lastLook time.Time // when the mappings were last read, or TrimStack last tried to

	root fsRoot      // the process's root directory (/proc/PID/root), held open
	jit  *jitSymbols // names of JIT and interpreter code
}

var _ Resolver = (*Process)(nil)

// region is one executable mapping of the process.
type region struct {
	m      *profile.Mapping
	obj    *object // nil when the file could not be read, or for anonymous memory
	pseudo string  // "[anon]", "[vdso]", "[vsyscall]"...: not a file
}

// NewProcess reads /proc/PID/maps with a cache of its own. Use
// Cache.NewProcess to share parsed files between processes.
func NewProcess(pid int) (*Process, error) {
	return NewCache().NewProcess(pid)
}

// NewProcess reads /proc/PID/maps and opens every executable mapping's file
// right away, so that symbolization keeps working after the process exits.
// A file that cannot be opened is not an error: its addresses resolve to
// "module+0xoffset".
func (c *Cache) NewProcess(pid int) (*Process, error) {
	p := &Process{pid: pid, cache: c, root: hostRoot{}}
	// The root stays open so that files in the process's mount namespace
	// (a container's) can be read after it exits: the perf map a JVM
	// writes at exit, separate debug files looked up when symbolizing.
	if r, err := os.OpenRoot(fmt.Sprintf("/proc/%d/root", pid)); err == nil {
		p.root = r
		c.closeLater(r)
	}
	p.jit = newJITSymbols(p.root, readNSpid(pid))
	c.closeLater(p.jit)
	if err := p.Refresh(); err != nil {
		return nil, err
	}
	return p, nil
}

// JITSources returns the perf map and jitdump files found so far for the
// process (paths in its mount namespace) and the process's PID in its own
// PID namespace, which names them.
func (p *Process) JITSources() (paths []string, nspid int) {
	if p.jit == nil {
		return nil, p.pid
	}
	return p.jit.sources(), p.jit.nspid
}

// PID returns the process ID.
func (p *Process) PID() int { return p.pid }

// Mappings returns the process's executable mappings, ordered by address.
func (p *Process) Mappings() []*profile.Mapping {
	p.mu.RLock()
	defer p.mu.RUnlock()
	out := make([]*profile.Mapping, len(p.maps))
	for i, r := range p.maps {
		out[i] = r.m
	}
	return out
}

// Refresh re-reads /proc/PID/maps (after dlopen, for example). Mappings seen
// before keep their Mapping, ID and open file.
func (p *Process) Refresh() error {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", p.pid))
	if err != nil {
		return fmt.Errorf("read maps of process %d: %w", p.pid, err)
	}
	entries := parseMaps(data)
	if len(entries) == 0 {
		// An exiting process (a zombie) shows no mappings: keep the ones
		// read while it lived, which its samples still need.
		p.mu.Lock()
		p.lastLook = time.Now()
		p.mu.Unlock()
		return nil
	}
	p.mu.RLock()
	old := map[profile.Mapping]*region{}
	for _, r := range p.maps {
		old[mapKey(r.m)] = r
	}
	p.mu.RUnlock()

	if p.jit != nil {
		p.jit.openPerfMap()
	}
	var regions []*region
	for _, e := range entries {
		if p.jit != nil && isJitdump(e.File) {
			path, mapFile := e.File, fmt.Sprintf("/proc/%d/map_files/%x-%x", p.pid, e.Start, e.Limit)
			p.jit.addDump(path, func() (*os.File, error) {
				if f, err := os.Open(mapFile); err == nil {
					return f, nil
				}
				return p.root.Open(strings.TrimPrefix(path, "/"))
			})
		}
		if r, ok := old[mapKey(&e)]; ok {
			regions = append(regions, r)
			continue
		}
		regions = append(regions, p.open(e))
	}
	sort.Slice(regions, func(i, j int) bool { return regions[i].m.Start < regions[j].m.Start })

	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range regions {
		if r.m.ID == 0 {
			p.nextID++
			r.m.ID = p.nextID
		}
	}
	kept := make(map[*region]bool, len(regions))
	for _, r := range regions {
		kept[r] = true
	}
	for _, r := range p.maps {
		if !kept[r] && r.obj != nil {
			p.cache.release(r.obj) // unmapped (an exec, a dlclose)
		}
	}
	p.maps = regions
	p.lastLook = time.Now()
	return nil
}

// Close gives back the process's files to the cache (Cache.Sweep closes
// those no process maps any more) and closes its root directory and JIT
// symbol files. The process must not be used afterwards.
func (p *Process) Close() error {
	p.mu.Lock()
	maps := p.maps
	p.maps = nil
	p.mu.Unlock()
	for _, r := range maps {
		if r.obj != nil {
			p.cache.release(r.obj)
		}
	}
	if r, ok := p.root.(io.Closer); ok {
		p.cache.forgetCloser(r)
		r.Close()
	}
	if p.jit != nil {
		p.cache.forgetCloser(p.jit)
		p.jit.Close()
	}
	return nil
}

func mapKey(m *profile.Mapping) profile.Mapping {
	return profile.Mapping{Start: m.Start, Limit: m.Limit, Offset: m.Offset, File: m.File}
}

// parseMaps returns the executable mappings in /proc/PID/maps text.
func parseMaps(data []byte) []profile.Mapping {
	var out []profile.Mapping
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		// start-end perms offset dev inode   path (the path may contain spaces)
		f := strings.SplitN(sc.Text(), " ", 6)
		if len(f) < 5 || len(f[1]) < 3 || f[1][2] != 'x' {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		limit, err2 := strconv.ParseUint(hi, 16, 64)
		off, err3 := strconv.ParseUint(f[2], 16, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		path := ""
		if len(f) == 6 {
			path = strings.TrimLeft(f[5], " ")
		}
		out = append(out, profile.Mapping{Start: start, Limit: limit, Offset: off, File: path})
	}
	return out
}

// open builds the region of a new mapping, opening its file.
func (p *Process) open(m profile.Mapping) *region {
	r := &region{m: &m}
	switch {
	case m.File == "[vdso]":
		r.pseudo = m.File
		if img, err := p.readMemory(m.Start, m.Limit-m.Start); err == nil {
			r.obj, _ = p.cache.openMemory(m.File, img)
		}
	case strings.HasPrefix(m.File, "/"):
		path := strings.TrimSuffix(m.File, " (deleted)")
		r.obj, _ = p.cache.openFileIn(p.root, path,
			fmt.Sprintf("/proc/%d/map_files/%x-%x", p.pid, m.Start, m.Limit),
			fmt.Sprintf("/proc/%d/root%s", p.pid, path))
	case strings.HasPrefix(m.File, "[") && !strings.HasPrefix(m.File, "[anon"):
		r.pseudo = m.File
	default:
		r.pseudo = "[anon]" // JIT code and other anonymous executable memory
	}
	if r.obj != nil {
		m.BuildID = r.obj.buildID
	}
	return r
}

func (p *Process) readMemory(addr, n uint64) ([]byte, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/mem", p.pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, int64(addr)); err != nil {
		return nil, fmt.Errorf("read memory of process %d at %#x: %w", p.pid, addr, err)
	}
	return buf, nil
}

func (p *Process) region(addr uint64) *region {
	p.mu.RLock()
	defer p.mu.RUnlock()
	i := sort.Search(len(p.maps), func(i int) bool { return p.maps[i].m.Limit > addr })
	if i < len(p.maps) && p.maps[i].m.Start <= addr {
		return p.maps[i]
	}
	return nil
}

// refreshEvery bounds how often TrimStack re-reads the mappings to look for
// a return address that lies outside all of them; leafRefreshEvery, how
// often it does when the pc itself is outside them (then they are certainly
// out of date: an exec, new JIT code).
const (
	refreshEvery     = 100 * time.Millisecond
	leafRefreshEvery = time.Millisecond
)

// userAddrLimit is the end of user space with 5-level paging; x86-64 user
// space with 4-level paging ends at 1<<47. The one executable page above it,
// the legacy vsyscall page, is in /proc/PID/maps.
const userAddrLimit = 1 << 56

// TrimStack cuts a user stack (leaf first: stack[0] the thread's pc, the
// others return addresses) before its first return address that lies in no
// executable mapping of the process: a frame-pointer walk that went past the
// outermost frame (a thread entry that left RBP set, Go's runtime.mcall or
// runtime.mstart) reads stack or heap data, often ASCII, as return
// addresses, and everything from there on is garbage. A return address is
// checked at address-1, as it is resolved. Anonymous executable memory (JIT
// code), the vDSO and files that could not be opened are executable
// mappings too. An address outside every mapping that could be user space
// makes TrimStack re-read the mappings first (at most every refreshEvery,
// or every leafRefreshEvery when the pc is outside them too), so that code
// mapped since is kept. stack[0] is never cut. The result shares stack's
// memory.
func (p *Process) TrimStack(stack []uint64) []uint64 {
	if len(stack) > 1 && p.region(stack[0]) == nil {
		p.lookAgain(leafRefreshEvery)
	}
	for i := 1; i < len(stack); i++ {
		if stack[i] == 0 || !p.executable(stack[i]-1) {
			return stack[:i]
		}
	}
	return stack
}

// executable reports whether addr is in an executable mapping, re-reading
// the mappings at most every refreshEvery when it is not.
func (p *Process) executable(addr uint64) bool {
	if p.region(addr) != nil {
		return true
	}
	return addr < userAddrLimit && p.lookAgain(refreshEvery) && p.region(addr) != nil
}

// lookAgain re-reads the mappings unless they were read less than every
// ago. It reports whether it did.
func (p *Process) lookAgain(every time.Duration) bool {
	p.mu.Lock()
	due := time.Since(p.lastLook) >= every
	if due {
		p.lastLook = time.Now() // also when the process is gone and Refresh fails
	}
	p.mu.Unlock()
	return due && p.Refresh() == nil
}

// locate returns the object and ELF virtual address of addr.
func (p *Process) locate(addr uint64) (*region, uint64, bool) {
	r := p.region(addr)
	if r == nil || r.obj == nil {
		return r, 0, false
	}
	va, ok := r.obj.vaddr(addr - r.m.Start + r.m.Offset)
	return r, va, ok
}

// Resolve returns the mapping containing addr and the frames at addr,
// innermost first. It never returns an empty slice. It does not know when
// the address was sampled: code that a JIT replaced at the same address is
// named by the latest code loaded there (see ResolveAt).
func (p *Process) Resolve(addr uint64) (*profile.Mapping, []profile.Frame) {
	return p.ResolveAt(addr, 0)
}

// ResolveAt is Resolve for an address sampled at time at (CLOCK_MONOTONIC
// nanoseconds, bpf_ktime_get_ns): in JIT code described by a jitdump file,
// the code loaded at addr most recently before at names it. at == 0 means
// the time is unknown.
func (p *Process) ResolveAt(addr, at uint64) (*profile.Mapping, []profile.Frame) {
	r, va, ok := p.locate(addr)
	if r == nil {
		return nil, []profile.Frame{{Function: fmt.Sprintf("[unknown]+0x%x", addr)}}
	}
	if ok {
		if fr := r.obj.frames(va); len(fr) > 0 {
			return r.m, fr
		}
	}
	switch {
	case r.pseudo == "[anon]":
		if p.jit != nil {
			if f, ok := p.jit.lookup(addr, at); ok {
				return r.m, []profile.Frame{f}
			}
		}
		// Anonymous memory has no file offsets: name the absolute address.
		return r.m, []profile.Frame{{Function: fmt.Sprintf("[anon]+0x%x", addr)}}
	case r.pseudo != "":
		return r.m, []profile.Frame{{Function: fmt.Sprintf("%s+0x%x", r.pseudo, addr-r.m.Start+r.m.Offset)}}
	}
	return r.m, []profile.Frame{{Function: fmt.Sprintf("%s+0x%x", filepath.Base(r.m.File), addr-r.m.Start+r.m.Offset)}}
}
