//go:build linux && amd64

package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/latency"
)

// heyStatus matches one line of hey's "Status code distribution".
var heyStatus = regexp.MustCompile(`(?m)^\s*\[(\d+)\]\s+(\d+) responses`)

// TestLatencyCaddy measures a real third-party Go server we did not write:
// Debian's caddy (stripped, built by Go 1.19) serving a static file, loaded
// by hey without keep-alive, so that each request is one connection and one
// call of net/http.(*conn).serve that begins after the probes are attached.
// wallprof latency counts as many calls as hey completed requests, every
// request gets a 200, and caddy keeps serving, without an error in its log,
// after the probes are removed.
func TestLatencyCaddy(t *testing.T) {
	requireRecording(t)
	caddy := requireTool(t, "caddy", "caddy")
	hey := requireTool(t, "hey", "hey")
	url, srv, caddyLog := startCaddy(t, caddy)

	// No keep-alive: no connection of ours stays open in conn.serve.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	get := func() (int, error) {
		resp, err := client.Get(url)
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := get(); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("caddy did not answer: %v\n%s", err, caddyLog.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	const fn = "net/http.(*conn).serve"
	wp := exec.Command(wallprofBin(t), "latency", "-p", strconv.Itoa(srv.Process.Pid), "--json", fn)
	var stdout, stderr bytes.Buffer
	wp.Stdout = &stdout
	errPipe, _ := wp.StderrPipe()
	if err := wp.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = wp.Process.Kill() }()
	r := bufio.NewReader(errPipe)
	line, _ := r.ReadString('\n')
	if !strings.Contains(line, "probes on 1 functions") {
		rest, _ := io.ReadAll(r)
		_ = wp.Process.Kill()
		t.Fatalf("wallprof latency: %q%s", line, rest)
	}
	stderr.WriteString(line)
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&stderr, r); close(done) }()

	const requests = 5000
	load := exec.Command(hey, "-n", strconv.Itoa(requests), "-c", "8", "-disable-keepalive", url)
	heyOut, err := load.CombinedOutput()
	if err != nil {
		t.Fatalf("hey: %v\n%s", err, heyOut)
	}
	// The last connections' serve returns just after the response is
	// written; give them a moment before detaching.
	time.Sleep(300 * time.Millisecond)
	if err := wp.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-done
	if err := wp.Wait(); err != nil {
		t.Fatalf("wallprof latency: %v\n%s", err, stderr.String())
	}
	t.Logf("wallprof latency stderr:\n%s", strings.TrimSpace(stderr.String()))

	completed, statuses := 0, map[string]int{}
	for _, m := range heyStatus.FindAllStringSubmatch(string(heyOut), -1) {
		n, _ := strconv.Atoi(m[2])
		statuses[m[1]] += n
		completed += n
	}
	if completed == 0 || statuses["200"] != completed || strings.Contains(string(heyOut), "Error distribution") {
		t.Errorf("hey completed %d requests, by status %v; want all 200 and no error:\n%s", completed, statuses, heyOut)
	}

	var rep latency.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil || len(rep.Functions) != 1 {
		t.Fatalf("output: %v\n%s", err, stdout.String())
	}
	f := rep.Functions[0]
	t.Logf("%s in caddy (%s): %d calls, p50 %v p90 %v p99 %v max %v; unmatched %d, abandoned %d, open at the end %d; hey completed %d requests",
		f.Name, rep.GoVersion, f.Count, time.Duration(f.P50Ns), time.Duration(f.P90Ns), time.Duration(f.P99Ns), time.Duration(f.MaxNs),
		f.Unmatched, f.Abandoned, rep.Cost.OpenCallsAtEnd, completed)
	// One connection, one call: hey's own connections only, each begun
	// after the probes were attached. A connection whose serve had not
	// returned yet when the probes were removed (the wait above was too
	// short on a loaded machine) is open at the end, not lost.
	if f.Count+uint64(rep.Cost.OpenCallsAtEnd) != uint64(completed) || f.Count < uint64(completed)*99/100 {
		t.Errorf("wallprof counted %d calls of %s (%d open at the end), hey completed %d requests without keep-alive", f.Count, fn, rep.Cost.OpenCallsAtEnd, completed)
	}
	if f.Unmatched != 0 || f.ReadErrors != 0 || f.Abandoned != 0 {
		t.Errorf("unmatched %d, read errors %d, abandoned %d; want none", f.Unmatched, f.ReadErrors, f.Abandoned)
	}
	if sp := f.Split; sp != nil {
		run, runq, blocked := sp.Shares()
		t.Logf("split: %d calls on their own thread (%d of them parked on the way, parked known %v), %d moved; running %.1f%% runnable %.1f%% blocked %.1f%%",
			sp.Calls, sp.Parked, sp.SeqKnown, sp.Moved, 100*run, 100*runq, 100*blocked)
	}
	var inBuckets uint64
	for _, b := range f.Buckets {
		inBuckets += b.Count
	}
	if inBuckets != f.Count || f.P50Ns <= 0 || f.P50Ns > f.P99Ns || f.P99Ns > f.MaxNs {
		t.Errorf("histogram holds %d of %d calls; p50 %d p99 %d max %d", inBuckets, f.Count, f.P50Ns, f.P99Ns, f.MaxNs)
	}

	// Caddy is unharmed: it still serves, and logged no error.
	if code, err := get(); err != nil || code != http.StatusOK {
		t.Errorf("after wallprof latency, caddy answered %d, %v", code, err)
	}
	if err := srv.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("caddy is gone: %v", err)
	}
	for _, l := range strings.Split(caddyLog.String(), "\n") {
		if strings.Contains(l, `"level":"error"`) || strings.Contains(l, `"level":"fatal"`) || strings.Contains(l, "panic") {
			t.Errorf("caddy logged: %s", l)
		}
	}
}
