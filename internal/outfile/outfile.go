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
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
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
// beside it. It checks the exact path too, so that a command fails before
// its work rather than at the rename: an existing directory, or an
// existing file that cannot be written (read-only, immutable), is an
// error. Temporary files of the same name left by processes that no
// longer run (killed with SIGKILL) are removed. Its error is an
// *os.PathError.
func Create(path string) (*File, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	removeStale(path)
	tmp, err := os.CreateTemp(filepath.Dir(path), tmpPrefix(path)+"*.tmp")
	if err != nil {
		return nil, err
	}
	return &File{path: path, tmp: tmp, w: bufio.NewWriterSize(tmp, 64<<10)}, nil
}

// tmpPrefix starts the names of path's temporary files: the file's name
// and the writing process's PID, so that a temporary file whose process is
// gone can be told and removed ('.app.pb.gz.1234.567890.tmp').
func tmpPrefix(path string) string {
	return fmt.Sprintf(".%s.%d.", filepath.Base(path), os.Getpid())
}

// checkPath fails when path is an existing directory or a file that
// cannot be opened for writing.
func checkPath(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return nil // absent (or its directory is: CreateTemp says so)
	}
	if fi.IsDir() {
		return &os.PathError{Op: "create", Path: path, Err: errors.New("is a directory")}
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	f.Close()
	// Renaming over a file needs the file not to be immutable or
	// append-only: open for writing has just refused those.
	return nil
}

// removeStale removes the temporary files of path whose writer no longer
// runs. Errors are ignored: the files are only clutter.
func removeStale(path string) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	names, _ := filepath.Glob(filepath.Join(dir, "."+globEscape(base)+".*.tmp"))
	for _, n := range names {
		rest := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(n), "."+base+"."), ".tmp")
		pidStr, _, ok := strings.Cut(rest, ".")
		if !ok {
			continue
		}
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid <= 0 || pid == os.Getpid() || processRuns(pid) {
			continue
		}
		os.Remove(n)
	}
}

// globEscape quotes the characters filepath.Match treats specially.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
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

// processRuns reports whether process pid exists. Where that cannot be
// told without a system call (not Linux), it says yes: every temporary
// file is kept.
func processRuns(pid int) bool {
	if runtime.GOOS != "linux" {
		return true
	}
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return err == nil
}
