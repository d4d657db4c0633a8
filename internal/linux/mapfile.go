package linux

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// FileID returns the device, inode and size of the open file f.
func FileID(f *os.File) (dev, ino uint64, size int64, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0, 0, 0, err
	}
	return uint64(st.Dev), st.Ino, st.Size, nil
}

// MapReadOnly maps size bytes of f from offset off, read-only and shared
// with the page cache. The mapping is never unmapped: the caller keeps it
// for the life of the process. Touching it after the file was truncated
// below off+size faults; callers check the size first (FileID).
func MapReadOnly(f *os.File, off, size int64) ([]byte, error) {
	if off < 0 || size <= 0 || size > 1<<31 {
		return nil, errors.New("mapping out of range")
	}
	page := int64(os.Getpagesize())
	start := off &^ (page - 1)
	b, err := unix.Mmap(int(f.Fd()), start, int(off-start+size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	return b[off-start : off-start+size : off-start+size], nil
}
