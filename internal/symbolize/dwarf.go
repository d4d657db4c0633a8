package symbolize

import (
	"debug/dwarf"
	"errors"
	"io"
	"sort"
	"sync"

	"github.com/wallprof/wallprof/internal/profile"
)

// dwarfIndex answers file:line and inline-chain questions from DWARF. Only
// the compilation units' address ranges are read up front; a unit's line
// table and function tree are parsed the first time an address in it is
// looked up.
type dwarfIndex struct {
	d      *dwarf.Data
	ranges []cuRange // sorted by lo

	mu     sync.Mutex
	parsed map[dwarf.Offset]*cuInfo
}

type cuRange struct {
	lo, hi uint64
	off    dwarf.Offset
}

// cuInfo is one parsed compilation unit.
type cuInfo struct {
	lines []lineRow // sorted by addr; end-of-sequence rows first at equal addresses
	funcs []funcRange
}

type lineRow struct {
	addr uint64
	file string
	line int
	end  bool
}

// funcRange is one address range of an out-of-line function.
type funcRange struct {
	lo, hi uint64
	fn     *scope
}

// scope is a function or an inlined call inside one, with its nested
// inlined calls.
type scope struct {
	ranges   [][2]uint64
	name     string
	origin   dwarf.Offset // the function's abstract entry (its own entry if none)
	callFile string       // where this inlined call was made (for inlined scopes)
	callLine int
	children []*scope
}

func newDWARFIndex(d *dwarf.Data) *dwarfIndex {
	x := &dwarfIndex{d: d, parsed: map[dwarf.Offset]*cuInfo{}}
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil || e == nil {
			break
		}
		if e.Tag == dwarf.TagCompileUnit || e.Tag == dwarf.TagPartialUnit {
			rs, _ := d.Ranges(e)
			for _, rg := range rs {
				if rg[1] > rg[0] {
					x.ranges = append(x.ranges, cuRange{lo: rg[0], hi: rg[1], off: e.Offset})
				}
			}
		}
		r.SkipChildren()
	}
	sort.Slice(x.ranges, func(i, j int) bool { return x.ranges[i].lo < x.ranges[j].lo })
	return x
}

// lookup returns the frames at pc, innermost first: the inlined calls and
// then the out-of-line function. The outermost frame's name may be empty
// when DWARF has no function entry for pc.
func (x *dwarfIndex) lookup(pc uint64) []profile.Frame {
	cu := x.unit(pc)
	if cu == nil {
		return nil
	}
	file, line, haveLine := cu.line(pc)
	chain := cu.scopes(pc)
	if len(chain) == 0 {
		if !haveLine {
			return nil
		}
		return []profile.Frame{{File: file, Line: line}}
	}
	frames := make([]profile.Frame, len(chain))
	for i := len(chain) - 1; i >= 0; i-- {
		frames[len(chain)-1-i] = profile.Frame{Function: chain[i].name, File: file, Line: line}
		file, line = chain[i].callFile, chain[i].callLine
	}
	return frames
}

func (x *dwarfIndex) unit(pc uint64) *cuInfo {
	i := sort.Search(len(x.ranges), func(i int) bool { return x.ranges[i].lo > pc }) - 1
	// Unit ranges can overlap slightly (e.g. a unit spanning others); check
	// a few candidates.
	for j := i; j >= 0 && j > i-8; j-- {
		if pc < x.ranges[j].hi {
			return x.parse(x.ranges[j].off)
		}
	}
	return nil
}

func (x *dwarfIndex) parse(off dwarf.Offset) *cuInfo {
	x.mu.Lock()
	defer x.mu.Unlock()
	if cu, ok := x.parsed[off]; ok {
		return cu
	}
	cu := &cuInfo{}
	x.parsed[off] = cu
	r := x.d.Reader()
	r.Seek(off)
	e, err := r.Next()
	if err != nil || e == nil {
		return cu
	}
	var files []*dwarf.LineFile
	if lr, err := x.d.LineReader(e); err == nil && lr != nil {
		cu.lines = readLines(lr)
		files = lr.Files()
	}
	p := &cuParser{d: x.d, r: r, files: files, cu: cu}
	if e.Children {
		p.walk(nil)
	}
	sort.Slice(cu.funcs, func(i, j int) bool { return cu.funcs[i].lo < cu.funcs[j].lo })
	return cu
}

func readLines(lr *dwarf.LineReader) []lineRow {
	var rows []lineRow
	var le dwarf.LineEntry
	for {
		if err := lr.Next(&le); err != nil {
			if !errors.Is(err, io.EOF) {
				rows = nil // a corrupt table: better no lines than wrong ones
			}
			break
		}
		row := lineRow{addr: le.Address, line: le.Line, end: le.EndSequence}
		if le.File != nil {
			row.file = le.File.Name
		}
		rows = append(rows, row)
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].addr != rows[j].addr {
			return rows[i].addr < rows[j].addr
		}
		return rows[i].end && !rows[j].end
	})
	return rows
}

func (cu *cuInfo) line(pc uint64) (string, int, bool) {
	i := sort.Search(len(cu.lines), func(i int) bool { return cu.lines[i].addr > pc }) - 1
	if i < 0 || cu.lines[i].end {
		return "", 0, false
	}
	return cu.lines[i].file, cu.lines[i].line, true
}

// scopes returns the function containing pc followed by the inlined calls
// containing pc, outermost first.
func (cu *cuInfo) scopes(pc uint64) []*scope {
	i := sort.Search(len(cu.funcs), func(i int) bool { return cu.funcs[i].lo > pc }) - 1
	var fn *scope
	for j := i; j >= 0 && j > i-8; j-- {
		if pc < cu.funcs[j].hi {
			fn = cu.funcs[j].fn
			break
		}
	}
	if fn == nil {
		return nil
	}
	chain := []*scope{fn}
	for s := fn; s != nil; {
		var next *scope
		for _, c := range s.children {
			if c.contains(pc) {
				next = c
				break
			}
		}
		if next != nil {
			chain = append(chain, next)
		}
		s = next
	}
	return chain
}

func (s *scope) contains(pc uint64) bool {
	for _, r := range s.ranges {
		if pc >= r[0] && pc < r[1] {
			return true
		}
	}
	return false
}

// cuParser walks one unit's entries collecting functions and inlined calls.
type cuParser struct {
	d     *dwarf.Data
	r     *dwarf.Reader
	files []*dwarf.LineFile
	cu    *cuInfo
}

// walk reads the children of the current entry. parent is the function or
// inlined call they belong to (nil outside functions).
func (p *cuParser) walk(parent *scope) {
	for {
		e, err := p.r.Next()
		if err != nil || e == nil || e.Tag == 0 {
			return
		}
		switch e.Tag {
		case dwarf.TagSubprogram:
			if rs, _ := p.d.Ranges(e); len(rs) > 0 {
				s := &scope{ranges: rs, name: p.name(e), origin: e.Offset}
				if o, ok := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset); ok {
					s.origin = o
				}
				for _, r := range rs {
					p.cu.funcs = append(p.cu.funcs, funcRange{lo: r[0], hi: r[1], fn: s})
				}
				p.children(e, s)
				continue
			}
		case dwarf.TagInlinedSubroutine:
			if parent != nil && p.splitPart(e, parent) {
				p.children(e, parent) // not a call: its code is parent's own
				continue
			}
			if parent != nil {
				rs, _ := p.d.Ranges(e)
				s := &scope{ranges: rs, name: p.name(e), callFile: p.file(e), callLine: intAttr(e, dwarf.AttrCallLine)}
				s.origin, _ = e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
				parent.children = append(parent.children, s)
				p.children(e, s)
				continue
			}
		case dwarf.TagLexDwarfBlock, dwarf.TagNamespace, dwarf.TagModule,
			dwarf.TagClassType, dwarf.TagStructType, dwarf.TagUnionType:
			p.children(e, parent)
			continue
		}
		if e.Children {
			p.r.SkipChildren()
		}
	}
}

// splitPart reports whether inlined call e inside parent is GCC's partial
// inlining brought back into the function it was split from, not a call.
// GCC moves the cold tail of a function f into f.part.N, called from what
// is left of f, and then inlines f.part.N back into f (and into f's
// callers, after f's head); DWARF describes the tail as f inlined into f,
// called from f's own declaration line. glibc 2.36 has 359 of them
// (__libc_read's multi-threaded path among them), which put every read()
// twice in a row in a stack. A recursive call inlined into its function
// is made from the function's body, not from its declaration line, and
// stays a frame.
func (p *cuParser) splitPart(e *dwarf.Entry, parent *scope) bool {
	origin, ok := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
	if !ok || origin != parent.origin {
		return false
	}
	call := intAttr(e, dwarf.AttrCallLine)
	return call > 0 && call == p.declLine(origin)
}

// declLine returns the DW_AT_decl_line of the entry at off, following
// DW_AT_specification (C++ members are declared in their class); -1 if
// there is none.
func (p *cuParser) declLine(off dwarf.Offset) int {
	r := p.d.Reader()
	for depth := 0; depth < 4; depth++ {
		r.Seek(off)
		e, err := r.Next()
		if err != nil || e == nil {
			return -1
		}
		if l := intAttr(e, dwarf.AttrDeclLine); l >= 0 {
			return l
		}
		spec, ok := e.Val(dwarf.AttrSpecification).(dwarf.Offset)
		if !ok {
			return -1
		}
		off = spec
	}
	return -1
}

func (p *cuParser) children(e *dwarf.Entry, parent *scope) {
	if e.Children {
		p.walk(parent)
	}
}

func (p *cuParser) file(e *dwarf.Entry) string {
	i := intAttr(e, dwarf.AttrCallFile)
	if i >= 0 && i < len(p.files) && p.files[i] != nil {
		return p.files[i].Name
	}
	return ""
}

// name returns an entry's function name: the demangled linkage name if
// there is one, else DW_AT_name, following DW_AT_abstract_origin and
// DW_AT_specification.
func (p *cuParser) name(e *dwarf.Entry) string {
	for depth := 0; e != nil && depth < 8; depth++ {
		for _, a := range []dwarf.Attr{dwarf.AttrLinkageName, attrMIPSLinkageName} {
			if s, ok := e.Val(a).(string); ok && s != "" {
				return demangleName(s)
			}
		}
		if s, ok := e.Val(dwarf.AttrName).(string); ok && s != "" {
			return s
		}
		ref, ok := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
		if !ok {
			if ref, ok = e.Val(dwarf.AttrSpecification).(dwarf.Offset); !ok {
				return ""
			}
		}
		r := p.d.Reader()
		r.Seek(ref)
		if e, _ = r.Next(); e == nil {
			return ""
		}
	}
	return ""
}

// attrMIPSLinkageName is DW_AT_MIPS_linkage_name, still emitted by some compilers.
const attrMIPSLinkageName dwarf.Attr = 0x2007

func intAttr(e *dwarf.Entry, a dwarf.Attr) int {
	switch v := e.Val(a).(type) {
	case int64:
		return int(v)
	case uint64:
		return int(v)
	}
	return -1
}
