package agent

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/wallprof/wallprof/internal/agent/push"
)

// Spool is a sink's queue of requests not yet sent, oldest first, bounded
// in bytes: adding past the bound drops the oldest requests (never the one
// being sent) and counts them. With a directory, each request is a file
// there (written whole, then renamed), so that what was not sent when the
// agent stopped is sent when it starts again, once: a file is removed when
// its request has been sent. Without one, requests are kept in memory.
type Spool struct {
	dir string
	max int64

	mu       sync.Mutex
	items    []*spooled // oldest first
	bytes    int64
	next     uint64
	inflight uint64 // the id being sent, 0 if none
	dropped  uint64
}

type spooled struct {
	id   uint64
	size int64
	req  *push.Request // in memory, or nil: read from the file
}

const spoolExt = ".wpush"

// OpenSpool opens the spool in dir ("": in memory), bounded to max bytes,
// with the requests a previous agent left there.
func OpenSpool(dir string, limit int64) (*Spool, error) {
	s := &Spool{dir: dir, max: limit, next: 1}
	if dir == "" {
		return s, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasSuffix(name, ".tmp") {
			os.Remove(filepath.Join(dir, name)) // a write the previous agent did not finish
			continue
		}
		id, err := strconv.ParseUint(strings.TrimSuffix(name, spoolExt), 10, 64)
		if err != nil || !strings.HasSuffix(name, spoolExt) {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		s.items = append(s.items, &spooled{id: id, size: info.Size()})
		s.bytes += info.Size()
		s.next = max(s.next, id+1)
	}
	sort.Slice(s.items, func(i, j int) bool { return s.items[i].id < s.items[j].id })
	s.trim()
	return s, nil
}

func (s *Spool) path(id uint64) string {
	return filepath.Join(s.dir, fmt.Sprintf("%020d%s", id, spoolExt))
}

type spoolHeader struct {
	Path        string `json:"path"`
	Query       string `json:"query,omitempty"`
	ContentType string `json:"content_type"`
}

// Add queues r and returns how many requests were dropped to make room
// (r itself, when it is larger than the bound).
func (s *Spool) Add(r push.Request) (dropped int, err error) {
	size := int64(len(r.Body) + len(r.Query) + len(r.Path) + len(r.ContentType) + 64)
	s.mu.Lock()
	id := s.next
	s.next++
	s.mu.Unlock()
	if size > s.max {
		s.mu.Lock()
		s.dropped++
		s.mu.Unlock()
		return 1, nil
	}
	it := &spooled{id: id, size: size}
	if s.dir == "" {
		it.req = &r
	} else if it.size, err = s.write(id, r); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.items = append(s.items, it)
	s.bytes += it.size
	return s.trim(), nil
}

// write writes r to its file, whole or not at all.
func (s *Spool) write(id uint64, r push.Request) (int64, error) {
	f, err := os.CreateTemp(s.dir, "."+strconv.FormatUint(id, 10)+".*.tmp")
	if err != nil {
		return 0, fmt.Errorf("spool: %w", err)
	}
	h, _ := json.Marshal(spoolHeader{Path: r.Path, Query: r.Query, ContentType: r.ContentType})
	w := bufio.NewWriter(f)
	w.Write(h)
	w.WriteByte('\n')
	w.Write(r.Body)
	err = w.Flush()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), s.path(id))
	}
	if err != nil {
		os.Remove(f.Name())
		return 0, fmt.Errorf("spool: %w", err)
	}
	return int64(len(h) + 1 + len(r.Body)), nil
}

// trim drops the oldest requests, not the one in flight, until the spool
// fits its bound; it returns how many. s.mu is held.
func (s *Spool) trim() int {
	n := 0
	for i := 0; s.bytes > s.max && i < len(s.items); {
		it := s.items[i]
		if it.id == s.inflight {
			i++
			continue
		}
		s.remove(i)
		n++
	}
	s.dropped += uint64(n)
	return n
}

func (s *Spool) remove(i int) {
	it := s.items[i]
	s.items = append(s.items[:i], s.items[i+1:]...)
	s.bytes -= it.size
	if s.dir != "" {
		os.Remove(s.path(it.id))
	}
}

// Next returns the oldest request, now in flight until Done or Release;
// ok is false when the spool is empty. A file that cannot be read is
// dropped (and counted).
func (s *Spool) Next() (id uint64, r push.Request, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.items) > 0 {
		it := s.items[0]
		if it.req != nil {
			s.inflight = it.id
			return it.id, *it.req, true
		}
		r, err := s.read(it.id)
		if err == nil {
			s.inflight = it.id
			return it.id, r, true
		}
		s.remove(0)
		s.dropped++
	}
	return 0, push.Request{}, false
}

func (s *Spool) read(id uint64) (push.Request, error) {
	b, err := os.ReadFile(s.path(id))
	if err != nil {
		return push.Request{}, err
	}
	i := strings.IndexByte(string(b[:min(len(b), 64<<10)]), '\n')
	if i < 0 {
		return push.Request{}, io.ErrUnexpectedEOF
	}
	var h spoolHeader
	if err := json.Unmarshal(b[:i], &h); err != nil {
		return push.Request{}, err
	}
	if h.Path == "" {
		return push.Request{}, errors.New("no path")
	}
	return push.Request{Path: h.Path, Query: h.Query, ContentType: h.ContentType, Body: b[i+1:]}, nil
}

// Done removes request id: it was sent, or will never be.
func (s *Spool) Done(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight == id {
		s.inflight = 0
	}
	for i, it := range s.items {
		if it.id == id {
			s.remove(i)
			return
		}
	}
}

// Release puts request id back: it will be sent again.
func (s *Spool) Release(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inflight == id {
		s.inflight = 0
	}
	s.trim()
}

// Len and Bytes are what the spool holds; Dropped counts the requests
// dropped since it was opened.
func (s *Spool) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.items)
}

// Bytes is the size of what the spool holds.
func (s *Spool) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// Dropped counts the requests dropped since the spool was opened.
func (s *Spool) Dropped() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dropped
}
