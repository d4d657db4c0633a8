package symbolize

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
)

// This file parses call frame information (.eh_frame and .debug_frame) into
// a sorted index of FDEs. Bytes come from files we do not control: every
// read is bounds-checked and a malformed entry ends parsing with an error,
// keeping what was parsed before it.

// Pointer encodings (DW_EH_PE_*) used in .eh_frame.
const (
	peAbsptr  = 0x00
	peUleb128 = 0x01
	peUdata2  = 0x02
	peUdata4  = 0x03
	peUdata8  = 0x04
	peSleb128 = 0x09
	peSdata2  = 0x0a
	peSdata4  = 0x0b
	peSdata8  = 0x0c
	pePcrel   = 0x10
	peTextrel = 0x20
	peDatarel = 0x30
	peFuncrel = 0x40
	peOmit    = 0xff
)

var errTruncated = errors.New("truncated")

// reader is a bounds-checked little-endian byte reader. After the first
// out-of-range read, err is set and every further read returns zero.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b)-r.off {
		r.err = errTruncated
		return nil
	}
	s := r.b[r.off : r.off+n]
	r.off += n
	return s
}

func (r *reader) u8() uint8 {
	if s := r.take(1); s != nil {
		return s[0]
	}
	return 0
}

func (r *reader) u16() uint16 {
	if s := r.take(2); s != nil {
		return binary.LittleEndian.Uint16(s)
	}
	return 0
}

func (r *reader) u32() uint32 {
	if s := r.take(4); s != nil {
		return binary.LittleEndian.Uint32(s)
	}
	return 0
}

func (r *reader) u64() uint64 {
	if s := r.take(8); s != nil {
		return binary.LittleEndian.Uint64(s)
	}
	return 0
}

func (r *reader) uleb() uint64 {
	var v uint64
	var shift uint
	for {
		b := r.u8()
		if r.err != nil {
			return 0
		}
		if shift < 64 {
			v |= uint64(b&0x7f) << shift
		}
		shift += 7
		if b&0x80 == 0 {
			return v
		}
	}
}

func (r *reader) sleb() int64 {
	var v int64
	var shift uint
	for {
		b := r.u8()
		if r.err != nil {
			return 0
		}
		if shift < 64 {
			v |= int64(b&0x7f) << shift
		}
		shift += 7
		if b&0x80 == 0 {
			if shift < 64 && b&0x40 != 0 {
				v |= -1 << shift
			}
			return v
		}
	}
}

func (r *reader) cstring() string {
	for i := r.off; i < len(r.b); i++ {
		if r.b[i] == 0 {
			s := string(r.b[r.off:i])
			r.off = i + 1
			return s
		}
	}
	r.err = errTruncated
	return ""
}

// encoded reads a pointer in encoding enc. base is the virtual address of
// r.b[0] (for pc-relative values).
func (r *reader) encoded(enc byte, base uint64) (uint64, error) {
	if enc == peOmit {
		return 0, nil
	}
	pos := base + uint64(r.off)
	var v uint64
	switch enc & 0x0f {
	case peAbsptr, peUdata8, peSdata8:
		v = r.u64()
	case peUleb128:
		v = r.uleb()
	case peUdata2:
		v = uint64(r.u16())
	case peUdata4:
		v = uint64(r.u32())
	case peSleb128:
		v = uint64(r.sleb())
	case peSdata2:
		v = uint64(int64(int16(r.u16())))
	case peSdata4:
		v = uint64(int64(int32(r.u32())))
	default:
		return 0, fmt.Errorf("unsupported pointer format %#x", enc)
	}
	if r.err != nil {
		return 0, r.err
	}
	switch enc & 0x70 {
	case peAbsptr:
	case pePcrel:
		v += pos
	case peTextrel, peDatarel, peFuncrel:
		// The bases are 0 for x86-64 ELF objects as the GCC unwinder
		// sees them; we never need these for FDE ranges in practice.
	default:
		return 0, fmt.Errorf("unsupported pointer application %#x", enc)
	}
	// 0x80 (indirect) only occurs on personality pointers, which we skip.
	return v, nil
}

// cie is a parsed Common Information Entry.
type cie struct {
	codeAlign uint64
	dataAlign int64
	raReg     uint64
	fdeEnc    byte
	hasAug    bool // augmentation starts with 'z': FDEs carry an augmentation length
	initial   []byte
}

// fde is a parsed Frame Description Entry: the CFA program for [lo, hi).
type fde struct {
	lo, hi uint64
	cie    *cie
	instr  []byte
	base   uint64 // virtual address of instr[0] (for DW_CFA_set_loc pcrel)
}

// cfiTable is the FDE index of one CFI section, sorted by lo.
type cfiTable struct {
	fdes []fde
}

// parseCFI parses a .eh_frame (isEH) or .debug_frame section whose first
// byte is at virtual address addr. It returns every FDE it could parse; a
// malformed entry stops parsing and is reported in the error.
func parseCFI(data []byte, addr uint64, isEH bool) (*cfiTable, error) {
	t := &cfiTable{}
	cies := map[int]*cie{}
	var err error
	off := 0
	for off < len(data) {
		var next int
		next, err = t.parseEntry(data, addr, isEH, off, cies)
		if err != nil || next <= off {
			break
		}
		off = next
	}
	sort.Slice(t.fdes, func(i, j int) bool { return t.fdes[i].lo < t.fdes[j].lo })
	if err != nil {
		return t, fmt.Errorf("parse call frame information at offset %#x: %w", off, err)
	}
	return t, nil
}

// parseEntry parses the CIE or FDE at off and returns the offset of the
// next entry (len(data) at a zero terminator).
func (t *cfiTable) parseEntry(data []byte, addr uint64, isEH bool, off int, cies map[int]*cie) (int, error) {
	r := &reader{b: data, off: off}
	length := uint64(r.u32())
	is64 := false
	if length == 0xffffffff {
		length = r.u64()
		is64 = true
	}
	if r.err != nil {
		return 0, r.err
	}
	if length == 0 {
		if isEH {
			return len(data), nil // terminator
		}
		return r.off, nil
	}
	if length > uint64(len(data)-r.off) {
		return 0, errTruncated
	}
	end := r.off + int(length)
	idPos := r.off
	var id uint64
	if is64 {
		id = r.u64()
	} else {
		id = uint64(r.u32())
	}
	isCIE := id == 0
	if !isEH {
		isCIE = id == 0xffffffff || (is64 && id == ^uint64(0))
	}
	if isCIE {
		return end, nil // CIEs are parsed when an FDE refers to them
	}
	cieOff := int64(id)
	if isEH {
		cieOff = int64(idPos) - int64(id)
	}
	if cieOff < 0 || cieOff >= int64(len(data)) {
		return 0, fmt.Errorf("FDE refers to CIE at invalid offset %d", cieOff)
	}
	c, ok := cies[int(cieOff)]
	if !ok {
		var err error
		c, err = parseCIE(data, addr, isEH, int(cieOff))
		if err != nil {
			return 0, err
		}
		cies[int(cieOff)] = c
	}
	fr := &reader{b: data[:end], off: r.off}
	f, err := parseFDE(fr, c, addr, isEH)
	if err != nil {
		return 0, err
	}
	if f.hi > f.lo {
		t.fdes = append(t.fdes, f)
	}
	return end, nil
}

func parseFDE(r *reader, c *cie, addr uint64, isEH bool) (fde, error) {
	var f fde
	enc := c.fdeEnc
	if !isEH {
		enc = peAbsptr
	}
	lo, err := r.encoded(enc, addr)
	if err != nil {
		return f, err
	}
	n, err := r.encoded(enc&0x0f, addr)
	if err != nil {
		return f, err
	}
	if c.hasAug {
		r.take(int(min(r.uleb(), uint64(len(r.b)))))
	}
	if r.err != nil {
		return f, r.err
	}
	f = fde{lo: lo, hi: lo + n, cie: c, instr: r.b[r.off:], base: addr + uint64(r.off)}
	if f.hi < f.lo {
		f.hi = f.lo
	}
	return f, nil
}

func parseCIE(data []byte, addr uint64, isEH bool, off int) (*cie, error) {
	r := &reader{b: data, off: off}
	length := uint64(r.u32())
	is64 := length == 0xffffffff
	if is64 {
		length = r.u64()
	}
	if r.err != nil || length == 0 || length > uint64(len(data)-r.off) {
		return nil, fmt.Errorf("CIE at %#x: bad length", off)
	}
	r.b = data[:r.off+int(length)]
	if is64 {
		r.u64()
	} else {
		r.u32()
	}
	version := r.u8()
	aug := r.cstring()
	if version >= 4 {
		r.u8() // address size
		r.u8() // segment selector size
	}
	c := &cie{fdeEnc: peAbsptr}
	c.codeAlign = r.uleb()
	c.dataAlign = r.sleb()
	if version == 1 {
		c.raReg = uint64(r.u8())
	} else {
		c.raReg = r.uleb()
	}
	if err := c.parseAugmentation(r, aug, addr); err != nil {
		return nil, fmt.Errorf("CIE at %#x: %w", off, err)
	}
	if r.err != nil {
		return nil, fmt.Errorf("CIE at %#x: %w", off, r.err)
	}
	c.initial = r.b[r.off:]
	return c, nil
}

func (c *cie) parseAugmentation(r *reader, aug string, addr uint64) error {
	if aug == "" {
		return nil
	}
	if aug[0] != 'z' {
		return fmt.Errorf("unsupported augmentation %q", aug)
	}
	c.hasAug = true
	n := r.uleb()
	if r.err != nil || n > uint64(len(r.b)-r.off) {
		return errTruncated
	}
	end := r.off + int(n)
augLoop:
	for _, ch := range aug[1:] {
		switch ch {
		case 'R':
			c.fdeEnc = r.u8()
		case 'L':
			r.u8()
		case 'P':
			if _, err := r.encoded(r.u8()&0x7f, addr); err != nil {
				return err
			}
		case 'S', 'B':
		default:
			break augLoop // unknown: the augmentation length lets us skip the rest
		}
	}
	if r.err != nil {
		return r.err
	}
	r.off = end
	return nil
}

// find returns the FDE covering pc.
func (t *cfiTable) find(pc uint64) (*fde, bool) {
	if t == nil {
		return nil, false
	}
	i := sort.Search(len(t.fdes), func(i int) bool { return t.fdes[i].lo > pc }) - 1
	if i < 0 || pc >= t.fdes[i].hi {
		return nil, false
	}
	return &t.fdes[i], true
}
