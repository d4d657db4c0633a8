package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// pinMode says where a workload variant is pinned to CPU 0 with taskset.
type pinMode int

const (
	pinNone     pinMode = iota
	pinWhole            // "-pinned": the whole command, profiler and workload alike
	pinWorkload         // "-pinw": the workload only; the profiler may use the other CPUs
	// "-pin2": the workload on CPU 0, the profiler (or the command around
	// the workload) on CPU 1: what the profiler's own threads cost is out
	// of the workload's CPU, what it does in the workload's context (its
	// BPF programs, the timers) stays in.
	pinSplit
)

// workload is one variant of a bench workload: NAME, NAME-pinned or NAME-pinw.
type workload struct {
	Label string // as given in WORKLOADS, used in the tables
	Bin   string // pingpong, cpubound or flood: the binary and its report prefix
	Iters int
	Work  int // pingpong --work: computation per hop, to lower the switch rate
	Pin   pinMode
	// Cmd, when set, is a program we did not write, timed by bench/.bin/timeit.
	Cmd []string
}

// stockfishCmd is Debian's stockfish (stripped, no frame pointers): its
// bench, one thread, 16 MB hash, depth 13 (about 2.5 s here).
var stockfishCmd = []string{"/usr/games/stockfish", "bench", "16", "1", "13"}

// Ping-pong150k is the ping-pong with PingpongWork loop iterations of
// computation per hop: about 150k switches/s pinned on this machine, the
// issue's "over 100k switches per second" rather than the pinned extreme.
const (
	pingpong150k  = "pingpong150k"
	pingpongWork  = 2300
	pingpong150kN = 200000
)

// iterDefaults are the default sizes; pinned ping-pong runs ~10x faster than
// unpinned (no wake-ups onto an idle vCPU), so it gets more round trips.
type iterDefaults struct{ pingpong, pingpongPinned, pingpong150k, cpubound, flood int }

func parseWorkload(label string, d iterDefaults) (workload, error) {
	w := workload{Label: label, Bin: label}
	if b, ok := strings.CutSuffix(label, "-pinned"); ok {
		w.Bin, w.Pin = b, pinWhole
	} else if b, ok := strings.CutSuffix(label, "-pinw"); ok {
		w.Bin, w.Pin = b, pinWorkload
	} else if b, ok := strings.CutSuffix(label, "-pin2"); ok {
		w.Bin, w.Pin = b, pinSplit
	}
	if w.Bin == pingpong150k {
		w.Bin, w.Work, w.Iters = "pingpong", pingpongWork, d.pingpong150k
		return w, nil
	}
	switch {
	case w.Bin == "stockfish":
		w.Cmd, w.Iters = stockfishCmd, 1
	case w.Bin == "pingpong" && w.Pin == pinNone:
		w.Iters = d.pingpong
	case w.Bin == "pingpong":
		w.Iters = d.pingpongPinned
	case w.Bin == "cpubound":
		w.Iters = d.cpubound
	case w.Bin == "flood":
		w.Iters = d.flood
	default:
		return w, fmt.Errorf("unknown workload %q (known: pingpong, pingpong150k, cpubound, flood, stockfish, each also as NAME-pinned, NAME-pinw or NAME-pin2)", label)
	}
	return w, nil
}

var taskset = []string{"taskset", "-c", "0"}

// argv is the workload's own command (pinned itself for -pinw).
func (w workload) argv(binDir string) []string {
	a := []string{filepath.Join(binDir, w.Bin), "--iters", strconv.Itoa(w.Iters)}
	if w.Cmd != nil {
		a = append([]string{filepath.Join(binDir, "timeit"), w.Bin, "--"}, w.Cmd...)
	}
	if w.Work > 0 {
		a = append(a, "--work", strconv.Itoa(w.Work))
	}
	if w.Pin == pinWorkload || w.Pin == pinSplit {
		a = append(append([]string(nil), taskset...), a...)
	}
	return a
}

// outer pins a whole command (a profiler with its workload, a profiler
// running alongside, or the workload alone) for -pinned. taskset execs the
// command, so no process is added between the driver and the tool.
func (w workload) outer(cmd []string) []string {
	switch w.Pin {
	case pinWhole:
		return append(append([]string(nil), taskset...), cmd...)
	case pinSplit:
		return append([]string{"taskset", "-c", "1"}, cmd...)
	}
	return cmd
}
