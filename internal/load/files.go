package load

import (
	"fmt"
	"syscall"
)

// filesSlack covers the descriptors besides the connections: standard
// streams, the poller, files of the program.
const filesSlack = 64

// FilesNeeded estimates how many open files the load needs: one connection
// per worker in the closed model; in the open model, one per request in
// flight, assuming responses within a second (rate × 1s), capped by
// Concurrency when given.
func FilesNeeded(o Options) uint64 {
	n := uint64(o.Concurrency)
	if o.Rate > 0 {
		n = uint64(o.Rate + 0.5)
		if o.Concurrency > 0 {
			n = min(n, uint64(o.Concurrency))
		}
	}
	return n + filesSlack
}

// FileLimit is the outcome of RaiseFileLimit.
type FileLimit struct {
	Needed uint64 // what was asked for
	Before uint64 // the soft limit found
	After  uint64 // the soft limit now
	Hard   uint64 // the hard limit now
}

// Enough reports whether the soft limit now covers the need.
func (l FileLimit) Enough() bool { return l.After >= l.Needed }

// Advice is one sentence telling the user how to get enough open files, or
// "" when the limit is enough.
func (l FileLimit) Advice() string {
	if l.Enough() {
		return ""
	}
	return fmt.Sprintf("this load may need %d open files but the limit is %d (hard limit %d): run 'ulimit -n %d' in this shell first (above the hard limit only root can), or run as root.",
		l.Needed, l.After, l.Hard, l.Needed)
}

// RaiseFileLimit raises RLIMIT_NOFILE's soft limit towards need: to need
// when the hard limit allows it, else to the hard limit, after trying to
// raise the hard limit too (which only privileged processes can). It never
// lowers a limit. The error is that of getrlimit; a refused raise is not an
// error but shows in the result (see Enough and Advice).
func RaiseFileLimit(need uint64) (FileLimit, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return FileLimit{}, fmt.Errorf("getrlimit RLIMIT_NOFILE: %w", err)
	}
	l := FileLimit{Needed: need, Before: rl.Cur, After: rl.Cur, Hard: rl.Max}
	if rl.Cur >= need {
		return l, nil
	}
	if rl.Max < need {
		up := syscall.Rlimit{Cur: need, Max: need}
		if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &up) == nil {
			l.After, l.Hard = need, need
			return l, nil
		}
	}
	want := syscall.Rlimit{Cur: min(need, rl.Max), Max: rl.Max}
	if syscall.Setrlimit(syscall.RLIMIT_NOFILE, &want) == nil {
		l.After = want.Cur
	}
	return l, nil
}
