// Package outfile writes wallprof's output files atomically: a file is
// written under a temporary name in its destination directory and renamed
// to its name only when complete, so that a failed or interrupted command
// never leaves a half-written file, and a file it replaces stays whole
// until the new one is.
//
// Every command that writes an output file goes through it: Create early
// (it checks that the destination is writable), write, then Commit, or
// Abandon on failure. Abandon after Commit does nothing, so
// 'defer f.Abandon()' is the usual pattern. Files are not fsynced: the
// rename is atomic for readers, not across a crash.
package outfile

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
)

// Mode is the permission of a committed file.
const Mode = 0o644

// File is an output file being written. It is an io.Writer (buffered).
type File struct {
	path string
	tmp  *os.File
	w    *bufio.Writer
}

// Create starts writing the file at path: it creates a temporary file
// beside it. Its error is the one os.CreateTemp returns (an *os.PathError).
func Create(path string) (*File, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, err
	}
	return &File{path: path, tmp: tmp, w: bufio.NewWriterSize(tmp, 64<<10)}, nil
}

// Path is the file's final name.
func (f *File) Path() string { return f.path }

// Write writes to the temporary file.
func (f *File) Write(p []byte) (int, error) { return f.w.Write(p) }

// Commit flushes and closes the temporary file and renames it to its
// final name. After an error the temporary file is removed.
func (f *File) Commit() error {
	if f.tmp == nil {
		return os.ErrClosed
	}
	err := f.w.Flush()
	if cerr := f.tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.tmp.Name(), Mode)
	}
	if err == nil {
		err = os.Rename(f.tmp.Name(), f.path)
	}
	if err != nil {
		os.Remove(f.tmp.Name())
	}
	f.tmp = nil
	return err
}

// Abandon closes and removes the temporary file, unless the file was
// committed.
func (f *File) Abandon() {
	if f.tmp == nil {
		return
	}
	f.tmp.Close()
	os.Remove(f.tmp.Name())
	f.tmp = nil
}

// Write writes the file at path with write, atomically: the file appears
// complete or not at all.
func Write(path string, write func(io.Writer) error) error {
	f, err := Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Abandon()
		return err
	}
	return f.Commit()
}
