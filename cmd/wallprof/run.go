//go:build linux && amd64

package main

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/google/pprof/profile"

	"github.com/wallprof/wallprof/internal/collect"
	"github.com/wallprof/wallprof/internal/goruntime/escapes"
	"github.com/wallprof/wallprof/internal/goruntime/exectrace"
	"github.com/wallprof/wallprof/internal/goruntime/gctrace"
	"github.com/wallprof/wallprof/internal/linux"
	"github.com/wallprof/wallprof/internal/load"
	"github.com/wallprof/wallprof/internal/outfile"
	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/present/flame"
	"github.com/wallprof/wallprof/internal/record"
	"github.com/wallprof/wallprof/internal/runreport"
)

func init() {
	commands["run"] = command{order: 85, run: runRun,
		usage: "  wallprof run [flags] --load URL -- SERVER start a Go server, load it, profile it: one HTML report\n"}
}

const runUsage = `Usage: wallprof run [flags] --load '[METHOD] URL' -- SERVER [ARGS...]

Investigates a Go server in one command, and writes one self-contained HTML
report with the raw files next to it:

 1. starts SERVER with GODEBUG=gctrace=1, its output captured;
 2. waits until it answers (the load URL, or --ready URL);
 3. records its wall-clock profile (needs root; without it the report has
    no flame graph);
 4. applies the load (--rate R --duration D, or --concurrency C --requests N);
    with --pprof, fetches its allocation profile before and after the load
    and its heap profile every --heap-interval;
 5. stops the server: SIGTERM, then SIGKILL after --grace;
 6. reports the load, the collector during the load (collections, requests
    per collection, GC CPU, a heap and GC CPU timeline), bytes and objects
    allocated per request, the top allocation sites with the compiler's
    escape-analysis reason (with --src), the flame graph and the heap in use
    over time by allocation site.

Example:
  wallprof run --load 'POST http://localhost:8080/api/v1/evaluate' --body evaluate.json \
      --rate 1000/s --duration 30s --pprof http://localhost:8080/debug/pprof \
      --src . -o report.html -- ./server

Next to report.html: report.json (everything in the page, schema ` + runreport.Format + `),
report.load.json, report.gctrace.log (the server's stderr), report.stdout.log,
report.wall.pb.gz, report.allocs.pb.gz (allocations during the load),
report.heap.pb.gz and report.heap/ (the heap profiles over time).

Flags:
`

type runFlags struct {
	loadFlags
	target, ready, pprofURL, src, output string
	readyTimeout, heapInterval, grace    time.Duration
	trace                                time.Duration
	freq, top                            int
	noRecord                             bool
}

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f runFlags
	fs := newCmdFlags("run", runUsage, stdout, stderr)
	fs.StringVar(&f.target, "load", "", "the request to load the server with: '[METHOD] URL'")
	fs.StringVar(&f.targets, "targets", "", "read the requests from this file instead (vegeta's format), sent in turn")
	f.register(fs.FlagSet)
	fs.StringVar(&f.ready, "ready", "", "the server is ready when a GET of this URL answers 2xx (default: when a GET of the load URL gets any answer but a 5xx)")
	fs.DurationVar(&f.readyTimeout, "ready-timeout", 30*time.Second, "give up if the server is not ready after this long")
	fs.StringVar(&f.pprofURL, "pprof", "", "the server's net/http/pprof base URL, e.g. http://localhost:8080/debug/pprof")
	fs.DurationVar(&f.heapInterval, "heap-interval", time.Second, "with --pprof, fetch the heap profile this often during the load (0: only at the end)")
	fs.StringVar(&f.src, "src", "", "the server's source directory (its module): explain the top allocation sites with the compiler's escape analysis of ./...")
	fs.IntVar(&f.top, "top", 15, "show this many allocation sites")
	fs.DurationVar(&f.trace, "trace", 0, "with --pprof, take an execution trace this long when the load starts (/debug/pprof/trace) and add what it says: pauses, GC, scheduling latency, blocking (0: none)")
	fs.IntVar(&f.freq, "F", collect.DefaultFreq, "sampling frequency of the wall-clock profile in `Hz`")
	fs.BoolVar(&f.noRecord, "no-record", false, "do not record the wall-clock profile (it needs root)")
	fs.DurationVar(&f.grace, "grace", 5*time.Second, "after SIGTERM, wait this long for the server to exit before SIGKILL")
	fs.StringVar(&f.output, "o", "wallprof-run.html", "write the HTML report to `FILE`; the raw files go next to it")
	if code, done := fs.parseToArgs(args); done {
		return code
	}
	server := fs.Args()
	usageErr := fs.usageError
	if len(server) == 0 {
		return usageErr("give the server command after --, e.g. 'wallprof run --load http://localhost:8080/ --rate 100/s --duration 10s -- ./server'.")
	}
	if f.target == "" && f.targets == "" {
		return usageErr("say what to load the server with: --load '[METHOD] URL' or --targets FILE.")
	}
	var targetArgs []string
	if f.target != "" {
		targetArgs = strings.Fields(f.target)
	}
	opts, err := loadOptions(&f.loadFlags, targetArgs)
	if err != nil {
		return usageErr("%v.", err)
	}
	if err := opts.Validate(); err != nil {
		return usageErr("%s.", strings.TrimPrefix(err.Error(), load.ErrOptions.Error()+": "))
	}
	if f.freq < 1 || f.freq > collect.MaxFreq {
		return usageErr("-F %d is out of range: use 1 to %d Hz.", f.freq, collect.MaxFreq)
	}
	if f.heapInterval < 0 || f.grace < 0 || f.readyTimeout <= 0 {
		return usageErr("--heap-interval and --grace cannot be negative, and --ready-timeout must be positive.")
	}
	if f.pprofURL != "" && !strings.HasPrefix(f.pprofURL, "http://") && !strings.HasPrefix(f.pprofURL, "https://") {
		return usageErr("--pprof %q must be an http:// or https:// URL, e.g. http://localhost:8080/debug/pprof.", f.pprofURL)
	}
	if f.trace < 0 || f.trace > 0 && f.pprofURL == "" {
		return usageErr("--trace needs --pprof (the trace comes from the server's /debug/pprof/trace) and a positive duration.")
	}
	if f.src != "" {
		if st, err := os.Stat(f.src); err != nil || !st.IsDir() {
			return usageErr("--src %s is not a directory.", f.src)
		}
	}
	path, err := exec.LookPath(server[0])
	if err != nil {
		fmt.Fprintf(stderr, "wallprof run: command not found: %s.\n", server[0])
		return exitError
	}
	inv, err := newInvestigation(&f, server, path, opts, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "wallprof run: %v.\n", err)
		return exitError
	}
	return inv.run(ctx, stdout)
}

// investigation is one `wallprof run`.
type investigation struct {
	f      *runFlags
	argv   []string
	path   string
	opts   load.Options
	stderr io.Writer
	dir    string // the report's directory
	prefix string // the report's name without .html, in dir
	rep    *runreport.Report

	cmd      *exec.Cmd
	exited   chan struct{}
	waited   error
	t0       time.Time
	rec      *record.Recording
	wallPath string // where the wall-clock profile goes
	died     bool   // the server exited during the load
}

func newInvestigation(f *runFlags, argv []string, path string, opts load.Options, stderr io.Writer) (*investigation, error) {
	out, err := filepath.Abs(f.output)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(out)
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("cannot write the report to %s: %s is not a directory", f.output, dir)
	}
	// Can the report be written? Find out before the server starts.
	probe, err := outfile.Create(out)
	if err != nil {
		return nil, fmt.Errorf("cannot write the report to %s: %v", f.output, errors.Unwrap(err))
	}
	probe.Abandon()
	prefix := strings.TrimSuffix(filepath.Base(out), filepath.Ext(out))
	return &investigation{f: f, argv: argv, path: path, opts: opts, stderr: stderr, dir: dir, prefix: prefix,
		rep: &runreport.Report{Format: runreport.Format, Command: argv, Artefacts: map[string]string{}}}, nil
}

// file returns the name of an artefact (relative to the report) and its path.
func (inv *investigation) file(kind, suffix string) (string, string) {
	name := inv.prefix + suffix
	inv.rep.Artefacts[kind] = name
	return name, filepath.Join(inv.dir, name)
}

func (inv *investigation) note(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	inv.rep.Notes = append(inv.rep.Notes, msg)
	fmt.Fprintf(inv.stderr, "wallprof run: %s\n", msg)
}

func (inv *investigation) say(format string, a ...any) {
	fmt.Fprintf(inv.stderr, "wallprof run: "+format+"\n", a...)
}

func (inv *investigation) run(ctx context.Context, stdout io.Writer) int {
	if err := inv.start(); err != nil {
		fmt.Fprintf(inv.stderr, "wallprof run: cannot start %s: %v.\n", inv.argv[0], err)
		return exitError
	}
	inv.say("started %s (pid %d), waiting for it to answer", strings.Join(inv.argv, " "), inv.cmd.Process.Pid)
	if err := inv.waitReady(ctx); err != nil {
		inv.terminate()
		fmt.Fprintf(inv.stderr, "wallprof run: %v\n", err)
		return exitError
	}
	inv.rep.Ready = time.Since(inv.t0)
	inv.startRecording()

	var allocsBefore *profile.Profile
	if inv.f.pprofURL != "" {
		// The heap profile holds the allocation counts too, and only
		// /heap honours gc=1, which makes the counts current.
		p, err := fetchProfile(ctx, inv.f.pprofURL, "heap", true)
		if err != nil {
			inv.note("cannot fetch the allocation profile, so there are no allocations per request and no heap chart: %v", err)
			inv.f.pprofURL = ""
		} else {
			allocsBefore = p
		}
	}
	series := inv.startHeapSeries(ctx)
	trace := inv.startTrace(ctx)

	res, loadErr := inv.applyLoad(ctx)
	heapSnaps, heapFailed := series.stop()
	inv.traceSection(trace)
	var allocsAfter, heapEnd *profile.Profile
	if allocsBefore != nil && inv.died {
		inv.note("no allocations per request: the server died before its allocation profile could be read again")
	} else if allocsBefore != nil {
		var err error
		if allocsAfter, err = fetchProfile(context.WithoutCancel(ctx), inv.f.pprofURL, "heap", true); err != nil {
			inv.note("cannot fetch the allocation profile after the load: %v", err)
		}
		heapEnd = allocsAfter
	}
	inv.stopRecording()
	inv.terminate()

	if loadErr != nil {
		inv.note("the load failed: %v", loadErr)
	}
	if res != nil {
		inv.rep.Load = res
		inv.rep.LoadStart = res.Started.Sub(inv.t0)
		inv.rep.LoadEnd = inv.rep.LoadStart + res.Wall
		name, p := inv.file("load results (JSON)", ".load.json")
		if err := writeFile(p, func(w io.Writer) error { return writeJSON(w, res) }); err != nil {
			inv.note("cannot write %s: %v", name, err)
		}
	}
	inv.gcSection()
	inv.allocSection(ctx, allocsBefore, allocsAfter, heapEnd)
	if len(heapSnaps) > 0 {
		snaps := heapSnaps
		if heapEnd != nil {
			snaps = append(snaps, runreport.HeapSnapshot{At: time.Since(inv.t0), Profile: heapEnd})
		}
		inv.rep.Heap = runreport.BuildHeapSeries(snaps, 8, heapFailed)
	}
	flameHTML := inv.wallSection()
	return inv.writeReport(stdout, flameHTML)
}

// start launches the server with GODEBUG=gctrace=1, in its own process
// group, its stdout and stderr going to files.
func (inv *investigation) start() error {
	_, outPath := inv.file("server stdout", ".stdout.log")
	_, errPath := inv.file("gctrace log (server stderr)", ".gctrace.log")
	outF, err := os.Create(outPath)
	if err != nil {
		return err
	}
	errF, err := os.Create(errPath)
	if err != nil {
		outF.Close()
		return err
	}
	cmd := exec.Command(inv.path, inv.argv[1:]...)
	cmd.Stdout, cmd.Stderr = outF, errF
	cmd.Env = withGCTrace(os.Environ())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	inv.t0 = time.Now()
	inv.rep.Started = inv.t0
	if err := cmd.Start(); err != nil {
		outF.Close()
		errF.Close()
		return err
	}
	inv.cmd = cmd
	inv.exited = make(chan struct{})
	go func() {
		inv.waited = cmd.Wait()
		outF.Close()
		errF.Close()
		close(inv.exited)
	}()
	return nil
}

// withGCTrace sets gctrace=1 in GODEBUG, keeping the other settings.
func withGCTrace(env []string) []string {
	out := make([]string, 0, len(env)+1)
	debug := "gctrace=1"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
			for _, s := range strings.Split(v, ",") {
				if s != "" && !strings.HasPrefix(s, "gctrace=") {
					debug += "," + s
				}
			}
			continue
		}
		out = append(out, kv)
	}
	return append(out, "GODEBUG="+debug)
}

// waitReady polls until the server answers, exits, or the time is up.
func (inv *investigation) waitReady(ctx context.Context) error {
	url, anyAnswer := inv.f.ready, false
	if url == "" {
		url, anyAnswer = inv.opts.Targets[0].URL, true
	}
	client := &http.Client{Timeout: time.Second}
	deadline := time.After(inv.f.readyTimeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	last := ""
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("bad readiness URL %s: %v.", url, err)
		}
		resp, err := client.Do(req)
		if err == nil {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			// Without --ready, any answer but a server error means the
			// server is up: a GET to a POST-only URL gets 405, say.
			if anyAnswer && resp.StatusCode < 500 || resp.StatusCode/100 == 2 {
				return nil
			}
			last = resp.Status
		} else {
			last = oneLine(err.Error())
		}
		select {
		case <-ctx.Done():
			return errors.New("interrupted before the server was ready.")
		case <-inv.exited:
			return fmt.Errorf("the server exited before it answered (%v); the end of its output:\n%s", inv.waited, inv.outputTail())
		case <-deadline:
			return fmt.Errorf("the server did not answer %s within %s (last: %s); raise --ready-timeout or check the URL.", url, inv.f.readyTimeout, last)
		case <-tick.C:
		}
	}
}

// outputTail returns the last lines the server wrote.
func (inv *investigation) outputTail() string {
	var b strings.Builder
	for _, kind := range []string{"server stdout", "gctrace log (server stderr)"} {
		data, _ := os.ReadFile(filepath.Join(inv.dir, inv.rep.Artefacts[kind]))
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 10 {
			lines = lines[len(lines)-10:]
		}
		for _, l := range lines {
			if l != "" {
				b.WriteString("  " + l + "\n")
			}
		}
	}
	if b.Len() == 0 {
		return "  (nothing)\n"
	}
	return b.String()
}

// startRecording attaches the recorder to the server, unless it cannot.
func (inv *investigation) startRecording() {
	if inv.f.noRecord {
		return
	}
	if msg := preflight(); msg != "" {
		inv.note("no wall-clock profile: %s (or pass --no-record)", strings.TrimSuffix(msg, "."))
		return
	}
	name, path := inv.file("wall-clock profile (pprof)", ".wall.pb.gz")
	program, _ := linux.ProgramAt(inv.path)
	rec, err := record.Start(inv.cmd.Process.Pid, record.Options{Freq: inv.f.freq, FollowForks: true, Goroutines: true,
		Command: strings.Join(inv.argv, " "), Program: program, Plan: setPlanFromEnv})
	if err != nil {
		inv.note("no wall-clock profile: %s", strings.TrimSuffix(startError(err), "."))
		delete(inv.rep.Artefacts, "wall-clock profile (pprof)")
		return
	}
	inv.rec, inv.wallPath = rec, path
	inv.rep.Profile = name
}

// stopRecording ends the recording; the profile is built later, by
// wallSection, once the server has stopped.
func (inv *investigation) stopRecording() {
	if inv.rec != nil && inv.rec.Stop() != nil {
		inv.note("the wall-clock recording failed")
		inv.rep.Profile = ""
	}
}

// wallSection builds and writes the recorded profile and returns the flame
// graph page.
func (inv *investigation) wallSection() []byte {
	if inv.rec == nil {
		return nil
	}
	p, err := inv.rec.Profile()
	if err != nil {
		return nil // stopRecording said why
	}
	if err := writeFile(inv.wallPath, func(w io.Writer) error { return present.WritePprof(w, p) }); err != nil {
		inv.note("cannot write the wall-clock profile: %v", err)
		inv.rep.Profile = ""
	}
	view, title := p, "Wall-clock time of "+strings.Join(inv.argv, " ")
	if len(p.Goroutines) > 0 {
		if gr, err := present.NewGoroutineReport(p, nil); err == nil {
			inv.rep.Goroutines = gr
		}
		if warn := present.GoCoverageWarning(p); warn != "" {
			inv.say("warning: %s", warn) // the report has it in its goroutine section
		}
		view, title = present.GoroutineView(p, nil), "Goroutine time of "+strings.Join(inv.argv, " ")
	}
	var b bytes.Buffer
	if err := flame.WriteHTML(&b, view, flame.Options{Title: title, Icicle: true}); err != nil {
		inv.note("cannot draw the flame graph: %v", err)
		return nil
	}
	return b.Bytes()
}

// applyLoad runs the load, with a progress line on a terminal.
func (inv *investigation) applyLoad(ctx context.Context) (*load.Result, error) {
	if lim, err := load.RaiseFileLimit(load.FilesNeeded(inv.opts)); err == nil && !lim.Enough() {
		inv.say("%s", lim.Advice())
	}
	opts := inv.opts
	var bar *progressBar
	if isTerminal(inv.stderr) {
		bar = &progressBar{w: inv.stderr}
		opts.Progress = bar.update
	}
	inv.say("loading %s", strings.Join(targetNames(opts.Targets), ", "))
	// The load stops early, with what it measured, if the server exits.
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-inv.exited:
			cancel()
		case <-lctx.Done():
		}
	}()
	res, err := load.Run(lctx, opts)
	if bar != nil {
		bar.clear()
	}
	select {
	case <-inv.exited:
		inv.died = true
		inv.note("the server exited during the load (%v); the report covers the load until then", inv.waited)
	default:
	}
	return res, err
}

func targetNames(ts []load.Target) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.String()
	}
	return out
}

// terminate stops the server: SIGTERM to its process group, then SIGKILL
// after the grace period.
func (inv *investigation) terminate() {
	if inv.cmd == nil {
		return
	}
	select {
	case <-inv.exited:
		return
	default:
	}
	pgid := inv.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-inv.exited:
	case <-time.After(inv.f.grace):
		inv.note("the server did not exit within %s of SIGTERM and was killed", inv.f.grace)
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-inv.exited
	}
}

// gcSection reads the captured gctrace lines.
func (inv *investigation) gcSection() {
	name := inv.rep.Artefacts["gctrace log (server stderr)"]
	f, err := os.Open(filepath.Join(inv.dir, name))
	if err != nil {
		inv.note("cannot read the server's output: %v", err)
		return
	}
	defer f.Close()
	l, err := gctrace.Parse(f)
	if err != nil {
		inv.note("cannot read the server's output: %v", err)
		return
	}
	g, err := runreport.BuildGC(l, inv.rep.LoadStart, inv.rep.LoadEnd, inv.rep.Requests())
	if err != nil {
		inv.note("the server printed no gctrace line: is it a Go program, and does it keep GODEBUG?")
		return
	}
	inv.rep.GC = g
}

// allocSection computes allocations per request and the top sites.
func (inv *investigation) allocSection(ctx context.Context, before, after, heapEnd *profile.Profile) {
	if heapEnd != nil {
		name, p := inv.file("heap profile at the end (pprof)", ".heap.pb.gz")
		if err := writeFile(p, heapEnd.Write); err != nil {
			inv.note("cannot write %s: %v", name, err)
		}
	}
	if before == nil || after == nil {
		return
	}
	d, err := runreport.Delta(before, after)
	if err != nil {
		inv.note("%v", err)
		return
	}
	name, path := inv.file("allocations during the load (pprof)", ".allocs.pb.gz")
	if err := writeFile(path, d.Write); err != nil {
		inv.note("cannot write %s: %v", name, err)
	}
	a := &runreport.Alloc{ProfilerBytes: runreport.DropProfiler(d, "alloc_space")}
	a.Bytes, a.Objects = runreport.Totals(d, "alloc_space", "alloc_objects")
	if n := inv.rep.Requests(); n > 0 {
		a.BytesPerRequest = float64(a.Bytes) / float64(n)
		a.ObjectsPerRequest = float64(a.Objects) / float64(n)
	}
	stacks, err := escapes.Stacks(d, "alloc_space")
	if err != nil {
		inv.note("cannot read the allocation profile: %v", err)
		inv.rep.Alloc = a
		return
	}
	var diags []escapes.Diagnostic
	var dir string
	if inv.f.src != "" {
		dir, _ = filepath.Abs(inv.f.src)
		inv.say("running the compiler's escape analysis in %s", inv.f.src)
		// Even after Ctrl-C: the load is over, and the reasons take seconds.
		diags, err = escapes.Analyze(context.WithoutCancel(ctx), dir, []string{"./..."})
		if err != nil {
			inv.note("no escape reasons: %v", oneLine(err.Error()))
		} else {
			a.Explained = true
		}
	}
	// The server's build information says which packages are its own, so
	// that without --src (or when the analysis failed) each allocation is
	// charged to the same line of its code, and ranked the same, as with it.
	bi, _ := buildinfo.ReadFile(inv.path)
	er := escapes.Join(stacks, diags, escapes.Options{Dir: dir, Sample: "alloc_space", Top: inv.f.top, Build: bi})
	a.Sites = er.Sites
	if a.Explained {
		name, path := inv.file("escape reasons of the top sites (JSON)", ".escapes.json")
		if err := writeFile(path, func(w io.Writer) error { return escapes.WriteJSON(w, er) }); err != nil {
			inv.note("cannot write %s: %v", name, err)
		}
	}
	inv.rep.Alloc = a
}

// writeReport writes report.json and the HTML page, and a summary on stdout.
func (inv *investigation) writeReport(stdout io.Writer, flameHTML []byte) int {
	jsonName, jsonPath := inv.file("report data (JSON)", ".json")
	htmlPath := filepath.Join(inv.dir, inv.prefix+filepath.Ext(inv.f.output))
	if filepath.Ext(inv.f.output) == "" {
		htmlPath += ".html"
	}
	if err := writeFile(jsonPath, func(w io.Writer) error { return runreport.WriteJSON(w, inv.rep) }); err != nil {
		fmt.Fprintf(inv.stderr, "wallprof run: cannot write %s: %v.\n", jsonName, err)
		return exitError
	}
	if err := writeFile(htmlPath, func(w io.Writer) error {
		return runreport.WriteHTML(w, inv.rep, runreport.Page{Flame: flameHTML})
	}); err != nil {
		fmt.Fprintf(inv.stderr, "wallprof run: cannot write %s: %v.\n", htmlPath, err)
		return exitError
	}
	inv.summary(stdout, htmlPath)
	switch {
	case inv.died:
		fmt.Fprintf(inv.stderr, "wallprof run: the server exited during the load; the report (%s) shows what was measured until then.\n", htmlPath)
		return exitError
	case inv.rep.Load == nil || inv.rep.Load.Successes == 0:
		fmt.Fprintln(inv.stderr, "wallprof run: no request succeeded; the report says what happened.")
		return exitError
	}
	return exitOK
}

func (inv *investigation) summary(w io.Writer, htmlPath string) {
	r := inv.rep
	if l := r.Load; l != nil {
		fmt.Fprintf(w, "load:        %d requests, %.0f/s succeeded (%.1f%%), p50 %s, p99 %s, max %s\n",
			l.Requests, l.Throughput, 100*l.SuccessRatio, l.Latency.P50, l.Latency.P99, l.Latency.Max)
	}
	if g := r.GC; g != nil {
		s := g.Summary
		per := "no collection"
		if s.Collections > 0 {
			per = fmt.Sprintf("%.1f requests per collection", s.RequestsPerGC)
		}
		fmt.Fprintf(w, "collector:   %d collections during the load, %s, %.2f per 1000 requests", s.Collections, per, g.PerKRequests)
		if s.Span > 0 {
			fmt.Fprintf(w, ", GC CPU %.1f%%", s.CPUPercent)
		}
		fmt.Fprintln(w)
	}
	if a := r.Alloc; a != nil {
		fmt.Fprintf(w, "allocations: %s and %.0f objects per request\n", escapes.FormatBytes(int64(a.BytesPerRequest)), a.ObjectsPerRequest)
		if len(a.Sites) > 0 {
			s := a.Sites[0]
			why := ""
			if len(s.Reasons) > 0 {
				why = ": " + s.Reasons[0]
			}
			fmt.Fprintf(w, "top site:    %s:%d %s (%.1f%%)%s\n", s.File, s.Line, s.Func, s.Percent, why)
		}
	}
	if r.Profile != "" {
		fmt.Fprintf(w, "profile:     %s\n", filepath.Join(inv.dir, r.Profile))
	}
	fmt.Fprintf(w, "report:      %s\n", htmlPath)
}

// heapSeries fetches heap profiles in the background.
type heapSeries struct {
	done  chan struct{}
	ended chan struct{}
	snaps []runreport.HeapSnapshot
	fail  int
}

func (inv *investigation) startHeapSeries(ctx context.Context) *heapSeries {
	h := &heapSeries{done: make(chan struct{}), ended: make(chan struct{})}
	if inv.f.pprofURL == "" || inv.f.heapInterval == 0 {
		close(h.ended)
		return h
	}
	_, dirPath := inv.file("heap profiles over time (pprof)", ".heap")
	inv.rep.Artefacts["heap profiles over time (pprof)"] += "/"
	if err := os.MkdirAll(dirPath, 0o755); err != nil {
		inv.note("cannot create %s: %v", dirPath, err)
		close(h.ended)
		return h
	}
	go func() {
		defer close(h.ended)
		tick := time.NewTicker(inv.f.heapInterval)
		defer tick.Stop()
		for {
			at := time.Since(inv.t0)
			p, err := fetchProfile(ctx, inv.f.pprofURL, "heap", false)
			if err != nil {
				h.fail++
			} else {
				h.snaps = append(h.snaps, runreport.HeapSnapshot{At: at, Profile: p})
				_ = writeFile(filepath.Join(dirPath, fmt.Sprintf("%03d-%.1fs.pb.gz", len(h.snaps), at.Seconds())), p.Write)
			}
			select {
			case <-h.done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return h
}

func (h *heapSeries) stop() ([]runreport.HeapSnapshot, int) {
	select {
	case <-h.done:
	default:
		close(h.done)
	}
	<-h.ended
	return h.snaps, h.fail
}

// fetchProfile fetches one profile from net/http/pprof; gc asks the server
// to collect first, so that the profile is current (the runtime publishes
// allocation counts at the end of a collection; only /heap honours gc=1).
func fetchProfile(ctx context.Context, base, name string, gc bool) (*profile.Profile, error) {
	url := strings.TrimRight(base, "/") + "/" + name
	if gc {
		url += "?gc=1"
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		var ue *neturl.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("GET %s: %v", url, oneLine(err.Error()))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	p, err := profile.Parse(io.LimitReader(resp.Body, 512<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: not a pprof profile: %v", url, err)
	}
	return p, nil
}

// startTrace starts taking the server's execution trace (--trace) and
// returns a channel that says when it is in, or why not.
func (inv *investigation) startTrace(ctx context.Context) <-chan error {
	if inv.f.trace <= 0 || inv.f.pprofURL == "" {
		return nil
	}
	_, path := inv.file("execution trace", ".trace.out")
	done := make(chan error, 1)
	go func() {
		url := fmt.Sprintf("%s/trace?seconds=%g", strings.TrimRight(inv.f.pprofURL, "/"), inv.f.trace.Seconds())
		ctx, cancel := context.WithTimeout(ctx, inv.f.trace+30*time.Second)
		defer cancel()
		err := func() error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return fmt.Errorf("GET %s: %v", url, oneLine(err.Error()))
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET %s: %s", url, resp.Status)
			}
			return writeFile(path, func(w io.Writer) error {
				_, err := io.Copy(w, io.LimitReader(resp.Body, 4<<30))
				return err
			})
		}()
		done <- err
	}()
	return done
}

// traceSection waits for the execution trace and summarises it: its own
// page and profiles next to the report, its key figures in it.
func (inv *investigation) traceSection(trace <-chan error) {
	if trace == nil {
		return
	}
	if err := <-trace; err != nil {
		inv.note("no execution trace: %v", err)
		delete(inv.rep.Artefacts, "execution trace")
		return
	}
	name := inv.rep.Artefacts["execution trace"]
	f, err := os.Open(filepath.Join(inv.dir, name))
	if err != nil {
		inv.note("cannot read the execution trace: %v", err)
		return
	}
	defer f.Close()
	s, err := exectrace.Analyze(f, exectrace.Options{Name: name})
	if err != nil {
		inv.note("cannot read the execution trace: %v", err)
		return
	}
	page, pagePath := inv.file("execution trace (HTML)", ".trace.html")
	profiles, err := exectrace.WriteProfiles(s, strings.TrimSuffix(pagePath, ".html")+"-")
	if err != nil {
		inv.note("cannot write the execution trace's profiles: %v", err)
	}
	for i, p := range profiles {
		profiles[i] = filepath.Base(p)
	}
	if err := writeFile(pagePath, func(w io.Writer) error { return exectrace.WriteHTML(w, s, profiles) }); err != nil {
		inv.note("cannot write the execution trace's page: %v", err)
		page = ""
	}
	inv.rep.Trace = runreport.TraceOf(s, page)
}

// writeFile writes a file atomically (outfile.Write), so that a failed
// write leaves no half file.
func writeFile(path string, write func(io.Writer) error) error {
	return outfile.Write(path, write)
}
