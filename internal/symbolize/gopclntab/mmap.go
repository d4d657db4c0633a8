package gopclntab

import (
	"debug/elf"
	"os"
	"sync"

	"github.com/wallprof/wallprof/internal/linux"
)

// The sections a Table reads (.gopclntab, .rodata, the data that holds
// funcdata) are tens of megabytes in a large Go program. Read into the heap
// they are copied once per reader (the symbolizer and the goroutine view
// each open the target's executable) and the garbage collector's headroom
// doubles them. Mapped read-only from the file, they are the page cache's
// pages, shared with the target itself, and only the pages looked at count
// in the recorder's memory.
//
// A mapping is shared by the Tables of a file (the symbolizer and the
// goroutine view each open the target's executable) and unmapped when the
// last of them is closed (Table.Close): a long recording of a machine
// whose programs come and go (the agent) would otherwise keep the sections
// of every Go program that ever ran, and the disk space of those deleted
// since (a test binary). A Table that is never closed keeps its mappings
// for the life of the process. A file rewritten in place while it is
// mapped would fault; programs are replaced by rename, which keeps the old
// inode's pages.

type mapKey struct {
	dev, ino  uint64
	off, size int64
}

type mapping struct {
	b    []byte
	refs int
}

var (
	mapMu  sync.Mutex
	mapped = map[mapKey]*mapping{}
)

// mapSection returns s's bytes mapped from file, with the key to give back
// (unmapSection), or false when they must be read instead (no file, a
// compressed or empty section, a short file, or mmap refused).
func mapSection(file *os.File, s *elf.Section) ([]byte, mapKey, bool) {
	if file == nil || s.Type == elf.SHT_NOBITS || s.Flags&elf.SHF_COMPRESSED != 0 || s.FileSize == 0 || s.FileSize != s.Size {
		return nil, mapKey{}, false
	}
	dev, ino, fileSize, err := linux.FileID(file)
	off, size := int64(s.Offset), int64(s.FileSize)
	if err != nil || off < 0 || off+size > fileSize {
		return nil, mapKey{}, false
	}
	key := mapKey{dev, ino, off, size}
	mapMu.Lock()
	defer mapMu.Unlock()
	if m, ok := mapped[key]; ok {
		m.refs++
		return m.b, key, true
	}
	b, err := linux.MapReadOnly(file, off, size)
	if err != nil {
		return nil, mapKey{}, false
	}
	mapped[key] = &mapping{b: b, refs: 1}
	return b, key, true
}

// unmapSection gives back a reference to the mapping of key, unmapping it
// with the last.
func unmapSection(key mapKey) {
	mapMu.Lock()
	defer mapMu.Unlock()
	m, ok := mapped[key]
	if !ok {
		return
	}
	if m.refs--; m.refs > 0 {
		return
	}
	delete(mapped, key)
	_ = linux.Unmap(m.b)
}

// sectionBytes returns s's bytes: mapped from img's file where it can,
// read otherwise.
func (img *image) sectionBytes(s *elf.Section) ([]byte, error) {
	if b, key, ok := mapSection(img.file, s); ok {
		img.maps = append(img.maps, key)
		return b, nil
	}
	return s.Data()
}
