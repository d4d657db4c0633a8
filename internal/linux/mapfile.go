package linux

import (
	"errors"
	"os"
	"unsafe"

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
// with the page cache. Touching it after the file was truncated
// below off+size faults; callers check the size first (FileID). Unmap
// unmaps it.
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

// Unmap unmaps b, a mapping MapReadOnly made (its page-aligned start is
// found again from b's address).
func Unmap(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	page := uintptr(os.Getpagesize())
	head := int(uintptr(unsafe.Pointer(&b[0])) & (page - 1))
	start := unsafe.Add(unsafe.Pointer(&b[0]), -head)
	return unix.Munmap(unsafe.Slice((*byte)(start), head+cap(b)))
}
