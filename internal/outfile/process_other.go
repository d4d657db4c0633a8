//go:build !unix

package outfile

// processRuns cannot tell here: every temporary file is kept.
func processRuns(int) bool { return true }
