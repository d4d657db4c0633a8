package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// Counting (COUNT=instructions): every run also goes under
// `perf stat -e EVENT`, around the whole command (the profiler and the
// workload together, user and kernel mode, the BPF programs that run in
// their context included), and the tables get the event's count per run.
// An alongside tool (bpftrace) and the workload are counted separately and
// added up. perf stat's counters are switched with every context switch of
// the tasks it counts, so counting runs have their own times: compare them
// with each other, not with runs without COUNT.

// statArgv returns argv run under perf stat, counting event into file.
func statArgv(perf, event, file string, argv []string) []string {
	return append([]string{perf, "stat", "-x", ",", "--no-big-num", "-e", event, "-o", file, "--"}, argv...)
}

// parseStat returns the sum of event's counts in perf stat -x output (one
// line per event: value,unit,event,...; '#' lines are comments). A count
// perf could not take ("<not supported>", "<not counted>") is an error that
// says so.
func parseStat(out []byte, event string) (float64, error) {
	var sum float64
	found := false
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) < 3 || !sameEvent(f[2], event) {
			continue
		}
		if strings.HasPrefix(f[0], "<") {
			return 0, fmt.Errorf("perf stat could not count %s: %s", event, f[0])
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return 0, fmt.Errorf("perf stat: bad count %q for %s", f[0], event)
		}
		sum += v
		found = true
	}
	if !found {
		return 0, fmt.Errorf("perf stat printed no count for %s", event)
	}
	return sum, nil
}

// sameEvent reports whether perf's name for an event (which may carry a
// modifier, "instructions:u", or a PMU, "cpu_core/instructions/") is event.
func sameEvent(name, event string) bool {
	if name == event {
		return true
	}
	if base, _, ok := strings.Cut(name, ":"); ok && base == event {
		return true
	}
	return strings.HasSuffix(name, "/"+event+"/")
}

// readStat reads and removes the perf stat output files and sums their counts.
func readStat(event string, files ...string) (float64, error) {
	var sum float64
	for _, file := range files {
		out, err := os.ReadFile(file)
		if err != nil {
			return 0, err
		}
		os.Remove(file)
		v, err := parseStat(out, event)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// checkCountable tells in one sentence why event cannot be counted here, if
// it cannot: most VMs have no hardware counters.
func checkCountable(perf, event string) error {
	f, err := os.CreateTemp("", "overhead-stat-")
	if err != nil {
		return err
	}
	f.Close()
	defer os.Remove(f.Name())
	var stderr bytes.Buffer
	cmd := exec.Command(perf, statArgv(perf, event, f.Name(), []string{"true"})[1:]...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("COUNT=%s: perf stat -e %s failed (%v): %s", event, event, err, strings.TrimSpace(stderr.String()))
	}
	if _, err := readStat(event, f.Name()); err != nil {
		return fmt.Errorf("COUNT=%s: this machine cannot count it (%v; a VM without hardware counters cannot count instructions); run without COUNT", event, err)
	}
	return nil
}

// fmtCount prints a count with an SI suffix.
func fmtCount(x float64) string {
	switch a := math.Abs(x); {
	case a >= 1e9:
		return fmt.Sprintf("%.3gG", x/1e9)
	case a >= 1e6:
		return fmt.Sprintf("%.3gM", x/1e6)
	case a >= 1e3:
		return fmt.Sprintf("%.3gk", x/1e3)
	}
	return fmt.Sprintf("%.3g", x)
}
