package dump

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// WriteJSON writes d as indented JSON (schema Format).
func WriteJSON(w io.Writer, d *Dump) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}

// maxIDs is how many goroutine ids a group's header lists in the text form.
const maxIDs = 8

// WriteText writes d as text, in the manner of py-spy dump and the Go
// runtime's tracebacks: each thread with its state and time in it and its
// frames, innermost first; then the goroutine groups, largest first (with
// --all, each goroutine as runtime.Stack shows it).
func WriteText(w io.Writer, d *Dump, all bool) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "Process %d: %s\n", d.PID, d.Command)
	fmt.Fprintf(bw, "Dumped in %s without stopping it: %s", dur(d.ElapsedNs), plural(len(d.Threads), "thread"))
	if d.Go != nil {
		fmt.Fprintf(bw, ", %s (%s)", plural(d.Go.Goroutines, "goroutine"), d.Go.Version)
	}
	bw.WriteString(".\n")
	for _, m := range d.Warnings {
		fmt.Fprintf(bw, "warning: %s\n", m)
	}
	for i := range d.Threads {
		writeThread(bw, &d.Threads[i])
	}
	if g := d.Go; g != nil {
		if all {
			fmt.Fprintf(bw, "\nGoroutines: %d", g.Goroutines)
		} else {
			fmt.Fprintf(bw, "\nGoroutines: %d in %d groups, largest first", g.Goroutines, len(g.Groups))
		}
		if g.System > 0 {
			fmt.Fprintf(bw, " (and %d of the runtime, not shown)", g.System)
		}
		bw.WriteString("\n")
		if g.Dropped > 0 {
			fmt.Fprintf(bw, "warning: %d goroutines changed on every read and are not shown\n", g.Dropped)
		}
		for i := range g.Groups {
			writeGroup(bw, &g.Groups[i], all)
		}
	}
	return bw.Flush()
}

func writeThread(w *bufio.Writer, t *Thread) {
	fmt.Fprintf(w, "\nThread %d (%s): %s", t.TID, t.Name, t.State)
	if t.InStateNs != nil {
		fmt.Fprintf(w, " for %s", dur(*t.InStateNs))
	}
	if t.State == "runnable" && t.SinceRanNs > 0 {
		fmt.Fprintf(w, ", last ran %s ago", dur(t.SinceRanNs))
	}
	fmt.Fprintf(w, ", CPU %s", dur(t.CPUNs))
	if t.Goroutine != 0 {
		fmt.Fprintf(w, ", goroutine %d", t.Goroutine)
	}
	w.WriteString("\n")
	if t.StackApproximate {
		w.WriteString("    (on a CPU: user stack approximate, from its latest entry into the kernel)\n")
	}
	writeFrames(w, t.Frames)
}

func writeGroup(w *bufio.Writer, g *Group, all bool) {
	state := g.State
	if g.WaitReason != "" {
		state = g.WaitReason
	}
	if g.WaitMinNs != nil {
		if *g.WaitMinNs == *g.WaitMaxNs {
			state += ", " + dur(*g.WaitMinNs)
		} else {
			state += ", " + dur(*g.WaitMinNs) + " to " + dur(*g.WaitMaxNs)
		}
	}
	if all && len(g.IDs) == 1 {
		fmt.Fprintf(w, "\ngoroutine %d [%s]", g.IDs[0], state)
	} else {
		noun := "goroutines"
		if g.Count == 1 {
			noun = "goroutine"
		}
		fmt.Fprintf(w, "\n%d %s [%s] (%s)", g.Count, noun, state, ids(g.IDs))
	}
	if len(g.Threads) == 1 {
		fmt.Fprintf(w, " on thread %d", g.Threads[0])
	} else if len(g.Threads) > 1 {
		fmt.Fprintf(w, " on threads %s", ints(g.Threads))
	}
	w.WriteString(":\n")
	if len(g.Labels) > 0 {
		fmt.Fprintf(w, "    labels: %s\n", labels(g.Labels))
	}
	if g.StackFromThread {
		w.WriteString("    (running: its thread's stack, approximate)\n")
	}
	writeFrames(w, g.Frames)
	if c := g.CreatedBy; c != nil {
		fmt.Fprintf(w, "    created by %s", c.Function)
		if c.Goroutine != 0 {
			fmt.Fprintf(w, " in goroutine %d", c.Goroutine)
		}
		if c.File != "" {
			fmt.Fprintf(w, " (%s:%d)", c.File, c.Line)
		}
		w.WriteString("\n")
	}
}

func writeFrames(w *bufio.Writer, fs []Frame) {
	if len(fs) == 0 {
		w.WriteString("    [stack unavailable]\n")
	}
	for _, f := range fs {
		switch {
		case f.Kernel:
			fmt.Fprintf(w, "    %s [kernel]\n", f.Function)
		case f.File != "":
			fmt.Fprintf(w, "    %s (%s:%d)\n", f.Function, f.File, f.Line)
		default:
			fmt.Fprintf(w, "    %s\n", f.Function)
		}
	}
}

// ids lists goroutine ids, the first maxIDs of them.
func ids(v []uint64) string {
	var b strings.Builder
	b.WriteString("id")
	if len(v) > 1 {
		b.WriteString("s")
	}
	for i, id := range v {
		if i == maxIDs {
			fmt.Fprintf(&b, " ... %d more", len(v)-maxIDs)
			break
		}
		fmt.Fprintf(&b, " %d", id)
	}
	return b.String()
}

func ints(v []int) string {
	s := make([]string, 0, len(v))
	for i, x := range v {
		if i == maxIDs {
			s = append(s, fmt.Sprintf("... %d more", len(v)-maxIDs))
			break
		}
		s = append(s, fmt.Sprint(x))
	}
	return strings.Join(s, ",")
}

func labels(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = k + "=" + m[k]
	}
	return strings.Join(s, " ")
}

// dur formats a duration briefly: 850ns, 12µs, 3.4ms, 2.31s, 4m12s, 3h2m.
func dur(ns int64) string {
	d := time.Duration(ns)
	switch {
	case d < time.Microsecond:
		return fmt.Sprintf("%dns", ns)
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d/time.Microsecond)
	case d < time.Second:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < time.Minute:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
