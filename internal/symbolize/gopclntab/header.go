package gopclntab

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// version identifies a pclntab layout. Layouts are named after the first Go
// release that wrote them (see debug/gosym/pclntab.go and
// cmd/link/internal/ld/pcln.go).
type version int

const (
	ver116 version = iota + 1 // Go 1.16, 1.17: absolute entry pcs, funcdata are pointers
	ver118                    // Go 1.18, 1.19: entry offsets from textStart, funcdata offsets from moduledata.gofunc
	ver120                    // Go 1.20+: _func.startLine, new inlinedCall layout
)

// The magic numbers, as read in the table's own byte order.
const (
	magic116 = 0xfffffffa
	magic118 = 0xfffffff0
	magic120 = 0xfffffff1
)

// header is the decoded runtime.pcHeader plus the tables it points to, each
// a sub-slice of the section data running to the end of the section.
type header struct {
	ver       version
	order     binary.ByteOrder
	quantum   uint64
	ptrSize   int
	nfunc     int
	textStart uint64 // as stored: absent before 1.18, zero from 1.26 on

	pclnOff     uint64 // offset of pclntable (and ftab) in the section
	funcnametab []byte
	cutab       []byte
	filetab     []byte
	pctab       []byte
	pclntab     []byte // starts with the functab
}

var errTruncated = errors.New("truncated .gopclntab")

// parseHeader decodes the pcHeader at the start of data.
func parseHeader(data []byte) (header, error) {
	var h header
	if len(data) < 8 {
		return h, fmt.Errorf("%w: %w", ErrNotGo, errTruncated)
	}
	le, be := binary.LittleEndian.Uint32(data), binary.BigEndian.Uint32(data)
	switch {
	case le == magic116 || le == magic118 || le == magic120:
		h.order = binary.LittleEndian
	case be == magic116 || be == magic118 || be == magic120:
		h.order = binary.BigEndian
	default:
		return h, fmt.Errorf("%w: unsupported pclntab magic %#x", ErrNotGo, le)
	}
	switch h.order.Uint32(data) {
	case magic116:
		h.ver = ver116
	case magic118:
		h.ver = ver118
	default:
		h.ver = ver120
	}
	if data[4] != 0 || data[5] != 0 {
		return h, fmt.Errorf("%w: bad pclntab header padding", ErrNotGo)
	}
	h.quantum = uint64(data[6])
	h.ptrSize = int(data[7])
	if h.quantum == 0 || (h.ptrSize != 4 && h.ptrSize != 8) {
		return h, fmt.Errorf("%w: bad pclntab quantum %d or pointer size %d", ErrNotGo, h.quantum, h.ptrSize)
	}
	return h, h.parseWords(data)
}

// parseWords decodes the pointer-sized fields that follow the first 8 bytes.
func (h *header) parseWords(data []byte) error {
	nwords := 7
	if h.ver >= ver118 {
		nwords = 8 // textStart
	}
	if len(data) < 8+nwords*h.ptrSize {
		return errTruncated
	}
	w := make([]uint64, nwords)
	for i := range w {
		w[i] = readWord(data[8+i*h.ptrSize:], h.order, h.ptrSize)
	}
	nfunc, offs := w[0], w[2:]
	if h.ver >= ver118 {
		h.textStart = w[2]
		offs = w[3:]
	}
	size := uint64(len(data))
	for _, o := range offs {
		if o > size {
			return fmt.Errorf("pclntab table offset %#x beyond section size %#x: %w", o, size, errTruncated)
		}
	}
	h.funcnametab = data[offs[0]:]
	h.cutab = data[offs[1]:]
	h.filetab = data[offs[2]:]
	h.pctab = data[offs[3]:]
	h.pclntab = data[offs[4]:]
	h.pclnOff = offs[4]
	if nfunc >= size || (nfunc+1)*uint64(h.ftabEntrySize()) > uint64(len(h.pclntab)) {
		return fmt.Errorf("function table of %d entries does not fit: %w", nfunc, errTruncated)
	}
	h.nfunc = int(nfunc)
	return nil
}

// ftabEntrySize is the size of one functab entry.
func (h *header) ftabEntrySize() int {
	if h.ver == ver116 {
		return 2 * h.ptrSize
	}
	return 8
}

// readWord reads a size-byte unsigned integer; b must be long enough.
func readWord(b []byte, order binary.ByteOrder, size int) uint64 {
	if size == 4 {
		return uint64(order.Uint32(b))
	}
	return order.Uint64(b)
}
