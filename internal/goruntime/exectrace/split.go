package exectrace

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"unsafe"

	"golang.org/x/exp/trace"
)

// The parser (golang.org/x/exp/trace) reads a whole generation before it
// hands out its events, and it reads the next generation while it still
// holds the previous one: its memory peaks at both generations at once.
// genEvents gives it the trace one generation at a time instead, a new
// Reader for each, so that a generation is garbage once its events are
// read. A trace's generations are self-contained (each starts with the
// state of the goroutines and procs it names: that is what lets the
// flight recorder cut a trace at any generation), so the events are the
// same; genEvents drops the Sync event each Reader ends with (but the
// last), and the analyser redoes the Reader's timestamp fix-up across
// generations (analyzer.time), so that what it sees is what a single
// Reader would have given.

// Batch header bytes (golang.org/x/exp/trace/internal/tracev2).
const (
	evEventBatch        = 1
	evExperimentalBatch = 49
	evEndOfGeneration   = 52 // Go 1.26 on
)

// genSplitter passes the trace's header and then its batches of one
// generation, and then io.EOF, until the next generation is started.
// When it cannot follow the batch headers it passes everything that is
// left, and the parser says what is wrong.
//
// It also spares the parser a copy: the parser reads each batch with
// io.CopyN into a bytes.Buffer grown to the batch's size, whose ReadFrom
// grows it again, to twice the size, to find out that the batch has
// ended; so a generation would take twice its size in memory. When the
// parser's bufio.Reader, empty, asks for exactly the rest of a batch
// straight into that buffer (a batch longer than its 4096-byte buffer),
// the splitter fills it in full and returns io.EOF with it: ReadFrom
// stops there, and bufio.Reader hands the io.EOF to its caller and
// forgets it. Reads into the bufio.Reader's own buffer never get io.EOF
// with data (the parser would take it for the end of the trace); the
// splitter knows that buffer's address.
type genSplitter struct {
	br      *bufio.Reader
	version int    // Go 1.N
	pre     []byte // the trace's header, still to pass
	gen     uint64 // the generation passed, 0 before its first batch
	left    int64  // bytes of the current batch still to pass
	size    int64  // of which its data (after the header)
	end     bool   // the generation ends after the current batch
	through bool   // pass everything
	// bufLo, bufHi: the parser's bufio.Reader's buffer.
	bufLo, bufHi uintptr
}

func (s *genSplitter) Read(p []byte) (int, error) {
	if len(s.pre) > 0 {
		n := copy(p, s.pre)
		s.pre = s.pre[n:]
		return n, nil
	}
	if s.through {
		return s.br.Read(p)
	}
	if s.left == 0 {
		if s.end {
			return 0, io.EOF
		}
		if !s.header() {
			if s.end {
				return 0, io.EOF
			}
			return s.br.Read(p)
		}
	}
	if s.left > s.size {
		// The batch header: on its own, so that the parser's buffer is
		// empty when it reads the data.
		n, err := s.br.Read(p[:min(int64(len(p)), s.left-s.size)])
		s.left -= int64(n)
		return n, err
	}
	if int64(len(p)) == s.left && !s.inParserBuf(p) {
		n, err := io.ReadFull(s.br, p)
		s.left -= int64(n)
		switch {
		case err == nil:
			return n, io.EOF // the end of the batch: see genSplitter
		case n > 0:
			return n, nil // cut short: the next read says so
		}
		return 0, io.EOF
	}
	n, err := s.br.Read(p[:min(int64(len(p)), s.left)])
	s.left -= int64(n)
	return n, err
}

// inParserBuf says whether p is in the buffer of the parser's bufio.Reader.
func (s *genSplitter) inParserBuf(p []byte) bool {
	a := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	return s.bufHi == 0 || a >= s.bufLo && a < s.bufHi
}

// header reads the next batch header, without consuming it, and sets
// left to the size of the batch, or end at the generation's end. It
// returns false when there is no header to follow (end of input, or
// something the parser will complain about), with through set unless
// the generation ended.
func (s *genSplitter) header() bool {
	h, _ := s.br.Peek(2 + 4*binary.MaxVarintLen64)
	if len(h) == 0 {
		s.end = true // the end of the trace
		return false
	}
	switch {
	case h[0] == evEndOfGeneration && s.version >= 26:
		s.left, s.size, s.end = 1, 0, true
		return true
	case h[0] == evEventBatch || h[0] == evExperimentalBatch:
		off := 1
		if h[0] == evExperimentalBatch {
			off++
		}
		var v [4]uint64 // generation, M, time, size
		for i := range v {
			if off > len(h) {
				s.through = true
				return false
			}
			x, n := binary.Uvarint(h[off:])
			if n <= 0 {
				s.through = true
				return false
			}
			v[i], off = x, off+n
		}
		if s.gen == 0 {
			s.gen = v[0]
		} else if v[0] != s.gen && s.version < 26 {
			// Before Go 1.26 a generation ends where the next begins.
			s.end = true
			return false
		}
		s.left, s.size = int64(off)+int64(v[3]), int64(v[3])
		return true
	}
	s.through = true
	return false
}

// genEvents reads a trace's events with one Reader per generation.
type genEvents struct {
	s      *genSplitter
	header []byte // the trace's header, for each Reader
	tr     *trace.Reader
	n      int          // events read from tr
	held   *trace.Event // a Sync that may end the trace, or only tr
	err    error        // the error after held
}

func newGenEvents(br *bufio.Reader, version int) (*genEvents, error) {
	h, err := br.Peek(16)
	if err != nil {
		return nil, err
	}
	g := &genEvents{s: &genSplitter{br: br, version: version}, header: bytes.Clone(h)}
	if _, err := br.Discard(16); err != nil {
		return nil, err
	}
	g.tr, err = g.reader()
	return g, err
}

func (g *genEvents) reader() (*trace.Reader, error) {
	g.n = 0
	s := g.s
	s.pre, s.bufLo, s.bufHi = g.header, 0, 0
	// trace.NewReader uses a *bufio.Reader of 4096 bytes or more as it is.
	pbr := bufio.NewReaderSize(s, 4096)
	h, err := pbr.Peek(len(g.header)) // the header, at the start of its buffer
	if err != nil {
		return nil, err
	}
	s.bufLo = uintptr(unsafe.Pointer(unsafe.SliceData(h)))
	s.bufHi = s.bufLo + uintptr(cap(h))
	return trace.NewReader(pbr)
}

// read reads the next event into dst (an Event is 100 bytes: not copied
// more than needed), as trace.Reader.ReadEvent does.
func (g *genEvents) read(dst *trace.Event) error {
	if g.held != nil {
		*dst = *g.held
		g.held = nil
		return nil
	}
	if g.err != nil {
		return g.err
	}
	for {
		var err error
		*dst, err = g.tr.ReadEvent()
		if err != nil {
			if err == io.EOF {
				if ok, err := g.nextReader(); err != nil || ok {
					if err != nil {
						return err
					}
					continue
				}
			}
			return err
		}
		g.n++
		if g.n > 1 && dst.Kind() == trace.EventSync {
			// A Reader's last event, before io.EOF or an error: the end of
			// the trace, or only of this generation (then dropped).
			next, err := g.tr.ReadEvent()
			if err == io.EOF {
				ok, nerr := g.nextReader()
				if ok {
					continue
				}
				if nerr != nil {
					err = nerr
				}
			}
			if err != nil {
				g.err = err
			} else {
				g.n++
				g.held = &next
			}
		}
		return nil
	}
}

// nextReader starts a Reader for the next generation, if there is one.
func (g *genEvents) nextReader() (bool, error) {
	if g.s.through {
		return false, nil
	}
	if _, err := g.s.br.Peek(1); err != nil {
		return false, nil
	}
	g.s.gen, g.s.end = 0, false
	tr, err := g.reader()
	if err != nil {
		return false, err
	}
	g.tr = tr
	return true, nil
}
