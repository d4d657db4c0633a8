package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wallprof/wallprof/internal/agent/push"
	"github.com/wallprof/wallprof/internal/linux"
	"github.com/wallprof/wallprof/internal/symbolize"
)

// A Resolver says which processes to record; the agent asks it every
// window and starts and stops recordings as processes appear and go.
type Resolver interface {
	// Resolve returns the processes to record now.
	Resolve() ([]int, error)
	// Fixed reports whether the set can only shrink (PIDs given once):
	// when all are gone, the agent is done.
	Fixed() bool
}

// ErrSystemWide says that a Selector was given nothing to select: every
// process is SystemWide's job.
var ErrSystemWide = errors.New("no process given: use SystemWide to record every process")

// Selector records the given PIDs while they live and every process whose
// name (comm, or the base name of its executable) is one of Names.
type Selector struct {
	PIDs  []int
	Names []string
	// Proc is the proc file system ("/proc" if empty).
	Proc string
}

// Fixed implements Resolver.
func (s Selector) Fixed() bool { return len(s.Names) == 0 }

// Resolve implements Resolver.
func (s Selector) Resolve() ([]int, error) {
	if len(s.PIDs) == 0 && len(s.Names) == 0 {
		return nil, ErrSystemWide
	}
	proc := s.Proc
	if proc == "" {
		proc = "/proc"
	}
	var out []int
	for _, pid := range s.PIDs {
		if _, err := os.Stat(filepath.Join(proc, strconv.Itoa(pid))); err == nil {
			out = append(out, pid)
		}
	}
	if len(s.Names) > 0 {
		ents, err := os.ReadDir(proc)
		if err != nil {
			return nil, err
		}
		self := os.Getpid()
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == self || slices.Contains(out, pid) {
				continue
			}
			if s.matches(proc, pid) {
				out = append(out, pid)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

func (s Selector) matches(proc string, pid int) bool {
	dir := filepath.Join(proc, strconv.Itoa(pid))
	comm, err := os.ReadFile(filepath.Join(dir, "comm"))
	if err != nil {
		return false
	}
	if slices.Contains(s.Names, strings.TrimSpace(string(comm))) {
		return true
	}
	exe, err := os.Readlink(filepath.Join(dir, "exe"))
	return err == nil && slices.Contains(s.Names, filepath.Base(strings.TrimSuffix(exe, " (deleted)")))
}

// describe fills in what a window says about its process.
func describe(pid int, host, service string) push.Meta {
	m := push.Meta{Host: host, Service: service, PID: pid, Started: time.Now()}
	dir := fmt.Sprintf("/proc/%d", pid)
	if b, err := os.ReadFile(dir + "/comm"); err == nil {
		m.Comm = strings.TrimSpace(string(b))
	}
	m.Exe, _ = os.Readlink(dir + "/exe")
	m.BuildID, _ = symbolize.FileBuildID(dir + "/exe")
	m.Command, _ = linux.CommandLine(pid)
	if b, err := os.ReadFile(dir + "/cgroup"); err == nil {
		m.Cgroup, m.ContainerID = parseCgroup(string(b))
	}
	if m.Service == "" {
		m.Service = m.Comm
	}
	return m
}

var containerID = regexp.MustCompile(`(?:^|[/-])([0-9a-f]{64})(?:\.scope)?(?:/|$)`)

// parseCgroup reads /proc/PID/cgroup: the cgroup v2 path (else the first
// v1 one) and the container id in it, if any (docker, containerd, CRI-O,
// podman name their cgroups after the 64-hex-digit id).
func parseCgroup(s string) (path, id string) {
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[0] == "0" || path == "" {
			path = f[2]
		}
	}
	if m := containerID.FindStringSubmatch(path); m != nil {
		id = m[1]
	}
	return path, id
}
