package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/wallprof/wallprof/internal/bench"
	"github.com/wallprof/wallprof/internal/outfile"
)

func init() {
	commands["bench"] = command{order: 75, run: runBench,
		usage: "  wallprof bench [flags] [PACKAGES]         run benchmarks, store them per commit; --base REV: A/B\n" +
			"  wallprof bench check --base REV           CI gate: exit 1 on a significant regression, explained\n" +
			"  wallprof bench history|import ...         a benchmark's trend across commits; store go test -bench output\n"}
}

const benchUsage = `Usage: wallprof bench [flags] [PACKAGES]
       wallprof bench --base REV [flags] [PACKAGES]
       wallprof bench check --base REV [flags] [PACKAGES]
       wallprof bench history [flags] NAME
       wallprof bench import [flags] FILE...

Keeps the benchmark history of the Go module in the current directory, in
the SQLite database .wallprof/bench.db of its git repository (created on
first use; --db postgres://... for a shared Postgres database), one run per
commit (and whether the tree had changes).

Without --base, builds the test binaries of PACKAGES (./... by default)
with 'go test -c' and runs them N rounds ('-run ^$ -bench B -benchmem
-count 1' each, so that every benchmark runs once per round), stores the
run under the current commit and prints each benchmark's median and 95%
confidence interval.

With --base REV, an A/B run: REV is checked out in a temporary git
worktree, the test binaries of both versions are built with 'go test -c',
and run interleaved, one -test.count 1 run of each per round for --rounds
rounds, the order rotating; both runs are stored and compared as benchstat
compares them (medians, Mann-Whitney U-test).

'check' is the same A/B comparison as a CI gate: it exits 1 when a
benchmark got worse significantly (p < --alpha) and by more than
--threshold, 0 otherwise. It explains each regression: it profiles the
benchmark of both versions (CPU and allocations, and, as root, a wallprof
recording for the time off CPU; stored under .wallprof/profiles) and lists
the functions whose cost per operation grew most. 'wallprof bench check
--help' has its flags.

'history NAME' prints the benchmark's median per commit, oldest first, with
the change points E-Divisive means finds; 'import' stores existing
'go test -bench' output. --html FILE (bench, check, history) also writes
one self-contained HTML page: the trend charts with their change points,
the comparison, and each regression with its differential flame graph.
See doc/bench.md.

While benchmarks run, stderr shows the round, the time elapsed and an
estimate of the time left: on a terminal one line rewritten in place,
elsewhere (a CI log) a plain line when a round ends, at most every 10 s.
Ctrl-C (or SIGTERM) stops the run: the benchmark running is killed, the
rounds complete are stored as a run marked incomplete, and the exit status
is 130 (143 after SIGTERM).

Flags:
`

// benchOpts are the flags the bench commands share.
type benchOpts struct {
	db        *string
	asJSON    *bool
	alpha     *float64
	threshold *float64
}

func addBenchOpts(fs *cmdFlags) benchOpts {
	o := addStoreOpts(fs)
	o.alpha = fs.Float64("alpha", 0.05, "a change is significant when the U-test's p < `α` (benchstat's -alpha)")
	o.threshold = fs.Float64("threshold", 0.05, "a regression must also change the median by more than this `fraction`")
	return o
}

// addStoreOpts adds the flags of the commands that compare nothing.
func addStoreOpts(fs *cmdFlags) benchOpts {
	return benchOpts{
		db:     fs.String("db", "", "the SQLite database `PATH` (default .wallprof/bench.db in the repository), or a postgres:// URL"),
		asJSON: fs.Bool("json", false, "write the result as JSON (schema "+bench.Format+")"),
	}
}

func (o benchOpts) check(fs *cmdFlags) (int, bool) {
	if o.alpha != nil && (*o.alpha <= 0 || *o.alpha >= 1) {
		return fs.usageError("--alpha must be between 0 and 1, not %g", *o.alpha), true
	}
	if o.threshold != nil && *o.threshold < 0 {
		return fs.usageError("--threshold must not be negative"), true
	}
	return 0, false
}

func (o benchOpts) options() bench.Options {
	return bench.Options{Alpha: *o.alpha, Threshold: *o.threshold}
}

// benchRunFlags are the flags of the commands that run benchmarks.
type benchRunFlags struct {
	base      *string
	bench     *string
	count     *int
	benchtime *string
}

func addRunFlags(fs *cmdFlags, count int) benchRunFlags {
	return benchRunFlags{
		base:      fs.String("base", "", "A/B against the git revision `REV` (a commit, branch or tag)"),
		bench:     fs.String("bench", ".", "run the benchmarks matching `REGEXP` (go test -bench)"),
		count:     fs.Int("count", count, "samples per benchmark: go test -count, or the rounds of an A/B run"),
		benchtime: fs.String("benchtime", "", "go test -benchtime (`1s`, 100x); go's default when empty"),
	}
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "check":
			return runBenchCheck(ctx, args[1:], stdout, stderr)
		case "history":
			return runBenchHistory(ctx, args[1:], stdout, stderr)
		case "import":
			return runBenchImport(ctx, args[1:], stdout, stderr)
		}
	}
	fs := newCmdFlags("bench", benchUsage, stdout, stderr)
	opts := addBenchOpts(fs)
	rf := addRunFlags(fs, 10)
	htmlPath := addPageFlag(fs)
	if code, done := fs.parse(args); done {
		return code
	}
	if code, done := opts.check(fs); done {
		return code
	}
	if *rf.count < 1 {
		return fs.usageError("--count must be at least 1")
	}
	cfg := bench.RunConfig{Packages: fs.Args(), Bench: *rf.bench, Count: *rf.count, Benchtime: *rf.benchtime}
	fail := failer("bench", stderr)
	page, err := openPage(*htmlPath)
	if err != nil {
		return fail(err)
	}
	defer page.abandon()
	st, top, code := openStore(ctx, *opts.db, fail)
	if st == nil {
		return code
	}
	defer st.Close()
	prog := newBenchProgress(stderr)
	cfg.Progress = prog.update
	if *rf.base != "" {
		ab, rep, err := compareAB(ctx, st, top, *rf.base, cfg, opts, "compare")
		prog.done()
		if code, ok := benchInterrupted(ctx, st, "bench", err, stderr); ok {
			return code
		}
		if err != nil {
			return fail(err)
		}
		defer ab.cleanup()
		if err := page.writeReport(ctx, st, rep); err != nil {
			return fail(err)
		}
		return writeCompare(stdout, rep, *opts.asJSON, fail)
	}
	run, err := bench.RunHere(ctx, ".", cfg)
	prog.done()
	if code, ok := benchInterrupted(ctx, st, "bench", err, stderr); ok {
		return code
	}
	if err != nil {
		return fail(err)
	}
	if err := saveRuns(ctx, st, run); err != nil {
		return fail(err)
	}
	if err := page.writeRun(ctx, st, run); err != nil {
		return fail(err)
	}
	return writeRun(stdout, "run", run, *opts.asJSON, fail)
}

// failer returns the function that prints err as the command's one
// sentence and returns exitError.
func failer(name string, stderr io.Writer) func(error) int {
	return func(err error) int {
		msg := strings.TrimSuffix(strings.TrimSpace(err.Error()), ".")
		if i := strings.IndexByte(msg, '\n'); i >= 0 {
			msg = msg[:i] + " ..."
		}
		fmt.Fprintf(stderr, "wallprof %s: %s.\n", name, msg)
		return exitError
	}
}

// openStore opens the database: path, or .wallprof/bench.db at the top of
// the git repository of the current directory. It returns the repository's
// top ("" outside a repository when path is given).
func openStore(ctx context.Context, path string, fail func(error) int) (bench.Store, string, int) {
	top, _, _, gerr := bench.Git(ctx, ".")
	if path == "" {
		if gerr != nil {
			return nil, "", fail(fmt.Errorf("not in a git repository (give --db): %w", gerr))
		}
		path = filepath.Join(top, ".wallprof", "bench.db")
	}
	st, err := bench.Open(ctx, path, 2*time.Second)
	if err != nil {
		return nil, "", fail(storeError(path, err))
	}
	return st, top, 0
}

func storeError(path string, err error) error {
	switch {
	case errors.Is(err, bench.ErrNewerSchema):
		return errors.New(strings.TrimSuffix(err.Error(), ": "+bench.ErrNewerSchema.Error()))
	case bench.IsLocked(err):
		return fmt.Errorf("the benchmark database %s is locked by another process; nothing was stored, try again when it is done", path)
	}
	return fmt.Errorf("benchmark database %s: %w", path, err)
}

func saveRuns(ctx context.Context, st bench.Store, runs ...*bench.Run) error {
	for _, r := range runs {
		if err := st.Save(ctx, r); err != nil {
			return storeError("", err)
		}
	}
	return nil
}

// compareAB runs the A/B benchmarks of rev against the work tree of repo,
// stores both runs and compares them. The caller cleans ab up.
func compareAB(ctx context.Context, st bench.Store, repo, rev string, cfg bench.RunConfig, opts benchOpts, command string) (*abRun, *bench.Report, error) {
	ab, err := runAB(ctx, repo, rev, cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := saveRuns(ctx, st, ab.base, ab.head); err != nil {
		ab.cleanup()
		return nil, nil, err
	}
	deltas := bench.Compare(ab.base, ab.head, opts.options())
	return ab, &bench.Report{Command: command, Runs: []bench.RunInfo{ab.base.Info(), ab.head.Info()},
		Alpha: *opts.alpha, Threshold: *opts.threshold, Deltas: deltas, Regressions: countRegressions(deltas)}, nil
}

func countRegressions(ds []bench.Delta) int {
	n := 0
	for _, d := range ds {
		if d.Regression {
			n++
		}
	}
	return n
}

func writeRun(stdout io.Writer, cmd string, run *bench.Run, asJSON bool, fail func(error) int) int {
	if asJSON {
		if err := bench.WriteJSON(stdout, &bench.Report{Command: cmd, Runs: []bench.RunInfo{run.Info()}}); err != nil {
			return fail(err)
		}
		return exitOK
	}
	dirty := ""
	if run.Dirty {
		dirty = " (with uncommitted changes)"
	}
	fmt.Fprintf(stdout, "stored run %d: commit %s%s, %d results\n", run.ID, bench.Short(run.Commit), dirty, len(run.Results))
	samples := run.Samples()
	for _, s := range bench.SortedSeries(samples) {
		h := bench.Histories([]*bench.Run{{Commit: run.Commit, Results: filterResults(run.Results, s)}}, s.Name, s.Unit, 0.05, 0)
		if len(h) == 0 || len(h[0].Points) == 0 {
			continue
		}
		sum := h[0].Points[0].Summary
		fmt.Fprintf(stdout, "  %-40s %12s ± %s  n=%d\n", s.Pkg+"."+s.Name+" "+s.Unit, bench.FormatValue(sum.Center, s.Unit),
			bench.FormatCI(sum), sum.N)
	}
	return exitOK
}

func filterResults(rs []bench.Result, s bench.Series) []bench.Result {
	var out []bench.Result
	for _, r := range rs {
		if r.Pkg == s.Pkg && r.Name == s.Name {
			out = append(out, r)
		}
	}
	return out
}

func writeCompare(stdout io.Writer, rep *bench.Report, asJSON bool, fail func(error) int) int {
	if asJSON {
		if err := bench.WriteJSON(stdout, rep); err != nil {
			return fail(err)
		}
		return exitOK
	}
	fmt.Fprintf(stdout, "base %s, new %s%s\n", bench.Short(rep.Runs[0].Commit), bench.Short(rep.Runs[1].Commit), map[bool]string{true: " (with uncommitted changes)"}[rep.Runs[1].Dirty])
	bench.WriteTable(stdout, rep.Deltas)
	return exitOK
}

// abRun is an A/B run's result and the worktree to remove.
type abRun struct {
	base, head *bench.Run
	cos        []*bench.Checkout
	tmp        string
	cleanup    func()
}

// runAB builds the test binaries of base (in a worktree) and of the
// current directory and runs them interleaved.
func runAB(ctx context.Context, top, rev string, cfg bench.RunConfig) (*abRun, error) {
	commit, err := bench.ResolveRev(ctx, top, rev)
	if err != nil {
		return nil, err
	}
	_, headCommit, dirty, err := bench.Git(ctx, ".")
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "wallprof-bench-")
	if err != nil {
		return nil, err
	}
	wt, remove, err := bench.AddWorktree(ctx, top, commit, tmp)
	ab := &abRun{tmp: tmp, cleanup: func() { remove(); os.RemoveAll(tmp) }}
	if err != nil {
		ab.cleanup()
		return nil, fmt.Errorf("check out %s: %w", rev, err)
	}
	// The same package directory, relative to the repository, in the worktree.
	cwd, _ := os.Getwd()
	rel, err := filepath.Rel(top, cwd)
	if err != nil || strings.HasPrefix(rel, "..") {
		rel = "."
	}
	baseCo := &bench.Checkout{Dir: filepath.Join(wt, rel), Commit: commit}
	headCo := &bench.Checkout{Dir: cwd, Commit: headCommit, Dirty: dirty}
	for i, co := range []*bench.Checkout{baseCo, headCo} {
		out := filepath.Join(tmp, []string{"base-bin", "new-bin"}[i])
		if err := os.MkdirAll(out, 0o755); err != nil {
			ab.cleanup()
			return nil, err
		}
		if co.Binaries, err = bench.BuildTests(ctx, co.Dir, out, cfg); err != nil {
			ab.cleanup()
			if i == 0 {
				return nil, fmt.Errorf("the base %s does not build: %w", rev, err)
			}
			return nil, err
		}
	}
	runs, err := bench.Interleave(ctx, []*bench.Checkout{baseCo, headCo}, []string{"base", "head"}, cfg, cfg.Count)
	if err != nil {
		ab.cleanup()
		return nil, err
	}
	ab.base, ab.head, ab.cos = runs[0], runs[1], []*bench.Checkout{baseCo, headCo}
	return ab, nil
}

const benchCheckUsage = `Usage: wallprof bench check --base REV [flags] [PACKAGES]

The CI gate: runs the benchmarks of REV and of the current tree A/B (see
'wallprof bench --help'), stores both runs, prints the comparison, and
exits 1 when a benchmark got worse significantly (p < --alpha) and by more
than --threshold, 0 otherwise. Each regression is explained: the benchmark
of both versions is profiled (CPU and allocations, and a wallprof recording
of the test binary for its time off CPU, which needs root and is skipped
with a note without it; the profiles are kept in .wallprof/profiles/RUN)
and the functions whose CPU time, allocated bytes and off-CPU time per
operation grew most are listed.

Flags:
`

func runBenchCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("bench check", benchCheckUsage, stdout, stderr)
	opts := addBenchOpts(fs)
	rf := addRunFlags(fs, 10)
	markdown := fs.String("markdown", "", "also write a Markdown summary to `FILE` (for a pull request comment)")
	explain := fs.Bool("explain", true, "profile each regression and list the functions that grew")
	top := fs.Int("top", 5, "list `N` functions per regression")
	htmlPath := addPageFlag(fs)
	if code, done := fs.parse(args); done {
		return code
	}
	if code, done := opts.check(fs); done {
		return code
	}
	if *rf.base == "" {
		return fs.usageError("give the revision to compare with, e.g. --base main")
	}
	if *rf.count < 2 {
		return fs.usageError("--count must be at least 2 for a test")
	}
	fail := failer("bench check", stderr)
	var md *outfile.File
	if *markdown != "" {
		var err error
		if md, err = outfile.Create(*markdown); err != nil {
			return fail(err)
		}
		defer md.Abandon()
		// A check that cannot run still leaves its summary for the CI.
		failText := fail
		fail = func(err error) int {
			fmt.Fprintf(md, "## wallprof bench check\n\n:warning: The check could not run: %s.\n", strings.TrimSuffix(err.Error(), "."))
			md.Commit()
			return failText(err)
		}
	}
	page, err := openPage(*htmlPath)
	if err != nil {
		return fail(err)
	}
	defer page.abandon()
	st, repo, code := openStore(ctx, *opts.db, fail)
	if st == nil {
		return code
	}
	defer st.Close()
	cfg := bench.RunConfig{Packages: fs.Args(), Bench: *rf.bench, Count: *rf.count, Benchtime: *rf.benchtime}
	prog := newBenchProgress(stderr)
	defer prog.done()
	cfg.Progress = prog.update
	ab, rep, err := compareAB(ctx, st, repo, *rf.base, cfg, opts, "check")
	prog.done()
	if code, ok := benchInterrupted(ctx, st, "bench check", err, stderr); ok {
		return code
	}
	if err != nil {
		return fail(err)
	}
	defer ab.cleanup()
	deltas := rep.Deltas
	if *explain {
		rep.Explanations, err = explainAll(ctx, ab, deltas, filepath.Join(repo, ".wallprof", "profiles", fmt.Sprint(ab.head.ID)), *top, prog.update)
		prog.done()
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "wallprof bench check: interrupted while explaining the regressions; the runs %d and %d are stored whole.\n", ab.base.ID, ab.head.ID)
			return interruptedCode(ctx)
		}
		if err != nil {
			fmt.Fprintf(stderr, "wallprof bench check: could not explain the regressions: %v\n", err)
		}
	}
	if err := page.writeReport(ctx, st, rep); err != nil {
		return fail(err)
	}
	if code := writeCompare(stdout, rep, *opts.asJSON, fail); code != exitOK {
		return code
	}
	if !*opts.asJSON {
		for _, ex := range rep.Explanations {
			fmt.Fprintln(stdout)
			bench.WriteExplanation(stdout, ex)
		}
		if rep.Regressions == 0 {
			fmt.Fprintf(stdout, "\nno significant regression above %g%%\n", *opts.threshold*100)
		} else {
			fmt.Fprintf(stdout, "\n%d significant regression(s) above %g%%\n", rep.Regressions, *opts.threshold*100)
		}
	}
	if md != nil {
		bench.WriteMarkdown(md, rep.Runs[0], rep.Runs[1], deltas, rep.Explanations, opts.options())
		if err := md.Commit(); err != nil {
			return fail(err)
		}
	}
	if rep.Regressions > 0 {
		return exitError
	}
	return exitOK
}

// explainAll explains each benchmark with a regression once (its sec/op,
// B/op or allocs/op may all have regressed).
func explainAll(ctx context.Context, ab *abRun, deltas []bench.Delta, dir string, top int, progress func(bench.Progress)) ([]*bench.Explanation, error) {
	var out []*bench.Explanation
	var todo []bench.Delta
	seen := map[[2]string]bool{}
	for _, d := range deltas {
		k := [2]string{d.Pkg, d.Name}
		if d.Regression && !seen[k] {
			seen[k] = true
			todo = append(todo, d)
		}
	}
	step := bench.NewProgress(progress, "explain", len(todo))
	for i, d := range todo {
		step(i)
		bb, okb := binaryOf(ab.cos[0], d.Pkg)
		hb, okh := binaryOf(ab.cos[1], d.Pkg)
		if !okb || !okh {
			continue
		}
		iters := medianIters(ab.head, d.Series)
		ex, err := bench.Explain(ctx, bb, hb, d.Series, iters, dir, top)
		if err != nil {
			return out, err
		}
		if err := bench.ExplainOffCPU(ctx, ex, bb, hb, iters, dir, top, recordBenchmark); err != nil {
			return out, err
		}
		out = append(out, ex)
	}
	step(len(todo))
	return out, nil
}

func binaryOf(co *bench.Checkout, pkg string) (bench.Binary, bool) {
	for _, b := range co.Binaries {
		if b.ImportPath == pkg || len(co.Binaries) == 1 && pkg == "" {
			return b, true
		}
	}
	return bench.Binary{}, false
}

func medianIters(r *bench.Run, s bench.Series) int {
	var it []int
	for _, res := range r.Results {
		if res.Pkg == s.Pkg && res.Name == s.Name {
			it = append(it, res.Iters)
		}
	}
	if len(it) == 0 {
		return 1
	}
	return it[len(it)/2]
}

const benchHistoryUsage = `Usage: wallprof bench history [flags] NAME

Prints the stored history of the benchmark NAME (with or without its
Benchmark prefix and -GOMAXPROCS suffix): its median and 95% confidence
interval per commit, in the order the commits were first run, and the
commits where E-Divisive means finds that its distribution changed. The
rounds kept from an interrupted run are a line of their own, marked
incomplete, and left out of the change-point search.

Flags:
`

func runBenchHistory(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("bench history", benchHistoryUsage, stdout, stderr)
	opts := addStoreOpts(fs)
	unit := fs.String("unit", "sec/op", "the `UNIT` (sec/op, B/op, allocs/op or a custom one); empty for all")
	perms := fs.Int("permutations", 199, "permutations of the change-point test")
	cpAlpha := fs.Float64("cp-alpha", 0.01, "a change point is kept when its permutation test's p < `α`")
	htmlPath := addPageFlag(fs)
	if code, done := fs.parse(args); done {
		return code
	}
	if code, done := opts.check(fs); done {
		return code
	}
	if fs.NArg() != 1 {
		return fs.usageError("give one benchmark name, e.g. 'wallprof bench history BenchmarkSearch'")
	}
	fail := failer("bench history", stderr)
	page, err := openPage(*htmlPath)
	if err != nil {
		return fail(err)
	}
	defer page.abandon()
	st, _, code := openStore(ctx, *opts.db, fail)
	if st == nil {
		return code
	}
	defer st.Close()
	hs, err := bench.LoadHistories(ctx, st, fs.Arg(0), *unit, *cpAlpha, *perms)
	if err != nil {
		return fail(err)
	}
	if len(hs) == 0 {
		return fail(fmt.Errorf("no stored results of %s in %s", fs.Arg(0), *unit))
	}
	if err := page.writeHistory(ctx, st, fs.Arg(0), *cpAlpha, *perms); err != nil {
		return fail(err)
	}
	if *opts.asJSON {
		if err := bench.WriteJSON(stdout, &bench.Report{Command: "history", Alpha: *cpAlpha, Histories: hs}); err != nil {
			return fail(err)
		}
		return exitOK
	}
	for _, h := range hs {
		bench.WriteHistory(stdout, h)
	}
	return exitOK
}

const benchImportUsage = `Usage: wallprof bench import [flags] FILE...

Stores existing 'go test -bench' output (the benchmark format; benchstat's
input) as one run per file, under --commit (default: the current commit, and
whether the tree has changes). FILE "-" is the standard input.

Flags:
`

func runBenchImport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newCmdFlags("bench import", benchImportUsage, stdout, stderr)
	opts := addStoreOpts(fs)
	commit := fs.String("commit", "", "store the runs under the git revision `REV`")
	if code, done := fs.parse(args); done {
		return code
	}
	if code, done := opts.check(fs); done {
		return code
	}
	if fs.NArg() == 0 {
		return fs.usageError("give the go test -bench output to import, e.g. 'wallprof bench import old.txt'")
	}
	fail := failer("bench import", stderr)
	var runs []*bench.Run
	for _, path := range fs.Args() {
		r, err := readRun(path)
		if err != nil {
			return fail(err)
		}
		runs = append(runs, r)
	}
	st, top, code := openStore(ctx, *opts.db, fail)
	if st == nil {
		return code
	}
	defer st.Close()
	hash, dirty := "", false
	if *commit != "" {
		h, err := bench.ResolveRev(ctx, top, *commit)
		if err != nil {
			return fail(err)
		}
		hash = h
	} else if _, h, d, err := bench.Git(ctx, "."); err == nil {
		hash, dirty = h, d
	}
	for _, r := range runs {
		r.Commit, r.Dirty = hash, dirty
	}
	if err := saveRuns(ctx, st, runs...); err != nil {
		return fail(err)
	}
	for _, r := range runs {
		if code := writeRun(stdout, "import", r, *opts.asJSON, fail); code != exitOK {
			return code
		}
	}
	return exitOK
}

func readRun(path string) (*bench.Run, error) {
	var f io.Reader = os.Stdin
	if path != "-" {
		file, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer file.Close()
		f = file
	}
	res, err := bench.Parse(f, path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	host, _ := os.Hostname()
	return &bench.Run{Time: time.Now(), Machine: host, Label: "import", Results: res}, nil
}
