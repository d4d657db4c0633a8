package linux

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Program says which program a process runs, under two names: the path it
// was run as and the file that path leads to. They differ when it was run
// through a symlink: Debian's /usr/bin/redis-server is a link to
// redis-check-rdb, and a process started as redis-server has
// /usr/bin/redis-check-rdb in /proc/PID/exe and /proc/PID/maps.
type Program struct {
	// Path is the path the program was run as, in the process's mount
	// namespace: the launched path, or the one an attached process's
	// argv[0] or comm leads to. It is Exe when no such name is found.
	Path string
	// Exe is the executable file as /proc/PID/exe and /proc/PID/maps name
	// it, symlinks resolved: the name its mappings have.
	Exe string
}

// ReadProgram returns the program a running process was started as. The
// kernel keeps only the resolved file (/proc/PID/exe), so the path run is
// found from what the process was called: its argv[0] (/proc/PID/cmdline;
// with a rewritten process title such as "redis-server *:6379", its first
// word) and its comm (/proc/PID/comm, the base name execve was given, at
// most 15 bytes), looked up as the shell would have (a name with a slash
// from the process's working directory, a bare name in the directories of
// its PATH and in the executable's own directory). A candidate counts only
// if it is the very file the process executes (same device and inode), so
// the answer is never a different program of the same name; when none is,
// Path is Exe.
func ReadProgram(pid int) (Program, error) {
	proc := fmt.Sprintf("/proc/%d", pid)
	exe, err := os.Readlink(proc + "/exe")
	if err != nil {
		return Program{}, fmt.Errorf("read the executable of process %d: %w", pid, err)
	}
	prog := Program{Path: exe, Exe: exe}
	exeInfo, err := os.Stat(proc + "/exe")
	if err != nil {
		return prog, nil
	}
	var argv0 string
	if b, err := os.ReadFile(proc + "/cmdline"); err == nil {
		argv0, _, _ = strings.Cut(string(b), "\x00")
	}
	comm, _ := os.ReadFile(proc + "/comm")
	cwd, _ := os.Readlink(proc + "/cwd")
	var dirs []string
	if env, err := os.ReadFile(proc + "/environ"); err == nil {
		dirs = pathDirs(env)
	}
	for _, c := range runPaths(argv0, strings.TrimSpace(string(comm)), cwd, exe, dirs) {
		// The process's files are seen through its root (containers).
		if fi, err := os.Stat(proc + "/root" + c); err == nil && os.SameFile(fi, exeInfo) {
			prog.Path = c
			break
		}
	}
	return prog, nil
}

// ProgramAt returns the program a command launched as path runs: Path is
// path made absolute, Exe that path with every symlink resolved, as the
// kernel will name its mappings.
func ProgramAt(path string) (Program, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Program{}, fmt.Errorf("program %s: %w", path, err)
	}
	exe, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return Program{}, fmt.Errorf("program %s: %w", path, err)
	}
	return Program{Path: abs, Exe: exe}, nil
}

// runPaths lists, in order of preference, the absolute paths a process
// may have been run as, from its argv[0], its comm, its working directory,
// its executable and the directories of its PATH. Each is only a
// candidate: the caller checks that it leads to the executable.
func runPaths(argv0, comm, cwd, exe string, pathDirs []string) []string {
	names := []string{argv0}
	if f := strings.Fields(argv0); len(f) > 0 && f[0] != argv0 {
		names = append(names, f[0]) // a rewritten title: "redis-server *:6379"
	}
	names = append(names, comm)
	dirs := append(append([]string{}, pathDirs...), filepath.Dir(exe))
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, n := range names {
		switch {
		case n == "":
		case filepath.IsAbs(n):
			add(filepath.Clean(n))
		case strings.Contains(n, "/"):
			if filepath.IsAbs(cwd) {
				add(filepath.Join(cwd, n))
			}
		default:
			for _, d := range dirs {
				if filepath.IsAbs(d) {
					add(filepath.Join(d, n))
				}
			}
		}
	}
	return out
}

// pathDirs returns the directories of PATH in a process's environment
// (/proc/PID/environ: NUL-separated KEY=VALUE).
func pathDirs(environ []byte) []string {
	for _, kv := range bytes.Split(environ, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("PATH=")); ok {
			return filepath.SplitList(string(v))
		}
	}
	return nil
}

// CommandLine returns a process's command line (/proc/PID/cmdline, its
// arguments joined by spaces), or, when it has none (a kernel thread, a
// zombie), its name in brackets as ps shows it ("[kworker/0:1]").
func CommandLine(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return "", fmt.Errorf("read the command line of process %d: %w", pid, err)
	}
	if s := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " ")); s != "" {
		return s, nil
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return "", fmt.Errorf("read the name of process %d: %w", pid, err)
	}
	return "[" + strings.TrimSpace(string(comm)) + "]", nil
}
