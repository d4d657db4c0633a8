package record

import (
	"fmt"
	"sort"
	"strings"

	"github.com/wallprof/wallprof/internal/profile"
)

// jitSourcer is what the JIT note needs of a process's resolver
// (symbolize.Process).
type jitSourcer interface {
	JITSources() (paths []string, nspid int)
}

// jitHint says how the common runtimes write the files that name their code.
const jitHint = "run node with --perf-basic-prof, python 3.12+ with -X perf, java with -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit (or a perf map agent)"

// anonCounts are a process's on-CPU frames in anonymous executable memory,
// weighted by the time of their samples.
type anonCounts struct{ all, unnamed int64 }

// countAnonFrames sums, per process, the on-CPU time of the frames that lie
// in anonymous executable memory (JIT and interpreter code), and of those
// that no perf map or jitdump named.
func countAnonFrames(p *profile.Profile) map[int]*anonCounts {
	out := map[int]*anonCounts{}
	for _, s := range p.Samples {
		if s.State != profile.OnCPU {
			continue
		}
		for _, l := range s.Stack {
			if !IsAnonymous(l.Mapping) || len(l.Frames) == 0 {
				continue
			}
			c := out[s.PID]
			if c == nil {
				c = &anonCounts{}
				out[s.PID] = c
			}
			c.all += s.Value
			if strings.HasPrefix(l.Frames[0].Function, "[anon]+0x") {
				c.unnamed += s.Value
			}
		}
	}
	return out
}

// IsAnonymous reports whether m is anonymous executable memory (JIT code,
// interpreter trampolines), not a file.
func IsAnonymous(m *profile.Mapping) bool {
	return m != nil && !m.Kernel && (m.File == "" || strings.HasPrefix(m.File, "[anon"))
}

// jitNotes returns a note for each process some of whose on-CPU frames in
// anonymous executable memory stayed unnamed: what share, which files were
// read, and how to get names.
func jitNotes(p *profile.Profile, sources func(pid int) jitSourcer) []string {
	counts := countAnonFrames(p)
	pids := make([]int, 0, len(counts))
	for pid := range counts {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	var notes []string
	for _, pid := range pids {
		c := counts[pid]
		if c.unnamed == 0 || c.all == 0 {
			continue
		}
		share := fmt.Sprintf("%.1f%% of the on-CPU frames in anonymous executable memory (JIT or interpreter code) of process %d stayed unnamed", 100*float64(c.unnamed)/float64(c.all), pid)
		var paths []string
		nspid := pid
		if s := sources(pid); s != nil {
			paths, nspid = s.JITSources()
		}
		if len(paths) == 0 {
			notes = append(notes, fmt.Sprintf("%s: no perf map or jitdump for PID %d (/tmp/perf-%d.map in its mount namespace); %s", share, pid, nspid, jitHint))
		} else {
			notes = append(notes, fmt.Sprintf("%s: %s did not name them (code generated before the runtime started writing it, or stubs it does not list)", share, strings.Join(paths, ", ")))
		}
	}
	return notes
}
