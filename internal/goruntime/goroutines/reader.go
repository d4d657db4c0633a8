// Package goroutines reads the goroutine table of a running Go program from
// outside: each goroutine's id, state, wait reason, creation site, thread
// and (for goroutines that are not running) stack.
//
// Contract:
//   - The target is never stopped, ptrace-attached or written to. Memory
//     is read with process_vm_readv(2), or pread(2) on /proc/PID/mem where
//     that is not allowed; both need the right to ptrace the target (root
//     or CAP_SYS_PTRACE), but neither stops it.
//   - Reads race with the running target. Every goroutine is read twice
//     (its g before and after its stack) and kept only if the two agree and
//     its stack unwinds within its bounds; otherwise it is read again, up to
//     a bounded number of times, and then dropped and counted in
//     Snapshot.Dropped. Nothing is dropped silently.
//   - Supported: linux/amd64 executables built by Go 1.19 through 1.26,
//     stripped or not, position-dependent or PIE. Anything else is a
//     one-sentence error from Open (ErrNotGo, rtlayout.ErrUnsupportedVersion,
//     ErrUnsupportedArch).
//   - Addresses in a Snapshot (PCs, stacks) are the target's runtime
//     addresses; subtract Reader.LoadBias to look them up in Reader.Table.
//   - A Reader is not safe for concurrent use.
package goroutines

import (
	"bufio"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/wallprof/wallprof/internal/goruntime/rtlayout"
	"github.com/wallprof/wallprof/internal/symbolize/gopclntab"
)

// ErrNotGo is returned (wrapped) by Open when the target is not a Go
// program.
var ErrNotGo = errors.New("not a Go program")

// ErrNoFuncTable is returned (wrapped) by Open for a Go program whose
// function table (.gopclntab) cannot be found; without it stacks cannot be
// named, nor runtime.allgs found in a stripped binary.
var ErrNoFuncTable = errors.New("Go function table not found")

// ErrUnsupportedArch is returned (wrapped) by Open for an executable that
// is not amd64.
var ErrUnsupportedArch = errors.New("unsupported architecture")

// Reader reads the goroutines of one process.
type Reader struct {
	pid       int
	version   string
	layout    rtlayout.Layout
	allgs     uint64 // runtime address of runtime.allgs
	allgsHow  string
	bias      uint64
	table     *gopclntab.Table
	mem       memory
	system    map[uint64]bool // startpc (link-time) -> is a runtime goroutine
	maxRetry  int
	maxDepth  int
	maxStack  int
	maxAllgs  int
	scratch   scratch
	snapshots int                  // number of the next snapshot
	stacks    []cachedStack        // by index in allgs
	cacheAge  int                  // 0: no stack cache
	labelSets map[uint64]*labelSet // by address
	frame     frame
	// frameSizes caches the pcsp value at return addresses; -1: none.
	frameSizes map[uint64]int64
}

// SetStackCache sets for how many snapshots (at least; up to 15 more) the
// stack of a goroutine whose g did not change is reused instead of read
// again; 0 disables the cache. The default is 16: at 100 snapshots a
// second, an idle goroutine's stack is read about every quarter second.
//
// The cache can be wrong in one case: a goroutine that ran between two
// snapshots and stopped again at the same pc with the same stack and frame
// pointers, after an outer caller returned and another call took its place
// at the same depth, keeps the stack of the earlier call until its entry
// expires.
func (r *Reader) SetStackCache(maxAge int) {
	r.cacheAge = max(maxAge, 0)
	if r.cacheAge == 0 {
		r.stacks = nil
	}
}

// Open prepares to read the goroutines of process pid. It reads the
// executable through /proc/PID/exe (which also works for processes in other
// mount namespaces) and the load address from /proc/PID/maps.
func Open(pid int) (*Reader, error) { return open(pid, nil) }

// An Exe is what a Reader learns from a Go executable's file alone: its
// version, runtime layout and function table (tens to hundreds of
// milliseconds to read). ReadExe reads it before the program runs, and
// OpenExe opens a Reader of a process running it without reading it again.
type Exe struct {
	x   exeInfo
	f   *elf.File
	dev uint64
	ino uint64
}

// ReadExe reads the executable at path.
func ReadExe(path string) (*Exe, error) {
	raw, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	f, err := elf.NewFile(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: not ELF: %v", path, ErrNotGo, err)
	}
	x, err := readExe(f, raw, path)
	if err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(raw.Fd()), &st); err != nil {
		x.table.Close()
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	return &Exe{x: x, f: f, dev: st.Dev, ino: st.Ino}, nil
}

// OpenExe is Open for a process that runs e's file; a process running
// another file is opened as Open does. The Reader keeps e's function
// table, and its Close gives it back: one Reader to an Exe. (When OpenExe
// fails, e stays usable: a retry once the target's runtime has started.)
func OpenExe(pid int, e *Exe) (*Reader, error) {
	var st syscall.Stat_t
	if e == nil || syscall.Stat(fmt.Sprintf("/proc/%d/exe", pid), &st) != nil || st.Dev != e.dev || st.Ino != e.ino {
		return Open(pid)
	}
	bias, err := loadBias(pid, e.f, e.ino)
	if err != nil {
		return nil, err
	}
	mem, err := openMemory(pid, e.x.allgs+bias)
	if err != nil {
		return nil, err
	}
	return newReader(pid, e.x, bias, mem)
}

// open is Open; wrap, when not nil, wraps the target's memory (tests
// record what the Reader reads through it).
func open(pid int, wrap func(memory) memory) (*Reader, error) {
	exe := fmt.Sprintf("/proc/%d/exe", pid)
	raw, err := os.Open(exe)
	if err != nil {
		if errors.Is(err, os.ErrPermission) {
			return nil, fmt.Errorf("open executable of process %d: %w (run as root or with CAP_SYS_PTRACE)", pid, err)
		}
		return nil, fmt.Errorf("open executable of process %d: %w", pid, err)
	}
	defer raw.Close()
	f, err := elf.NewFile(raw)
	if err != nil {
		return nil, fmt.Errorf("process %d: %w: executable is not ELF: %v", pid, ErrNotGo, err)
	}
	x, err := readExe(f, raw, fmt.Sprintf("process %d", pid))
	if err != nil {
		return nil, err
	}
	r, err := openWith(pid, f, raw, x, wrap)
	if err != nil {
		x.table.Close()
	}
	return r, err
}

// openWith is the rest of open, with the executable read as x; on failure
// x's table is the caller's to close.
func openWith(pid int, f *elf.File, raw *os.File, x exeInfo, wrap func(memory) memory) (*Reader, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(raw.Fd()), &st); err != nil {
		return nil, fmt.Errorf("stat executable of process %d: %w", pid, err)
	}
	bias, err := loadBias(pid, f, st.Ino)
	if err != nil {
		return nil, err
	}
	mem, err := openMemory(pid, x.allgs+bias)
	if err != nil {
		return nil, err
	}
	if wrap != nil {
		mem = wrap(mem)
	}
	return newReader(pid, x, bias, mem)
}

// exeInfo is what a Reader learns from the target's executable alone.
type exeInfo struct {
	version                string
	layout                 rtlayout.Layout
	table                  *gopclntab.Table
	allgs                  uint64 // link-time address of runtime.allgs
	allgsHow               string
	goexitStart, goexitEnd uint64 // link-time range of runtime.goexit
}

// readExe reads the Go version, runtime layout, function table and the
// addresses of runtime.allgs and runtime.goexit from the executable f
// (whose bytes are raw); who names the target in errors ("process 123").
func readExe(f *elf.File, raw io.ReaderAt, who string) (exeInfo, error) {
	var x exeInfo
	if f.Machine != elf.EM_X86_64 {
		return x, fmt.Errorf("%s: %w: %s (only amd64 is supported)", who, ErrUnsupportedArch, f.Machine)
	}
	version, err := rtlayout.GoVersion(raw)
	if err != nil {
		return x, fmt.Errorf("%s: %w (%v)", who, ErrNotGo, err)
	}
	layout, err := rtlayout.Load(f, version)
	if err != nil {
		return x, fmt.Errorf("%s: %w", who, err)
	}
	file, _ := raw.(*os.File) // its sections are mapped rather than read
	table, err := gopclntab.OpenFile(f, file)
	if errors.Is(err, gopclntab.ErrNotGo) && f.Section(".gopclntab") == nil {
		return x, fmt.Errorf("%s (%s): %w: the executable has no .gopclntab section (externally linked programs can keep the table inside another section)", who, version, ErrNoFuncTable)
	}
	if err != nil {
		return x, fmt.Errorf("%s (%s): read .gopclntab: %w", who, version, err)
	}
	allgs, how, err := rtlayout.FindAllgs(f, table)
	if err != nil {
		table.Close()
		return x, fmt.Errorf("%s (%s): %w", who, version, err)
	}
	start, end, ok := rtlayout.FindFunc(table, "runtime.goexit")
	if !ok {
		table.Close()
		return x, fmt.Errorf("%s (%s): %w: no runtime.goexit", who, version, ErrNoFuncTable)
	}
	return exeInfo{version: version, layout: layout, table: table, allgs: allgs, allgsHow: how,
		goexitStart: start, goexitEnd: end}, nil
}

// newReader returns a Reader of the goroutines of the executable x loaded
// with bias, whose memory is mem, after checking the layout on the first
// goroutine; pid is only used in errors and to tell an exited process.
// It closes mem if it fails.
func newReader(pid int, x exeInfo, bias uint64, mem memory) (*Reader, error) {
	r := &Reader{
		pid: pid, version: x.version, layout: x.layout, table: x.table,
		allgs: x.allgs + bias, allgsHow: x.allgsHow, bias: bias, mem: mem,
		system:   make(map[uint64]bool),
		cacheAge: 16,
		maxRetry: 3, maxDepth: 512, maxStack: 256 << 10, maxAllgs: maxAllgs,
		labelSets: make(map[uint64]*labelSet),
	}
	r.frameSizes = make(map[uint64]int64)
	r.frame = frame{maxDepth: r.maxDepth, callerFrame: r.callerFrame, goexitStart: x.goexitStart + bias, goexitEnd: x.goexitEnd + bias}
	if err := r.checkLayout(); err != nil {
		mem.close()
		return nil, err
	}
	return r, nil
}

// openRecorded returns a Reader of a target that is not a live process:
// the executable f (bytes raw) loaded with bias, whose memory mem serves
// (a recording, in tests). Errors name the target "recorded target".
func openRecorded(f *elf.File, raw io.ReaderAt, bias uint64, mem memory) (*Reader, error) {
	x, err := readExe(f, raw, "recorded target")
	if err != nil {
		return nil, err
	}
	r, err := newReader(0, x, bias, mem)
	if err != nil {
		x.table.Close()
	}
	return r, err
}

// ErrNotReady is returned (wrapped) by Open when the target's Go runtime
// has not created its first goroutine yet (a program just started): try
// again a moment later.
var ErrNotReady = errors.New("Go runtime not started yet (no goroutines); try again")

// ErrLayoutMismatch is returned (wrapped) by Open when the target's first
// goroutine does not read as expected: the layout of its Go version does
// not fit the binary (a pre-release toolchain, a modified runtime).
var ErrLayoutMismatch = errors.New("runtime layout does not fit the program")

// checkLayout reads the first g of allgs, which is always the main
// goroutine: goid 1, started at runtime.main, with a stack. That checks
// the address of allgs and the offsets of goid, startpc and stack.
func (r *Reader) checkLayout() error {
	gps, err := r.readAllgs()
	if err != nil {
		return err
	}
	if len(gps) == 0 {
		return fmt.Errorf("process %d (%s): %w", r.pid, r.version, ErrNotReady)
	}
	buf := make([]byte, r.layout.Offsets.GSize)
	rs := []read{{addr: gps[0], buf: buf}}
	r.mem.readAll(rs)
	v := r.parseG(buf)
	name := ""
	if r.table != nil {
		_, _, name, _ = r.table.FuncRange(v.startpc - r.bias)
	}
	if !rs[0].ok || v.goid != 1 || name != "runtime.main" || v.lo >= v.hi {
		return fmt.Errorf("process %d (%s, layout from %s): %w: its first goroutine reads as goid %d starting in %q",
			r.pid, r.version, r.layout.Source, ErrLayoutMismatch, v.goid, name)
	}
	return nil
}

// callerFrame returns the pcsp value at return address ret, caching it:
// return addresses repeat from one stack and one snapshot to the next.
func (r *Reader) callerFrame(ret uint64) (int64, bool) {
	if d, ok := r.frameSizes[ret]; ok {
		return d, d >= 0
	}
	d, ok := r.table.SPDelta(ret - r.bias)
	if !ok {
		d = -1
	}
	if len(r.frameSizes) < maxFrameSizes {
		r.frameSizes[ret] = d
	}
	return d, ok
}

// maxFrameSizes bounds the cache of frame sizes (one entry per return
// address seen).
const maxFrameSizes = 1 << 20

// Close releases the Reader's resources: the target's memory, and the
// mappings of its executable that the function table holds (an agent opens
// a view of every Go program that comes and goes).
func (r *Reader) Close() error {
	if r.table != nil {
		r.table.Close()
	}
	return r.mem.close()
}

// GoVersion returns the Go version that built the target ("go1.22.12").
func (r *Reader) GoVersion() string { return r.version }

// IsGoWrapper reports whether the function at startpc (a goroutine's start
// pc) is a wrapper the compiler generated, such as the closure Go 1.19 to
// 1.21 make for a go statement with arguments (`go c.serve(ctx)` starts
// in net/http.(*Server).Serve.func3): the runtime's tracebacks leave such
// frames out. From Go 1.22 on the closure is named F.gowrapN instead.
func (r *Reader) IsGoWrapper(startpc uint64) bool {
	if r.table == nil {
		return false
	}
	// abi.FuncIDWrapper (cmd/internal/objabi/funcid.go in Go 1.19 and 1.20,
	// internal/abi/symtab.go in Go 1.21): 21.
	switch rtlayout.Minor(r.version) {
	case "go1.19", "go1.20", "go1.21":
	default:
		return false
	}
	id, ok := r.table.FuncID(startpc - r.bias)
	return ok && id == 21
}

// Layout returns the runtime layout in use.
func (r *Reader) Layout() rtlayout.Layout { return r.layout }

// AllgsSource says how the address of runtime.allgs was found.
func (r *Reader) AllgsSource() string { return r.allgsHow }

// LoadBias returns the difference between the target's runtime addresses
// and the executable's link-time addresses (0 unless it is PIE).
func (r *Reader) LoadBias() uint64 { return r.bias }

// Table returns the target's function table, for symbolizing PCs (minus
// LoadBias).
func (r *Reader) Table() *gopclntab.Table { return r.table }

// Syscalls returns the number of memory-reading system calls made so far.
func (r *Reader) Syscalls() int { return r.mem.syscalls() }

// loadBias returns the load bias of the executable f (inode ino) in pid:
// zero for a position-dependent executable; for PIE, the entry address
// the kernel passed the process (AT_ENTRY in /proc/PID/auxv) minus the
// file's entry address, or failing that the start of its mapping at file
// offset 0 in /proc/PID/maps minus the page-aligned address of its first
// PT_LOAD segment.
func loadBias(pid int, f *elf.File, ino uint64) (uint64, error) {
	if f.Type != elf.ET_DYN {
		return 0, nil
	}
	if entry, ok := auxvEntry(pid); ok && f.Entry != 0 {
		return entry - f.Entry, nil
	}
	var first *elf.Prog
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			first = p
			break
		}
	}
	if first == nil {
		return 0, fmt.Errorf("process %d: executable has no PT_LOAD segment", pid)
	}
	start, err := mappingStart(pid, ino)
	if err != nil {
		return 0, err
	}
	if first.Off >= 0x1000 {
		return 0, fmt.Errorf("process %d: first PT_LOAD segment at file offset %#x, expected 0", pid, first.Off)
	}
	return start - first.Vaddr&^0xfff, nil
}

// auxvEntry returns AT_ENTRY from /proc/PID/auxv (amd64: pairs of 8-byte
// words).
func auxvEntry(pid int) (uint64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/auxv", pid))
	if err != nil {
		return 0, false
	}
	const atEntry = 9
	for off := 0; off+16 <= len(b); off += 16 {
		if word(b, off) == atEntry {
			return word(b, off+8), true
		}
	}
	return 0, false
}

// mappingStart returns the start of the mapping at offset 0 of inode ino
// in /proc/PID/maps.
func mappingStart(pid int, ino uint64) (uint64, error) {
	path := fmt.Sprintf("/proc/%d/maps", pid)
	fh, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		// start-end perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || fields[2] != "00000000" || fields[4] != strconv.FormatUint(ino, 10) {
			continue
		}
		lo, _, _ := strings.Cut(fields[0], "-")
		start, err := strconv.ParseUint(lo, 16, 64)
		if err != nil {
			return 0, fmt.Errorf("parse %s: %w", path, err)
		}
		return start, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	return 0, fmt.Errorf("process %d: executable (inode %d) not found in %s", pid, ino, path)
}
