package goroutines

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// A read is one range of target memory to copy into buf. ok reports
// whether all of it was read.
type read struct {
	addr uint64
	buf  []byte
	ok   bool
}

// memory reads another process's memory without stopping it.
type memory interface {
	// readAll performs every read, setting ok on each; a range that is
	// not mapped fails alone.
	readAll(rs []read)
	// syscalls returns the number of system calls made so far.
	syscalls() int
	close() error
}

// iovMax is the kernel's limit on iovecs per process_vm_readv (UIO_MAXIOV).
const iovMax = 1024

// vmReader uses process_vm_readv(2): one system call for up to iovMax
// ranges.
type vmReader struct {
	pid   int
	calls int
	local []unix.Iovec
	remot []unix.RemoteIovec
}

func (m *vmReader) syscalls() int { return m.calls }
func (m *vmReader) close() error  { return nil }

func (m *vmReader) readAll(rs []read) {
	for len(rs) > 0 {
		n := min(len(rs), iovMax)
		done := m.readBatch(rs[:n])
		rs = rs[done:]
	}
}

// readBatch reads rs (at most iovMax) with one call and returns how many
// ranges it settled: process_vm_readv stops at the first range that fails,
// so that one is marked failed and the caller goes on after it.
func (m *vmReader) readBatch(rs []read) int {
	m.local, m.remot = m.local[:0], m.remot[:0]
	for i := range rs {
		rs[i].ok = false
		if len(rs[i].buf) == 0 {
			rs[i].ok = true
			continue
		}
		m.local = append(m.local, unix.Iovec{Base: &rs[i].buf[0], Len: uint64(len(rs[i].buf))})
		m.remot = append(m.remot, unix.RemoteIovec{Base: uintptr(rs[i].addr), Len: len(rs[i].buf)})
	}
	if len(m.local) == 0 {
		return len(rs)
	}
	m.calls++
	got, err := unix.ProcessVMReadv(m.pid, m.local, m.remot, 0)
	if err != nil {
		got = 0
	}
	for i := range rs {
		if len(rs[i].buf) == 0 {
			continue
		}
		if got >= len(rs[i].buf) {
			got -= len(rs[i].buf)
			rs[i].ok = true
			continue
		}
		return i + 1 // rs[i] failed (or was cut short)
	}
	return len(rs)
}

// fileReader uses pread(2) on /proc/PID/mem: one system call per range.
// It is the fallback where process_vm_readv is not allowed (some seccomp
// profiles).
type fileReader struct {
	f     *os.File
	calls int
}

func (m *fileReader) syscalls() int { return m.calls }
func (m *fileReader) close() error  { return m.f.Close() }

func (m *fileReader) readAll(rs []read) {
	for i := range rs {
		m.calls++
		n, err := m.f.ReadAt(rs[i].buf, int64(rs[i].addr))
		rs[i].ok = err == nil && n == len(rs[i].buf)
	}
}

// openMemory returns a reader of pid's memory: process_vm_readv if a probe
// read of probeAddr works with it, else /proc/PID/mem.
func openMemory(pid int, probeAddr uint64) (memory, error) {
	var probe [8]byte
	vm := &vmReader{pid: pid}
	_, err := unix.ProcessVMReadv(pid,
		[]unix.Iovec{{Base: &probe[0], Len: uint64(len(probe))}},
		[]unix.RemoteIovec{{Base: uintptr(probeAddr), Len: len(probe)}}, 0)
	if err == nil {
		return &merged{inner: vm}, nil
	}
	f, ferr := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if ferr != nil {
		if errors.Is(ferr, os.ErrPermission) || errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("read memory of process %d: %w (run as root or with CAP_SYS_PTRACE)", pid, os.ErrPermission)
		}
		return nil, fmt.Errorf("read memory of process %d: %w", pid, ferr)
	}
	if _, rerr := f.ReadAt(probe[:], int64(probeAddr)); rerr != nil {
		f.Close()
		return nil, fmt.Errorf("read memory of process %d at %#x: process_vm_readv: %v; /proc/%d/mem: %w", pid, probeAddr, err, pid, rerr)
	}
	return &merged{inner: &fileReader{f: f}}, nil
}

// word returns the little-endian 8-byte word at off in b.
func word(b []byte, off int) uint64 {
	if off < 0 || off+8 > len(b) {
		return 0
	}
	return binary.LittleEndian.Uint64(b[off:])
}

// mergeGap is the largest gap between two ranges that merged reads bridge:
// reading a few hundred bytes more costs less than a range more, since the
// kernel pins the target's pages once per range.
const mergeGap = 512

// merged wraps a memory and merges ranges that are close in the target
// (runtime.g structs sit side by side in their spans) into single reads.
// A merged read that fails is retried range by range.
type merged struct {
	inner memory
	idx   []int
	spans []read
	first []int // index in idx of each span's first member
	sizes []int // length of each span
	buf   []byte
}

func (m *merged) syscalls() int { return m.inner.syscalls() }
func (m *merged) close() error  { return m.inner.close() }

func (m *merged) readAll(rs []read) {
	m.idx = m.idx[:0]
	for i := range rs {
		rs[i].ok = len(rs[i].buf) == 0
		if !rs[i].ok {
			m.idx = append(m.idx, i)
		}
	}
	slices.SortFunc(m.idx, func(a, b int) int { return cmp.Compare(rs[a].addr, rs[b].addr) })
	m.spans, m.first, m.sizes = m.spans[:0], m.first[:0], m.sizes[:0]
	var lo, hi uint64
	total := 0
	for k, i := range m.idx {
		a, e := rs[i].addr, rs[i].addr+uint64(len(rs[i].buf))
		if k > 0 && a <= hi+mergeGap {
			hi = max(hi, e)
			continue
		}
		if k > 0 {
			m.spans = append(m.spans, read{addr: lo, buf: nil})
			m.sizes = append(m.sizes, int(hi-lo))
			total += int(hi - lo)
		}
		lo, hi = a, e
		m.first = append(m.first, k)
	}
	if len(m.idx) > 0 {
		m.spans = append(m.spans, read{addr: lo, buf: nil})
		m.sizes = append(m.sizes, int(hi-lo))
		total += int(hi - lo)
	}
	// Carve the span buffers out of one reused buffer.
	m.buf = grow(m.buf, total)
	off := 0
	for s := range m.spans {
		n := m.sizes[s]
		m.spans[s].buf = m.buf[off : off+n : off+n]
		off += n
	}
	m.inner.readAll(m.spans)
	m.first = append(m.first, len(m.idx))
	for s, sp := range m.spans {
		members := m.idx[m.first[s]:m.first[s+1]]
		if !sp.ok {
			sub := make([]read, len(members))
			for j, i := range members {
				sub[j] = read{addr: rs[i].addr, buf: rs[i].buf}
			}
			m.inner.readAll(sub)
			for j, i := range members {
				rs[i].ok = sub[j].ok
			}
			continue
		}
		for _, i := range members {
			copy(rs[i].buf, sp.buf[rs[i].addr-sp.addr:])
			rs[i].ok = true
		}
	}
}
