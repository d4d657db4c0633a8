package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/groundtruth"
	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/profile"
)

// goStackHas reports whether a goroutine sample's stack contains fn.
func goStackHas(g *profile.GoSample, fn string) bool {
	for _, l := range g.Stack {
		for _, f := range l.Frames {
			if f.Function == fn {
				return true
			}
		}
	}
	return false
}

// TestRecordGoroutines records the Go ground-truth workload (groups of
// goroutines that compute, sleep, wait on a channel, read a pipe and
// contend on a sync.Mutex, each group created by its own function) and
// checks the goroutine view against the time the workload measured itself:
// each group's share of the goroutines' time within 2 points, the group's
// time on its own function's stack, and the runtime's wait reasons. On a
// normal and a stripped build, and with older Go toolchains.
func TestRecordGoroutines(t *testing.T) {
	requireRecording(t)
	dir := groundtruth.WorkloadDir(t, "gogt")
	for _, v := range []struct {
		name      string
		stripped  bool
		toolchain string
	}{
		{"local", false, ""},
		{"local-stripped", true, ""},
		{"go1.24.13", false, "go1.24.13"},
		{"go1.22.12-stripped", true, "go1.22.12"},
	} {
		t.Run(v.name, func(t *testing.T) {
			bin := groundtruth.BuildGo(t, dir, v.stripped, v.toolchain)
			tmp := t.TempDir()
			out, truthPath := filepath.Join(tmp, "go.pb.gz"), filepath.Join(tmp, "truth.json")
			p, truth, stderr := recordTruth(t, out, truthPath, "record", "-F", "199", "-o", out, "--", bin, "--truth", truthPath, "--duration", "2s")
			if p.GoInfo == nil || len(p.Goroutines) == 0 {
				t.Fatalf("no goroutine view:\n%s", stderr)
			}
			if v.toolchain != "" && p.GoInfo.Version != v.toolchain {
				t.Errorf("Go version %q, built with %s", p.GoInfo.Version, v.toolchain)
			}
			t.Logf("%s: %d snapshots every %s, up to %d goroutines, %d inconsistent reads dropped, %d retried, %d failed",
				p.GoInfo.Version, p.GoInfo.Snapshots, p.GoInfo.Interval, p.GoInfo.MaxGoroutines, p.GoInfo.Dropped, p.GoInfo.Retried, p.GoInfo.Failed)
			// Launched: the recording began before the command exec'ed,
			// and the coverage counts from the exec.
			if b := p.GoInfo.Before; b <= 0 || b > time.Second {
				t.Errorf("the recording ran %v before the command exec'ed, want a launch's few hundred milliseconds", b)
			}
			checkCoverage(t, p, stderr)
			checkGoroutineGroups(t, p, truth)

			// The CLI groups them by creation site.
			code, text := wallprof(t, "report", "--goroutines", out)
			if code != 0 {
				t.Fatalf("report --goroutines exited %d: %s", code, text)
			}
			for _, want := range []string{"created by main.startCompute", "created by main.startMutexContender", "chan receive", "IO wait"} {
				if !strings.Contains(text, want) {
					t.Errorf("report --goroutines lacks %q:\n%s", want, text)
				}
			}
			code, js := wallprof(t, "report", "--goroutines", "--json", "--focus-goroutines", "startMutexContender", out)
			var gr present.GoroutineReport
			if err := json.Unmarshal([]byte(js), &gr); code != 0 || err != nil {
				t.Fatalf("report --goroutines --json: exit %d, %v:\n%s", code, err, js)
			}
			if len(gr.Groups) != 1 || gr.Groups[0].Goroutines != 3 {
				t.Errorf("focus on the mutex contenders: %+v", gr.Groups)
			}
			checkReportCoverage(t, p, text, &gr)
		})
	}
}

// checkCoverage checks that the goroutine table was read over the whole
// recording (a snapshot that waited for a CPU once paused the snapshots
// for most of a recording) and that the summary on stderr says so.
func checkCoverage(t *testing.T, p *profile.Profile, stderr string) {
	t.Helper()
	g := p.GoInfo
	c, ok := g.Coverage(p.Duration)
	t.Logf("goroutine table read %d times, covering %v of the %v recording after its first %v (%.1f%%), longest gap %v",
		g.Snapshots, g.Covered, p.Duration, g.Before, 100*c, g.LongestGap)
	if !ok || g.LowCoverage(p.Duration) {
		t.Errorf("the goroutine view covers %v of the %v recording (%.1f%%, known: %v), longest gap %v; want at least %.0f%%",
			g.Covered, p.Duration, 100*c, ok, g.LongestGap, 100*profile.MinCoverage)
	}
	want := fmt.Sprintf("covering %v of the recording (%.0f%%)", g.Covered.Round(time.Millisecond), 100*c)
	if g.Before > 0 {
		want = fmt.Sprintf("covering %v of the %v since the command started (%.0f%%)", g.Covered.Round(time.Millisecond),
			g.Span(p.Duration).Round(time.Millisecond), 100*c)
	}
	if !strings.Contains(stderr, want) {
		t.Errorf("the summary does not say %q:\n%s", want, stderr)
	}
	if strings.Contains(stderr, "warning: the goroutine view covers only") {
		t.Errorf("a coverage warning for a coverage of %.1f%%:\n%s", 100*c, stderr)
	}
}

// checkReportCoverage checks what report --goroutines says of the
// coverage: the text (without a warning) and the JSON.
func checkReportCoverage(t *testing.T, p *profile.Profile, text string, gr *present.GoroutineReport) {
	t.Helper()
	c, _ := p.GoInfo.Coverage(p.Duration)
	if want := fmt.Sprintf("(%.1f%%; longest gap", 100*c); !strings.Contains(text, want) || strings.Contains(text, "warning:") {
		t.Errorf("report --goroutines does not say %q, or warns:\n%s", want, text)
	}
	if gr.Coverage == nil || *gr.Coverage < 100*profile.MinCoverage || gr.CoveredNs != int64(p.GoInfo.Covered) ||
		gr.RecordingNs != int64(p.Duration) || len(gr.Warnings) != 0 {
		t.Errorf("report --goroutines --json: coverage %v, covered %d ns of %d, warnings %q", gr.Coverage, gr.CoveredNs, gr.RecordingNs, gr.Warnings)
	}
}

// creators names each gogt group's creating function.
func creatorOf(g groundtruth.GroupTruth) string {
	name := strings.TrimPrefix(g.Function, "main.")
	return "main.start" + strings.ToUpper(name[:1]) + name[1:]
}

func checkGoroutineGroups(t *testing.T, p *profile.Profile, truth *groundtruth.Truth) {
	t.Helper()
	type acc struct {
		total, onFunc int64
		state         [profile.NumGStates]int64
		reasons       map[string]int64
	}
	by := map[string]*acc{}
	var profTotal, truthTotal int64
	for _, g := range truth.Groups {
		by[creatorOf(g)] = &acc{reasons: map[string]int64{}}
		truthTotal += g.WallNS
	}
	fn := map[string]string{}
	for _, g := range truth.Groups {
		fn[creatorOf(g)] = g.Function
	}
	for _, g := range p.Goroutines {
		a := by[g.CreatedBy]
		if a == nil {
			continue // the main goroutine, runtime goroutines
		}
		a.total += g.Value
		a.state[g.State] += g.Value
		if g.State == profile.GWaiting {
			a.reasons[g.WaitReason] += g.Value
		}
		if goStackHas(g, fn[g.CreatedBy]) {
			a.onFunc += g.Value
		}
		profTotal += g.Value
	}
	if profTotal == 0 {
		t.Fatal("no goroutine time for any group")
	}
	// Running time comes from thread samples, mapped to the goroutine the
	// snapshots had on the thread: compute's two goroutines.
	var running, withID int64
	ids := map[uint64]bool{}
	for _, g := range p.Goroutines {
		if g.CreatedBy == "main.startCompute" && g.State == profile.GRunning {
			running += g.Value
			if g.GoID != 0 {
				withID += g.Value
				ids[g.GoID] = true
			}
		}
	}
	if running == 0 || withID < running*8/10 || len(ids) != 2 {
		t.Errorf("compute: %v of its %v running time carries a goid; %d goroutines (want 2)", time.Duration(withID), time.Duration(running), len(ids))
	}
	// The chanWaiter goroutines' pprof labels (runtime/pprof.Do) are read.
	var waiting, labelled int64
	for _, g := range p.Goroutines {
		if g.CreatedBy == "main.startChanWaiter" && g.State == profile.GWaiting {
			waiting += g.Value
			if g.Labels["group"] == "chanWaiter" {
				labelled += g.Value
			}
		}
	}
	if waiting == 0 || labelled < waiting*9/10 {
		t.Errorf("chanWaiter: %v of its %v waiting time carries its pprof label group=chanWaiter", time.Duration(labelled), time.Duration(waiting))
	}
	share := func(part, whole int64) float64 { return 100 * float64(part) / float64(whole) }
	for _, g := range truth.Groups {
		c := creatorOf(g)
		a := by[c]
		got, want := share(a.total, profTotal), share(g.WallNS, truthTotal)
		line := fmt.Sprintf("%-22s %6.2fs share %5.1f%% (truth %5.1f%%), on %s %5.1f%%, running %5.1f%% runnable %5.1f%% waiting %5.1f%% %v",
			g.Name, time.Duration(a.total).Seconds(), got, want, g.Function, share(a.onFunc, a.total), share(a.state[profile.GRunning], a.total),
			share(a.state[profile.GRunnable], a.total), share(a.state[profile.GWaiting], a.total), reasons(a.reasons, a.total))
		t.Log(line)
		if d := got - want; d > tolerancePoints || d < -tolerancePoints {
			t.Errorf("%s: %.1f%% of the goroutines' time, the workload measured %.1f%%", g.Name, got, want)
		}
		if a.total > 0 && share(a.onFunc, a.total) < 95 {
			t.Errorf("%s: only %.1f%% of its time has %s on the stack", g.Name, share(a.onFunc, a.total), g.Function)
		}
		// What the runtime says each group is doing.
		waitingFor := func(rs ...string) float64 {
			var n int64
			for _, r := range rs {
				n += a.reasons[r]
			}
			return share(n, a.total)
		}
		switch g.Name {
		case "compute":
			if s := share(a.state[profile.GRunning]+a.state[profile.GRunnable], a.total); s < 95 {
				t.Errorf("compute: running or runnable %.1f%% of its time", s)
			}
		case "chanWaiter", "pipeReader", "sleeper", "chanFeeder", "pipeWriter":
			// Waiting for its reason, or woken and waiting to run (the
			// machine is shared: that can be long).
			reason := map[string]string{"chanWaiter": "chan receive", "pipeReader": "IO wait"}[g.Name]
			if reason == "" {
				reason = "sleep"
			}
			// Woken, a goroutine waits for a P: up to a 10 ms time slice
			// while main.compute's goroutines hold both, longer when the
			// machine is busy. So the wait reason dominates, and the rest is
			// runnable or running (or the pipe's system calls).
			w := waitingFor(reason)
			if w < 50 || w+waitingFor("syscall")+share(a.state[profile.GRunnable]+a.state[profile.GRunning], a.total) < 95 {
				t.Errorf("%s: waiting on %q %.1f%% of its time, running or runnable %.1f%%; by reason: %s", g.Name, reason, w,
					share(a.state[profile.GRunnable]+a.state[profile.GRunning], a.total), reasons(a.reasons, a.total))
			}
		case "mutexContender":
			// Go 1.24 named the reason; before, a contended Lock parks in
			// the semaphore.
			ph := g.Phases[g.Function]
			lock := waitingFor("sync.Mutex.Lock", "semacquire")
			wantLock := share(ph.LockWaitNS, ph.WallNS)
			// The workload's lock wait also holds the moments a woken
			// goroutine is runnable before it gets the lock.
			if lock > wantLock+tolerancePoints || lock+share(a.state[profile.GRunnable], a.total) < wantLock-tolerancePoints {
				t.Errorf("mutexContender: waiting in Lock %.1f%% (+ runnable %.1f%%), the workload measured %.1f%%",
					lock, share(a.state[profile.GRunnable], a.total), wantLock)
			}
		}
	}
	// Idle scheduler threads no longer hide the goroutines: no goroutine
	// time sits in the scheduler's idle loop.
	for _, g := range p.Goroutines {
		if goStackHas(g, "runtime.findRunnable") || goStackHas(g, "runtime.stopm") {
			t.Errorf("goroutine time in the scheduler's idle loop: %s %s", g.State, time.Duration(g.Value))
			break
		}
	}
}

func reasons(m map[string]int64, total int64) string {
	var parts []string
	for r, v := range m {
		parts = append(parts, fmt.Sprintf("%s %.1f%%", r, 100*float64(v)/float64(total)))
	}
	return strings.Join(parts, ", ")
}
