package collect

import (
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// ringWait parks the goroutine that reads the ring buffer in the Go
// runtime's network poller until the programs wake the ring's readers, a
// deadline passes, or wake is called.
//
// The ring reader's own wait (ringbuf.Reader) is an epoll_wait in a system
// call the runtime sees: blocked there 10 ms or more, its P is taken by
// sysmon, which then polls every 20 µs for 20 ms. Reading every 100 ms (a
// launched command, the goroutine view), that was half of sysmon's
// wake-ups, a thousand a second, recording a ping-pong. Parked in the
// poller, the goroutine holds no P and is in no system call; the ring's
// file is in the poller's epoll set, as it is in the reader's.
type ringWait struct {
	f     *os.File // a duplicate of the ring's file descriptor, non-blocking
	rc    syscall.RawConn
	woken atomic.Bool
}

// newRingWait returns nil where the ring's file cannot be polled by the
// runtime: the reader then waits in its own epoll_wait.
func newRingWait(ring *ebpf.Map) *ringWait {
	fd, err := unix.FcntlInt(uintptr(ring.FD()), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	// O_NONBLOCK is the open file's, shared with the map's descriptor:
	// nothing done with that one (bpf(2), mmap, epoll) reads it.
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil
	}
	f := os.NewFile(uintptr(fd), "wallprof-ringbuf")
	// A file the poller refused has no deadlines.
	if f.SetReadDeadline(time.Time{}) != nil {
		f.Close()
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil
	}
	return &ringWait{f: f, rc: rc}
}

// wait returns at deadline, when the programs wake the ring's readers, or
// when wake is called (since the last wait returned). full reports a ring
// filled past the mark at which the programs wake the readers: a wake-up
// that came between the caller's last read and this wait is not seen by
// the poller, whose readiness the wait resets.
func (w *ringWait) wait(deadline time.Time, full func() bool) {
	if w.f.SetReadDeadline(deadline) != nil {
		return
	}
	first := true
	_ = w.rc.Read(func(uintptr) bool {
		if first {
			first = false
			return w.woken.Load() || full()
		}
		return true // the poller saw the ring readable
	})
	w.woken.Store(false)
}

// wake ends the current or next wait.
func (w *ringWait) wake() {
	w.woken.Store(true)
	_ = w.f.SetReadDeadline(time.Now())
}

func (w *ringWait) close() { _ = w.f.Close() }
