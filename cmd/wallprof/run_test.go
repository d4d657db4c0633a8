package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/wallprof/wallprof/internal/goruntime/gctrace"
	"github.com/wallprof/wallprof/internal/runreport"
)

var updateRunScreenshot = flag.Bool("update-run-screenshot", false, "save the run report's screenshot to doc/images/run-report.png")

// buildSearchServer builds examples/searchserver.
func buildSearchServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "searchserver")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join("..", "..", "examples", "searchserver")
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the example server: %v\n%s", err, out)
	}
	return bin
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// investigate runs `wallprof run` on the example server and returns the
// report's data and the path of its HTML page.
func investigate(t *testing.T, server string, fixed bool) (*runreport.Report, string) {
	t.Helper()
	flags := []string{"--requests", "400", "--heap-interval", "250ms", "--src", filepath.Join("..", "..", "examples", "searchserver")}
	if fixed {
		return investigateWith(t, server, flags, "--fixed")
	}
	return investigateWith(t, server, flags)
}

// investigateWith runs `wallprof run` with flags (besides the load, the
// pprof URL and the output) on the example server, started with
// serverArgs besides its address and size, and returns the report's data
// and the path of its HTML page.
func investigateWith(t *testing.T, server string, flags []string, serverArgs ...string) (*runreport.Report, string) {
	t.Helper()
	addr := freePort(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "report.html")
	args := []string{"run", "--load", "http://" + addr + "/search?term=topic", "--concurrency", "4",
		"--pprof", "http://" + addr + "/debug/pprof", "-o", out}
	args = append(append(args, flags...), "--", server, "--addr", addr, "--docs", "1000")
	args = append(args, serverArgs...)
	code, output := wallprof(t, args...)
	t.Logf("wallprof %s\n%s", strings.Join(args, " "), output)
	if code != 0 {
		t.Fatalf("wallprof run exited %d", code)
	}
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep runreport.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	for kind, name := range rep.Artefacts {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("artefact %s: %v", kind, err)
		}
	}
	return &rep, out
}

// checkGCAgainstLog recomputes the collections of the load window from the
// captured gctrace log, independently of runreport.BuildGC.
func checkGCAgainstLog(t *testing.T, rep *runreport.Report, dir string) {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, rep.Artefacts["gctrace log (server stderr)"]))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l, err := gctrace.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var stw time.Duration
	var maxBefore int64
	for _, c := range l.Cycles {
		// wallprof's own forced collections at the edges are outside.
		if c.At >= rep.LoadStart && c.At <= rep.LoadEnd && !(c.Forced && (c.At < rep.LoadStart+100*time.Millisecond || c.At > rep.LoadEnd-100*time.Millisecond)) {
			n++
			stw += c.STW()
			maxBefore = max(maxBefore, c.HeapBefore)
		}
	}
	s := rep.GC.Summary
	if rep.GC.InLog != len(l.Cycles) {
		t.Errorf("report: %d collections in the log; the log has %d", rep.GC.InLog, len(l.Cycles))
	}
	if s.Collections != n {
		t.Errorf("report: %d collections during the load; the log has %d between %s and %s", s.Collections, n, rep.LoadStart, rep.LoadEnd)
	}
	if n > 0 {
		// The JSON rounds to the microsecond.
		if d := s.STW - stw; d < -time.Microsecond*time.Duration(n) || d > time.Microsecond*time.Duration(n) {
			t.Errorf("report: stop-the-world %s; the log says %s", s.STW, stw)
		}
		if s.HeapBefore.Max != maxBefore {
			t.Errorf("report: largest heap at a collection's start %d MB; the log says %d MB", s.HeapBefore.Max, maxBefore)
		}
		if want := float64(rep.Requests()) / float64(n); s.RequestsPerGC < want-0.01 || s.RequestsPerGC > want+0.01 {
			t.Errorf("report: %.2f requests per collection; %d requests / %d collections = %.2f", s.RequestsPerGC, rep.Requests(), n, want)
		}
	}
}

func TestRunSearchServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and loads the example server")
	}
	server := buildSearchServer(t)
	before, page := investigate(t, server, false)
	dir := filepath.Dir(page)

	if before.Load == nil || before.Load.Successes != 400 {
		t.Fatalf("load: want 400 successes, got %+v", before.Load)
	}
	// The hotspot is the top allocation site, with its reason.
	if before.Alloc == nil || len(before.Alloc.Sites) == 0 {
		t.Fatal("the report has no allocation sites")
	}
	top := before.Alloc.Sites[0]
	if top.File != "index.go" || top.Line != 62 {
		t.Errorf("top allocation site is %s:%d (%s); want index.go:62", top.File, top.Line, top.Func)
	}
	if !strings.Contains(strings.Join(top.Reasons, "\n"), "strings.ToLower allocates its result") {
		t.Errorf("index.go:62 reasons %q do not name strings.ToLower", top.Reasons)
	}
	if top.Percent < 50 {
		t.Errorf("index.go:62 has %.1f%% of the bytes; the workload makes it the large majority", top.Percent)
	}
	// The GC summary is that of the captured lines.
	if before.GC == nil {
		t.Fatal("the report has no GC section")
	}
	checkGCAgainstLog(t, before, dir)
	if before.GC.Summary.Collections < 5 {
		t.Errorf("only %d collections during the load before the fix", before.GC.Summary.Collections)
	}
	if before.Heap == nil || len(before.Heap.At) < 2 {
		t.Errorf("heap over time: %+v", before.Heap)
	}
	// The wall-clock profile, where this machine can record.
	if preflight() == "" || os.Getenv("CI") == "true" {
		if before.Profile == "" {
			t.Errorf("no wall-clock profile was recorded: %v", before.Notes)
		} else {
			p := readProfile(t, filepath.Join(dir, before.Profile))
			var hot bool
			for _, s := range p.Samples {
				hot = hot || stackHas(s, "main.(*Index).count")
			}
			if !hot {
				t.Error("the wall-clock profile never shows main.(*Index).count")
			}
		}
		// The server's request goroutines, by creation site.
		found := false
		for _, g := range before.Goroutines.Groups {
			if g.CreatedBy == "net/http.(*Server).Serve" && g.Func == "net/http.(*conn).serve" && g.Running > 0 {
				found = true
			}
		}
		if !found {
			t.Errorf("no running group of net/http.(*conn).serve goroutines in %+v", before.Goroutines)
		}
	}

	after, afterPage := investigate(t, server, true)
	checkGCAgainstLog(t, after, filepath.Dir(afterPage))
	t.Logf("collections per 1000 requests: %.2f before the fix, %.2f after; bytes per request %.0f → %.0f",
		before.GC.PerKRequests, after.GC.PerKRequests, before.Alloc.BytesPerRequest, after.Alloc.BytesPerRequest)
	if after.GC.PerKRequests >= before.GC.PerKRequests {
		t.Errorf("after the fix, %.2f collections per 1000 requests; before, %.2f", after.GC.PerKRequests, before.GC.PerKRequests)
	}
	if after.Alloc.BytesPerRequest >= before.Alloc.BytesPerRequest/4 {
		t.Errorf("after the fix, %.0f bytes per request; before, %.0f", after.Alloc.BytesPerRequest, before.Alloc.BytesPerRequest)
	}

	t.Run("browser", func(t *testing.T) { checkReportInBrowser(t, page) })
}

// Without --src, the allocation sites are the lines of the server's own
// code, ranked by bytes, as with it: the hotspot, index.go:62, first, not
// the other strings.ToLower call (index.go:58) nor the library function
// they both reach. Only the compiler's reasons are missing.
func TestRunSearchServerWithoutSources(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and loads the example server")
	}
	server := buildSearchServer(t)
	rep, page := investigateWith(t, server, []string{"--requests", "150", "--heap-interval", "0", "--no-record", "--trace", "1s"})
	// The execution trace of the load (--trace): summarised in the report,
	// with its own page and the trace next to it.
	if tr := rep.Trace; tr == nil {
		t.Errorf("no trace section; notes: %v", rep.Notes)
	} else {
		if tr.Sched.Count == 0 || tr.DurationMs < 500 {
			t.Errorf("trace section: %d scheduling latencies over %.0f ms; want a trace of the load", tr.Sched.Count, tr.DurationMs)
		}
		dir := filepath.Dir(page)
		for _, f := range []string{tr.Page, rep.Artefacts["execution trace"]} {
			if st, err := os.Stat(filepath.Join(dir, f)); f == "" || err != nil || st.Size() == 0 {
				t.Errorf("trace artefact %q: %v", f, err)
			}
		}
		if html, _ := os.ReadFile(page); !strings.Contains(string(html), `id="trace"`) {
			t.Error("the report's page has no trace section")
		}
	}
	if rep.Alloc == nil || len(rep.Alloc.Sites) < 2 {
		t.Fatalf("the report has too few allocation sites: %+v", rep.Alloc)
	}
	if rep.Alloc.Explained {
		t.Error("the sites are said to be explained by the compiler without --src")
	}
	top, second := rep.Alloc.Sites[0], rep.Alloc.Sites[1]
	if top.File != "index.go" || top.Line != 62 || top.Func != "main.(*Index).count-range2" || !top.User {
		t.Errorf("top allocation site is %s:%d (%s, user %v); want index.go:62 in main.(*Index).count-range2, as with --src", top.File, top.Line, top.Func, top.User)
	}
	if top.Percent < 50 || top.Bytes < second.Bytes {
		t.Errorf("index.go:62 has %.1f%% of the bytes (next: %s:%d with %d bytes); the workload makes it the large majority", top.Percent, second.File, second.Line, second.Bytes)
	}
	if second.File != "index.go" || second.Line != 58 {
		t.Errorf("second allocation site is %s:%d; want index.go:58 (the titles' strings.ToLower)", second.File, second.Line)
	}
	if !strings.Contains(strings.Join(top.Reasons, "\n"), "strings.ToLower allocates its result") {
		t.Errorf("index.go:62 reasons %q do not name strings.ToLower", top.Reasons)
	}
}

// checkReportInBrowser loads the report in headless Chromium: no page
// error, every section drawn, no network request; it saves a screenshot.
func checkReportInBrowser(t *testing.T, page string) {
	br := newBrowser(t, 1280, 900)
	bctx := br.ctx
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	must("load", chromedp.Do(bctx, chromedp.Navigate("file://"+page), chromedp.WaitVisible("#sites")))
	sels := []string{"#latency", "#gc svg.chart", "#heap svg.chart", "#sites", "#flame iframe"}
	if preflight() == "" {
		sels = append(sels, "#goroutines")
	}
	for _, sel := range sels {
		n, err := chromedp.Run(bctx, chromedp.Evaluate[int](fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)))
		must(sel, err)
		if n == 0 {
			t.Errorf("the report has no %s", sel)
		}
	}
	// The flame graph in its frame has drawn frames.
	_, err := chromedp.Run(bctx, chromedp.Poll[chromedp.Void](
		`(function(){var w=document.querySelector("#flame iframe").contentWindow; return w && w.wallprofFlame && w.wallprofFlame.frames().length > 0})()`,
		chromedp.WithPollingTimeout(20*time.Second)))
	must("flame graph in the report", err)
	topLine, err := chromedp.Run(bctx, chromedp.Text("#sites tr:nth-child(2)"))
	must("top site", err)
	if !strings.Contains(topLine, "index.go:62") || !strings.Contains(topLine, "strings.ToLower") {
		t.Errorf("the first row of the allocation table is %q", topLine)
	}
	resources, err := chromedp.Run(bctx, chromedp.Evaluate[int](`performance.getEntriesByType("resource").length`))
	must("resources", err)
	if resources != 0 {
		t.Errorf("the page loaded %d resources", resources)
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	must("screenshot", err)
	shot := filepath.Join(t.TempDir(), "run-report.png")
	if *updateRunScreenshot {
		shot = filepath.Join("..", "..", "doc", "images", "run-report.png")
	}
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", shot)

	br.checkNoErrors(t)
}

func TestRunBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run", "--load", "http://127.0.0.1:1/", "--rate", "10/s", "--duration", "1s"}, exitUsage, "give the server command after --"},
		{[]string{"run", "--rate", "10/s", "--duration", "1s", "--", "true"}, exitUsage, "say what to load the server with"},
		{[]string{"run", "--load", "http://127.0.0.1:1/", "--", "true"}, exitUsage, "give --rate R with --duration D"},
		{[]string{"run", "--load", "ftp://x/", "--rate", "1/s", "--duration", "1s", "--", "true"}, exitUsage, "must start with http://"},
		{[]string{"run", "--load", "http://127.0.0.1:1/", "--rate", "1/s", "--duration", "1s", "--pprof", "localhost:1", "--", "true"}, exitUsage, "--pprof"},
		{[]string{"run", "--load", "http://127.0.0.1:1/", "--rate", "1/s", "--duration", "1s", "--src", "/nonexistent", "--", "true"}, exitUsage, "--src /nonexistent is not a directory"},
		{[]string{"run", "--load", "http://127.0.0.1:1/", "--rate", "1/s", "--duration", "1s", "--", "/nonexistent/server"}, exitError, "command not found"},
		{[]string{"run", "--load", "http://127.0.0.1:1/", "--rate", "1/s", "--duration", "1s", "-o", "/nonexistent/r.html", "--", "true"}, exitError, "cannot write the report"},
		{[]string{"run", "--bogus"}, exitUsage, "flag provided but not defined"},
		// The server exits before it answers: its output is quoted.
		{[]string{"run", "--load", "http://127.0.0.1:1/", "--rate", "1/s", "--duration", "1s", "-o", filepath.Join(dir, "r.html"),
			"--", "sh", "-c", "echo cannot bind the port >&2; exit 3"}, exitError, "cannot bind the port"},
	} {
		code, _, stderr := runCmd(tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, stderr, tc.code, tc.want)
		}
		if strings.Count(strings.TrimSpace(stderr), "\n") > 0 && tc.code == exitUsage {
			t.Errorf("%v: more than one line: %q", tc.args, stderr)
		}
	}
}

// A server that dies during the load: the report is still written, with
// what was measured until then, and the exit status says it.
func TestRunServerDiesDuringLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and loads the example server")
	}
	server := buildSearchServer(t)
	addr := freePort(t)
	dir := t.TempDir()
	cmd := exec.Command(wallprofBin(t), "run", "--load", "http://"+addr+"/search?term=topic", "--rate", "50/s", "--duration", "20s",
		"--pprof", "http://"+addr+"/debug/pprof", "-o", filepath.Join(dir, "r.html"), "--", server, "--addr", addr, "--docs", "200")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	sc := bufio.NewScanner(stderr)
	pid := 0
	for sc.Scan() {
		line := sc.Text()
		log.WriteString(line + "\n")
		if i := strings.Index(line, "(pid "); i >= 0 && pid == 0 {
			fmt.Sscanf(line[i:], "(pid %d)", &pid)
		}
		if strings.Contains(line, "loading GET") {
			break
		}
	}
	if pid == 0 {
		t.Fatalf("no server pid in:\n%s", log.String())
	}
	time.Sleep(1500 * time.Millisecond)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
	}
	err = cmd.Wait()
	t.Logf("stderr:\n%s\nstdout:\n%s", log.String(), out.String())
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitError {
		t.Errorf("wallprof run: %v; want exit status %d", err, exitError)
	}
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("wallprof run took %s to finish after the server died", d)
	}
	if !strings.Contains(log.String(), "the server exited during the load") {
		t.Error("stderr does not say that the server exited")
	}
	data, err := os.ReadFile(filepath.Join(dir, "r.json"))
	if err != nil {
		t.Fatalf("no report data: %v", err)
	}
	var rep runreport.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Load == nil || rep.Load.Successes == 0 {
		t.Errorf("the report lost the requests served before the server died: %+v", rep.Load)
	}
	if _, err := os.Stat(filepath.Join(dir, "r.html")); err != nil {
		t.Error(err)
	}
	if rep.GC == nil || rep.GC.InLog == 0 {
		t.Error("the report lost the gctrace lines printed before the server died")
	}
}
