package symbolize

import (
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"os"
	"sync"
	"time"

	"github.com/wallprof/wallprof/internal/profile"
)

// object is one parsed ELF file (executable, shared library or vDSO). Its
// tables are built lazily on first use and are safe for concurrent use.
type object struct {
	name    string
	buildID string
	elf     *elf.File
	file    *os.File // nil for in-memory images
	loads   []elf.ProgHeader

	root  fsRoot // the root directory of the process it was opened for
	cache *Cache

	// Under cache.mu: how many processes map it (Process.Close gives
	// theirs back), since when none has, and its key in byInode.
	refs    int
	idle    time.Time
	key     inodeKey
	haveKey bool

	debugOnce sync.Once
	debug     *elf.File // separate debug file, if any

	remoteOnce sync.Once
	remote     *elf.File // debug file from debuginfod, if any

	miniOnce sync.Once
	mini     *elf.File // MiniDebugInfo (.gnu_debugdata), if any

	symOnce sync.Once
	syms    *symTable

	dwOnce sync.Once
	dw     *dwarfIndex

	cfiOnce sync.Once
	cfi     []*cfiTable // .eh_frame first, then .debug_frame

	goOnce sync.Once
	gt     goTable

	// unw is the unwind table, built on first use and dropped once loaded
	// where it is used (UnwindMapping.Loaded): the in-kernel unwinder
	// holds the rows, and a big C++ program's are tens of megabytes.
	// unwKnown and unwHas say whether it has rows, once built.
	unwMu            sync.Mutex
	unw              *UnwindTable
	unwKnown, unwHas bool

	cgocbOnce sync.Once
	cgocb     [2]uint64 // runtime.cgocallback, if a Go object has it
	goexit    [2]uint64 // runtime.goexit, then
}

func newObject(name string, ef *elf.File, f *os.File) *object {
	o := &object{name: name, elf: ef, file: f, buildID: buildID(ef)}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD {
			o.loads = append(o.loads, p.ProgHeader)
		}
	}
	return o
}

// vaddr converts a file offset into the ELF virtual address it is loaded
// at, using the PT_LOAD program headers (works for PIE, non-PIE and shared
// libraries alike).
func (o *object) vaddr(off uint64) (uint64, bool) {
	for _, p := range o.loads {
		if off >= p.Off && off < p.Off+p.Filesz {
			return off - p.Off + p.Vaddr, true
		}
	}
	return 0, false
}

// frames returns the frames at ELF virtual address pc, innermost first, or
// nil when nothing names it. Go binaries use .gopclntab, then DWARF, then
// the symbol tables.
func (o *object) frames(pc uint64) []profile.Frame {
	useDWARF := o.cache == nil || !o.cache.noDWARF
	if gt := o.goTable(); gt != nil {
		if fr := gt.Lookup(pc); len(fr) > 0 {
			return fr
		}
		// A static Go binary has no C code for DWARF to name (its
		// functions are all in .gopclntab), and its DWARF costs 20 MB to
		// index for a program of wallprof's size: an address that is in
		// no function (a stale return address) would pay that for
		// nothing. One that runs a dynamic linker may have cgo's C code.
		useDWARF = useDWARF && o.dynamic()
	}
	var dw *dwarfIndex
	if useDWARF {
		dw = o.dwarf()
	}
	if dw != nil {
		if fr := dw.lookup(pc); len(fr) > 0 {
			if fr[len(fr)-1].Function == "" {
				fr[len(fr)-1].Function = o.symbols().lookup(pc)
			}
			if fr[len(fr)-1].Function != "" {
				return fr
			}
		}
	}
	if name := o.symbols().lookup(pc); name != "" {
		return []profile.Frame{{Function: name}}
	}
	return nil
}

func (o *object) symbols() *symTable {
	o.symOnce.Do(func() {
		files := []*elf.File{o.elf}
		for _, d := range []*elf.File{o.fullDebugFile(), o.miniDebugInfo()} {
			if d != nil {
				files = append(files, d)
			}
		}
		o.syms = newSymTable(files)
	})
	return o.syms
}

// dynamic reports whether the object asks for a dynamic linker (PT_INTERP).
func (o *object) dynamic() bool {
	for _, p := range o.elf.Progs {
		if p.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}

func (o *object) dwarf() *dwarfIndex {
	o.dwOnce.Do(func() {
		for _, f := range []*elf.File{o.elf, o.fullDebugFile()} {
			if f != nil && hasDWARF(f) {
				if d, err := f.DWARF(); err == nil {
					o.dw = newDWARFIndex(d)
					return
				}
			}
		}
	})
	return o.dw
}

// debugFile returns the separate debug file found on this machine (in the
// process's root or, by build ID, in ours), or nil. It never asks the
// network: the unwinder calls it while recording.
func (o *object) debugFile() *elf.File {
	o.debugOnce.Do(func() {
		if hasDWARF(o.elf) || o.file == nil {
			return
		}
		root := o.root
		if root == nil {
			root = hostRoot{}
		}
		o.debug = findDebugFile(root, o.name, o.elf, o.buildID)
	})
	return o.debug
}

// fullDebugFile returns the local debug file, else the one debuginfod has
// when the cache may use it (names and lines are looked up after the
// recording), or nil.
func (o *object) fullDebugFile() *elf.File {
	if d := o.debugFile(); d != nil {
		return d
	}
	o.remoteOnce.Do(func() {
		if hasDWARF(o.elf) || o.file == nil || o.cache == nil {
			return
		}
		if d := o.cache.debuginfod(); d != nil && isGNUBuildID(o.buildID) {
			o.remote = fetchDebugFile(d, o.buildID)
		}
	})
	return o.remote
}

// miniDebugInfo returns the object's MiniDebugInfo symbols, or nil.
func (o *object) miniDebugInfo() *elf.File {
	o.miniOnce.Do(func() { o.mini = miniDebugInfo(o.elf) })
	return o.mini
}

func (o *object) goTable() goTable {
	o.goOnce.Do(func() { o.gt = openGoTable(o.elf, o.file) })
	return o.gt
}

// cfiTables returns the parsed .eh_frame and .debug_frame sections.
func (o *object) cfiTables() []*cfiTable {
	o.cfiOnce.Do(func() {
		if s := o.elf.Section(".eh_frame"); s != nil && s.Type != elf.SHT_NOBITS {
			if data, err := s.Data(); err == nil {
				// A malformed tail still leaves the entries parsed before it.
				t, _ := parseCFI(data, s.Addr, true)
				o.cfi = append(o.cfi, t)
			}
		}
		// A Go binary's .debug_frame describes its Go functions alone,
		// which are unwound from .gopclntab (stepGo) and by frame
		// pointer: parsing it cost 30 MB for wallprof's own binary.
		files := []*elf.File{o.elf, o.debugFile()}
		if o.goTable() != nil {
			files = nil
		}
		for _, f := range files {
			if f == nil {
				continue
			}
			if s := f.Section(".debug_frame"); s != nil && s.Type != elf.SHT_NOBITS {
				if data, err := s.Data(); err == nil {
					t, _ := parseCFI(data, 0, false)
					o.cfi = append(o.cfi, t)
					break
				}
			}
		}
	})
	return o.cfi
}

// findFDE returns the FDE covering pc in any CFI section.
func (o *object) findFDE(pc uint64) (*fde, bool) {
	for _, t := range o.cfiTables() {
		if f, ok := t.find(pc); ok {
			return f, true
		}
	}
	return nil, false
}

func hasDWARF(f *elf.File) bool {
	for _, n := range []string{".debug_info", ".zdebug_info"} {
		if s := f.Section(n); s != nil && s.Type != elf.SHT_NOBITS && s.Size > 0 {
			return true
		}
	}
	return false
}

// buildID returns the GNU build ID as hex, or else the Go build ID string.
func buildID(f *elf.File) string {
	var gnuID, goID string
	for _, s := range f.Sections {
		if s.Type != elf.SHT_NOTE {
			continue
		}
		data, err := s.Data()
		if err != nil {
			continue
		}
		forEachNote(data, func(name string, typ uint32, desc []byte) {
			switch {
			case name == "GNU" && typ == 3:
				gnuID = hex.EncodeToString(desc)
			case name == "Go" && typ == 4:
				goID = string(desc)
			}
		})
	}
	if gnuID != "" {
		return gnuID
	}
	return goID
}

// forEachNote calls fn for every ELF note in data (4-byte aligned, as in
// 64-bit Linux objects and /sys/kernel/notes).
func forEachNote(data []byte, fn func(name string, typ uint32, desc []byte)) {
	align := func(n uint32) uint64 { return (uint64(n) + 3) &^ 3 }
	for len(data) >= 12 {
		nsz := binary.LittleEndian.Uint32(data[0:])
		dsz := binary.LittleEndian.Uint32(data[4:])
		typ := binary.LittleEndian.Uint32(data[8:])
		data = data[12:]
		if align(nsz) > uint64(len(data)) {
			return
		}
		name := data[:nsz]
		data = data[align(nsz):]
		if align(dsz) > uint64(len(data)) && uint64(dsz) > uint64(len(data)) {
			return
		}
		desc := data[:dsz]
		for len(name) > 0 && name[len(name)-1] == 0 {
			name = name[:len(name)-1]
		}
		fn(string(name), typ, desc)
		data = data[min(align(dsz), uint64(len(data))):]
	}
}
