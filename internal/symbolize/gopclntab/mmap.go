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
// Mappings are kept until the process exits, one per section of a file
// (by device and inode): a Table's slices of them may be held by its
// callers, so they are never unmapped. A file rewritten in place while it is
// mapped would fault; programs are replaced by rename, which keeps the old
// inode's pages.

type mapKey struct {
	dev, ino  uint64
	off, size int64
}

var (
	mapMu  sync.Mutex
	mapped = map[mapKey][]byte{}
)

// mapSection returns s's bytes mapped from file, or false when they must be
// read instead (no file, a compressed or empty section, a short file, or
// mmap refused).
func mapSection(file *os.File, s *elf.Section) ([]byte, bool) {
	if file == nil || s.Type == elf.SHT_NOBITS || s.Flags&elf.SHF_COMPRESSED != 0 || s.FileSize == 0 || s.FileSize != s.Size {
		return nil, false
	}
	dev, ino, fileSize, err := linux.FileID(file)
	off, size := int64(s.Offset), int64(s.FileSize)
	if err != nil || off < 0 || off+size > fileSize {
		return nil, false
	}
	key := mapKey{dev, ino, off, size}
	mapMu.Lock()
	defer mapMu.Unlock()
	if b, ok := mapped[key]; ok {
		return b, true
	}
	b, err := linux.MapReadOnly(file, off, size)
	if err != nil {
		return nil, false
	}
	mapped[key] = b
	return b, true
}

// sectionBytes returns s's bytes: mapped from img's file where it can,
// read otherwise.
func (img *image) sectionBytes(s *elf.Section) ([]byte, error) {
	if b, ok := mapSection(img.file, s); ok {
		return b, nil
	}
	return s.Data()
}
