//go:build unix

package outfile

import (
	"errors"
	"syscall"
)

// processRuns reports whether process pid exists (it may be another
// user's: EPERM says it exists too).
func processRuns(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
