package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/profile"
)

// requireTool finds an installed program, or skips (fails under CI=true,
// where .ci/run installs it).
func requireTool(t *testing.T, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true but %s is not installed (apt-get install %s)", name, pkg)
	}
	t.Skipf("%s is not installed (apt-get install %s)", name, pkg)
	return ""
}

// startCaddy starts Debian's caddy serving a static file on a free port,
// stopped when the test ends; it returns the file's URL, the server and
// what it logs.
func startCaddy(t *testing.T, caddy string) (url string, srv *exec.Cmd, log *bytes.Buffer) {
	t.Helper()
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "index.html"), []byte(strings.Repeat("hello, caddy\n", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	srv = exec.Command(caddy, "file-server", "--listen", addr, "--root", root)
	home := t.TempDir()
	srv.Env = append(os.Environ(), "HOME="+home, "XDG_DATA_HOME="+home, "XDG_CONFIG_HOME="+home)
	log = &bytes.Buffer{}
	srv.Stdout, srv.Stderr = log, log
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	return "http://" + addr + "/index.html", srv, log
}

// TestRecordCaddy records a real third-party Go server that we did not
// write: Debian's caddy, a stripped binary, serving a static file under
// load from hey. The goroutine view must find its request goroutines.
func TestRecordCaddy(t *testing.T) {
	requireRecording(t)
	caddy := requireTool(t, "caddy", "caddy")
	hey := requireTool(t, "hey", "hey")
	wallprofBin(t) // built before the load starts: run alone, the build took the load's time
	url, srv, log := startCaddy(t, caddy)
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("caddy did not answer: %v\n%s", err, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	load := exec.Command(hey, "-z", "8s", "-c", "8", url)
	var heyOut strings.Builder
	load.Stdout, load.Stderr = &heyOut, &heyOut
	if err := load.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		load.Wait()
		t.Logf("hey:\n%s", heyOut.String())
	}()
	time.Sleep(500 * time.Millisecond)
	out := filepath.Join(t.TempDir(), "caddy.pb.gz")
	// 4 s: attached, the goroutine view's first snapshot comes 100-200 ms
	// after the recording starts (the BPF programs load first), 10% of a
	// 2 s recording in a slow hour (89.9% covered in one CI run).
	code, stderr := wallprof(t, "record", "-p", strconv.Itoa(srv.Process.Pid), "--duration", "4s", "-o", out)
	if code != 0 {
		t.Fatalf("wallprof record exited %d:\n%s", code, stderr)
	}
	t.Log(stderr)
	p := readProfile(t, out)
	var cpu time.Duration
	for _, th := range p.Threads {
		cpu += th.Time[profile.OnCPU]
	}
	if cpu < 50*time.Millisecond {
		load.Wait()
		t.Fatalf("caddy used %v of CPU during the recording: the load did not reach it; hey said:\n%s", cpu, heyOut.String())
	}
	if p.GoInfo == nil || len(p.Goroutines) == 0 {
		t.Fatalf("no goroutine view of caddy:\n%s", stderr)
	}
	// Under this load, wallprof sometimes waited 50–70 ms for a CPU in the
	// middle of a snapshot, and the snapshots paused for 50 times as long:
	// one recording in four covered only part of its time (0.86 s of 5 s).
	checkCoverage(t, p, stderr)
	// Its connections' goroutines: running, runnable, and waiting for the
	// network.
	var serve, serveIO int64
	var states [profile.NumGStates]int64
	funcs := map[string]bool{}
	for _, g := range p.Goroutines {
		if g.CreatedBy == "net/http.(*Server).Serve" && goStackHas(g, "net/http.(*conn).serve") {
			serve += g.Value
			states[g.State] += g.Value
			if g.WaitReason == "IO wait" {
				serveIO += g.Value
			}
			funcs[g.Func] = true
		}
	}
	// Go 1.19 starts `go c.serve(ctx)` in a closure the compiler made,
	// Serve.func3; the goroutine's function is the one it calls.
	if len(funcs) != 1 || !funcs["net/http.(*conn).serve"] {
		t.Errorf("connection goroutines' functions %v, want net/http.(*conn).serve", funcs)
	}
	if serve == 0 || states[profile.GRunning] == 0 || serveIO == 0 {
		t.Errorf("net/http.(*conn).serve goroutines: %v in all, by state %v, %v in IO wait", time.Duration(serve),
			states, time.Duration(serveIO))
	}
	code, text := wallprof(t, "report", "--goroutines", out)
	if code != 0 || !strings.Contains(text, "created by net/http.(*Server).Serve") {
		t.Errorf("report --goroutines exited %d:\n%s", code, text)
	}
	t.Log(text)
	code, js := wallprof(t, "report", "--goroutines", "--json", out)
	var gr present.GoroutineReport
	if err := json.Unmarshal([]byte(js), &gr); code != 0 || err != nil {
		t.Fatalf("report --goroutines --json: exit %d, %v:\n%s", code, err, js)
	}
	checkReportCoverage(t, p, text, &gr)
	// The stripped binary's own functions are named.
	named := false
	for _, g := range p.Goroutines {
		for _, l := range g.Stack {
			for _, f := range l.Frames {
				named = named || strings.HasPrefix(f.Function, "github.com/caddyserver/caddy/v2")
			}
		}
	}
	if !named {
		t.Error("no caddy function in any goroutine stack")
	}
}
