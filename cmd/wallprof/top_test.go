package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/groundtruth"
)

// topRow is one line of top's table: WALL% CPU% RUNQ% SLEEP% DISK% TOTAL%.
type topRow [6]float64

// lastTopTable parses the last table top --plain printed, and the number
// of threads its summary line counted.
func lastTopTable(t *testing.T, out string) (map[string]topRow, int) {
	t.Helper()
	lines := strings.Split(out, "\n")
	at := -1
	for i, l := range lines {
		if strings.HasPrefix(l, " WALL%") {
			at = i
		}
	}
	if at < 1 {
		t.Fatalf("no table in top's output:\n%s", out)
	}
	m := regexp.MustCompile(`^(\d+) threads · `).FindStringSubmatch(lines[at-1])
	if m == nil {
		t.Fatalf("no thread count above the table: %q", lines[at-1])
	}
	threads, _ := strconv.Atoi(m[1])
	rows := map[string]topRow{}
	for _, l := range lines[at+1:] {
		f := strings.Fields(l)
		if len(f) < 7 {
			break
		}
		var r topRow
		for i := range r {
			if f[i] != "-" {
				r[i], _ = strconv.ParseFloat(f[i], 64)
			}
		}
		rows[strings.Join(f[6:], " ")] = r
	}
	return rows, threads
}

// TestTopAgreesWithTruth runs top on the short-bursts workload (phases
// shorter than the sampling period, more runnable threads than CPUs) at the
// default rate: after 10 s, each phase function's total time, and its time
// on a CPU, waiting for one and blocked, are within 3 points of what the
// workload measured itself. The workload's mix is the same throughout, so
// the shares of a 10 s window are those of its whole run.
func TestTopAgreesWithTruth(t *testing.T) {
	requireRecording(t)
	cgt := groundtruth.Build(t, "cgt")
	truthPath := filepath.Join(t.TempDir(), "truth.json")
	work := exec.Command(cgt, "--truth", truthPath, "--bursts", "12", "--crowd-after", "0")
	if err := work.Start(); err != nil {
		t.Fatal(err)
	}
	defer work.Process.Kill()
	time.Sleep(200 * time.Millisecond)
	code, out := wallprof(t, "top", "-p", strconv.Itoa(work.Process.Pid), "--plain", "--duration", "10.5s",
		"--cum", "--filter", "^(serve|crowd|feed)_", "--top", "50")
	if code != 0 {
		t.Fatalf("top exited %d:\n%s", code, out)
	}
	if err := work.Wait(); err != nil {
		t.Fatalf("workload: %v", err)
	}
	truth, err := groundtruth.ReadTruth(truthPath)
	if err != nil {
		t.Fatal(err)
	}
	rows, threads := lastTopTable(t, out)
	// Top's shares are of all threads' time, the main thread's included;
	// the truth's of its worker threads'.
	var life time.Duration
	for _, tt := range truth.Threads {
		life += tt.Lifetime()
	}
	scale := float64(threads) / float64(len(truth.Threads))
	for _, name := range []string{"serve_compute", "serve_sleep", "serve_wait", "feed_replies", "crowd_burst", "crowd_nap"} {
		ph, n := truth.PhaseTotal(name)
		if n == 0 {
			t.Fatalf("the truth has no phase %s", name)
		}
		r, ok := rows[name]
		if !ok {
			t.Errorf("top does not show %s:\n%s", name, out)
			continue
		}
		pct := func(d time.Duration) float64 { return 100 * d.Seconds() / life.Seconds() }
		for _, c := range []struct {
			what      string
			got, want float64
		}{
			{"total", r[5] * scale, pct(ph.Wall())},
			{"on-CPU", r[1] * scale, pct(ph.CPU())},
			{"off-CPU", (r[2] + r[3] + r[4]) * scale, pct(ph.Wall() - ph.CPU())},
		} {
			msg := fmt.Sprintf("%s %s: top %.1f%%, truth %.1f%%", name, c.what, c.got, c.want)
			if d := c.got - c.want; d > 3 || d < -3 {
				t.Error(msg)
			} else {
				t.Log(msg)
			}
		}
	}
}

// TestTopFullScreen drives the full-screen view in tmux, as a user would:
// the table shows the workload's functions, sorting, filtering, the thread
// view and writing the window work, and Ctrl-C leaves the terminal as it
// was.
func TestTopFullScreen(t *testing.T) {
	requireRecording(t)
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but tmux is not installed (.ci/run installs it)")
		}
		t.Skip("tmux is not installed")
	}
	cgt := groundtruth.Build(t, "cgt")
	work := exec.Command(cgt, "--bursts", "30", "--crowd-after", "0")
	if err := work.Start(); err != nil {
		t.Fatal(err)
	}
	defer work.Process.Kill()
	dir := t.TempDir()
	session := fmt.Sprintf("wallprof-top-%d", os.Getpid())
	script := fmt.Sprintf("cd %s && stty -g > before && %s top -p %d; echo \"exit=$?\" > done; stty -g > after; sleep 60",
		dir, wallprofBin(t), work.Process.Pid)
	run := func(args ...string) string {
		out, err := exec.Command(tmux, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("new-session", "-d", "-s", session, "-x", "100", "-y", "30", script)
	defer exec.Command(tmux, "kill-session", "-t", session).Run()
	screen := func() string { return run("capture-pane", "-p", "-t", session) }
	// waitFor polls the screen until it satisfies ok.
	waitFor := func(what string, ok func(string) bool) string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			s := screen()
			if ok(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("the screen never showed %s:\n%s", what, s)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	has := func(subs ...string) func(string) bool {
		return func(s string) bool {
			for _, sub := range subs {
				if !strings.Contains(s, sub) {
					return false
				}
			}
			return true
		}
	}
	waitFor("the workload's functions", has("WALL%", "burn_for", "by WALL%", "q quit"))
	run("send-keys", "-t", session, "2")
	waitFor("the table sorted by CPU%", has("by CPU%"))
	run("send-keys", "-t", session, "c", "/")
	run("send-keys", "-t", session, "-l", "^serve_")
	run("send-keys", "-t", session, "Enter")
	s := waitFor("the filtered table", has("/^serve_/", "serve_compute", "states of their total"))
	if strings.Contains(s, "crowd_burst") || strings.Contains(s, "burn_for") {
		t.Errorf("the filter let other functions through:\n%s", s)
	}
	// Esc alone: an Esc followed at once by a key reads as Alt+key.
	run("send-keys", "-t", session, "Escape")
	waitFor("the filter cleared", func(s string) bool { return !strings.Contains(s, "/^serve_/") })
	run("send-keys", "-t", session, "v")
	waitFor("the thread view", has("threads ·", "crowd (", "server ("))
	run("send-keys", "-t", session, "w")
	waitFor("the file written", has("wrote wallprof-top-"))
	files, _ := filepath.Glob(filepath.Join(dir, "wallprof-top-*.pb.gz"))
	if len(files) != 1 {
		t.Fatalf("files written: %v, want one", files)
	}
	if p := readProfile(t, files[0]); len(p.Samples) == 0 || len(p.Threads) < 7 {
		t.Errorf("the window written has %d samples and %d threads", len(p.Samples), len(p.Threads))
	}
	run("send-keys", "-t", session, "C-c")
	deadline := time.Now().Add(5 * time.Second)
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "after")); err == nil && len(b) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("top did not exit on Ctrl-C:\n%s", screen())
		}
		time.Sleep(100 * time.Millisecond)
	}
	done, _ := os.ReadFile(filepath.Join(dir, "done"))
	before, _ := os.ReadFile(filepath.Join(dir, "before"))
	after, _ := os.ReadFile(filepath.Join(dir, "after"))
	if strings.TrimSpace(string(done)) != "exit=0" {
		t.Errorf("top exited with %q, want exit=0", done)
	}
	if string(before) != string(after) {
		t.Errorf("the terminal's settings changed: %q before, %q after", before, after)
	}
}
