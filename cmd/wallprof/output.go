package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"

	"github.com/wallprof/wallprof/internal/outfile"
)

// profileOut is where a profile or a summary goes: a file written
// atomically (internal/outfile), or stdout.
type profileOut interface {
	io.Writer
	Commit() error
	Abandon()
}

// createOutput opens path for writing, or stdout for "-".
func createOutput(path string, stdout io.Writer) (profileOut, error) {
	if path == "-" {
		return &stdoutOut{w: bufio.NewWriterSize(stdout, 64<<10)}, nil
	}
	return outfile.Create(path)
}

// stdoutOut writes to stdout; Commit flushes.
type stdoutOut struct{ w *bufio.Writer }

func (o *stdoutOut) Write(p []byte) (int, error) { return o.w.Write(p) }
func (o *stdoutOut) Commit() error               { return o.w.Flush() }
func (o *stdoutOut) Abandon()                    {}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

func writeJSON(w io.Writer, v any) error {
	e := json.NewEncoder(w)
	e.SetIndent("", "  ")
	return e.Encode(v)
}
