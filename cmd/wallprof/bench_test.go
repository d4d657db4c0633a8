package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/wallprof/wallprof/internal/bench"
	"github.com/wallprof/wallprof/internal/pgtest"
)

// benchRepo makes a git repository of testdata/benchgt with two commits:
// A, and B whose Sum allocates in scratch. It returns the repository and
// the hashes of A and B.
func benchRepo(t *testing.T) (dir, a, b string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir = t.TempDir()
	for _, f := range []string{"go.mod", "gt.go", "gt_test.go"} {
		data, err := os.ReadFile(filepath.Join("testdata", "benchgt", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	git("add", ".")
	git("commit", "-q", "-m", "A")
	a = git("rev-parse", "HEAD")
	slower, err := os.ReadFile(filepath.Join("testdata", "benchgt", "slower.go.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "gt.go"), slower, 0o644); err != nil {
		t.Fatal(err)
	}
	git("commit", "-q", "-am", "B: allocate in scratch")
	b = git("rev-parse", "HEAD")
	return dir, a, b
}

// Small runs: the verdict rests on the U-test over 6 interleaved rounds.
var benchSmall = []string{"--count", "6", "--benchtime", "20000x"}

func TestBenchCheckGroundTruth(t *testing.T) {
	dir, a, _ := benchRepo(t)
	t.Chdir(dir)
	md := filepath.Join(t.TempDir(), "summary.md")
	page := filepath.Join(t.TempDir(), "check.html")
	code, stdout, stderr := runCmd(append([]string{"bench", "check", "--base", a, "--markdown", md, "--html", page}, benchSmall...)...)
	t.Logf("check A..B:\n%s%s", stdout, stderr)
	if code != exitError {
		t.Fatalf("check of B against A exited %d; want 1", code)
	}
	if !strings.Contains(stdout, "REGRESSION") || !strings.Contains(stdout, "example.com/benchgt.scratch") {
		t.Errorf("the output does not flag the regression and name example.com/benchgt.scratch")
	}
	for _, line := range strings.Split(stdout, "\n") {
		if strings.Contains(line, "REGRESSION") && !strings.Contains(line, "example.com/benchgt.Sum-") {
			t.Errorf("a regression of another benchmark: %s", line)
		}
	}
	m, err := os.ReadFile(md)
	if err != nil || !strings.Contains(string(m), ":x:") || !strings.Contains(string(m), "benchgt.scratch") {
		t.Errorf("markdown summary (%v):\n%s", err, m)
	}
	prof, _ := filepath.Glob(filepath.Join(dir, ".wallprof", "profiles", "*", "*.pprof"))
	want := 6 // CPU, memory and wall-clock of both versions
	if preflight() != "" {
		want = 4 // no wall-clock recording: "off-CPU recording skipped"
		if !strings.Contains(stdout, "off-CPU recording skipped") {
			t.Errorf("the explanation does not say the off-CPU recording was skipped")
		}
	}
	if len(prof) != want {
		t.Errorf("profiles stored: %v; want %d", prof, want)
	}
	t.Run("page", func(t *testing.T) { checkCheckPage(t, page) })

	// A against A, in JSON: no regression, exit 0.
	cmd := exec.Command("git", "checkout", "-q", a)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git checkout: %v %s", err, out)
	}
	code, stdout, stderr = runCmd(append([]string{"bench", "check", "--base", a, "--json"}, benchSmall...)...)
	if code != exitOK {
		t.Fatalf("check of A against A exited %d; want 0\n%s%s", code, stdout, stderr)
	}
	var rep bench.Report
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || rep.Format != bench.Format || rep.Regressions != 0 || len(rep.Deltas) != 3 {
		t.Errorf("A/A JSON (%v): %+v", err, rep)
	}

	// Every run was stored: history shows the two commits.
	code, stdout, stderr = runCmd("bench", "history", "BenchmarkSum", "--unit", "allocs/op")
	if code != exitOK || strings.Count(stdout, "n=") != 2 {
		t.Errorf("history exited %d:\n%s%s", code, stdout, stderr)
	}
}

func TestBenchBadInput(t *testing.T) {
	dir, a, _ := benchRepo(t)
	t.Chdir(dir)
	notBench := filepath.Join(t.TempDir(), "not.txt")
	os.WriteFile(notBench, []byte("PASS\nok  \texample.com/x\t0.1s\n"), 0o644)
	code, _, stderr := runCmd("bench", "import", notBench)
	if code != exitError || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "no benchmark results") {
		t.Errorf("import of non-benchmark output: exit %d, %q", code, stderr)
	}

	// A base that does not build.
	os.WriteFile(filepath.Join(dir, "broken.go"), []byte("package gt\nfunc broken() { undefined() }\n"), 0o644)
	gitIn(t, dir, "add", "broken.go")
	gitIn(t, dir, "commit", "-q", "-m", "broken")
	broken := gitIn(t, dir, "rev-parse", "HEAD")
	gitIn(t, dir, "checkout", "-q", a)
	md := filepath.Join(t.TempDir(), "summary.md")
	code, _, stderr = runCmd("bench", "check", "--base", broken, "--count", "2", "--benchtime", "10x", "--markdown", md)
	if code != exitError || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "does not build") {
		t.Errorf("check against a broken base: exit %d, %q", code, stderr)
	}
	if testing.Verbose() {
		t.Logf("broken base: %s", stderr)
	}
	if m, err := os.ReadFile(md); err != nil || !strings.Contains(string(m), "could not run") {
		t.Errorf("no Markdown summary of the failed check (%v): %s", err, m)
	}
	if out := gitIn(t, dir, "worktree", "list"); strings.Count(out, "\n") != 0 {
		t.Errorf("a worktree was left behind:\n%s", out)
	}

	// A locked database: one sentence, nothing stored, the database whole.
	good := filepath.Join(t.TempDir(), "good.txt")
	os.WriteFile(good, []byte("pkg: p\nBenchmarkX-2 10 100 ns/op\nBenchmarkX-2 10 110 ns/op\n"), 0o644)
	if code, _, stderr := runCmd("bench", "import", good); code != exitOK {
		t.Fatalf("import: %d %s", code, stderr)
	}
	dbPath := filepath.Join(dir, ".wallprof", "bench.db")
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	code, _, stderr = runCmd("bench", "import", good)
	if code != exitError || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "locked") {
		t.Errorf("import into a locked database: exit %d, %q", code, stderr)
	}
	if time.Since(start) > 30*time.Second {
		t.Errorf("waited %v for the lock", time.Since(start))
	}
	conn.ExecContext(context.Background(), "ROLLBACK")
	conn.Close()
	st, err := bench.Open(context.Background(), dbPath, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := st.Runs(context.Background())
	st.Close()
	if err != nil || len(runs) != 1 || len(runs[0].Results) != 2 {
		t.Errorf("after the locked import: %d runs (%v); want the 1 imported before", len(runs), err)
	}

	// A newer schema.
	if _, err := db.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runCmd("bench", "history", "X")
	if code != exitError || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "newer") {
		t.Errorf("newer schema: exit %d, %q", code, stderr)
	}
}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// 'wallprof bench' runs and stores under the commit; 'import' stores under
// --commit; history lists both commits in order.
func TestBenchRunImportHistory(t *testing.T) {
	dir, a, b := benchRepo(t)
	t.Chdir(dir)
	page := filepath.Join(t.TempDir(), "run.html")
	code, stdout, stderr := runCmd("bench", "--count", "3", "--benchtime", "100x", "--html", page)
	if code != exitOK || !strings.Contains(stdout, "commit "+b[:12]) || !strings.Contains(stdout, "Sum-2 allocs/op") {
		t.Fatalf("bench exited %d:\n%s%s", code, stdout, stderr)
	}
	// The run's page: Sum's trend in each unit, this commit its one point.
	if html, err := os.ReadFile(page); err != nil || strings.Count(string(html), `<svg class="trend"`) != 3 || !strings.Contains(string(html), ">"+b[:7]+"</text>") {
		t.Errorf("the run's page (%v) lacks the 3 trend charts of Sum at %s", err, b[:7])
	}
	old := filepath.Join(t.TempDir(), "old.txt")
	os.WriteFile(old, []byte("goos: linux\npkg: example.com/benchgt\nBenchmarkSum-2 100 4000 ns/op 0 B/op 0 allocs/op\nBenchmarkSum-2 100 4100 ns/op 0 B/op 0 allocs/op\n"), 0o644)
	if code, stdout, stderr := runCmd("bench", "import", "--commit", a, old); code != exitOK || !strings.Contains(stdout, a[:12]) {
		t.Fatalf("import exited %d:\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCmd("bench", "history", "Sum", "--unit", "B/op")
	if code != exitOK || strings.Index(stdout, b[:12]) > strings.Index(stdout, a[:12]) || !strings.Contains(stdout, a[:12]) {
		t.Errorf("history exited %d, commits not in run order:\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr := runCmd("bench", "history", "NoSuch"); code != exitError || strings.Count(stderr, "\n") != 1 {
		t.Errorf("history of an unknown benchmark: %d %q", code, stderr)
	}
}

// history marks the commit where a benchmark got slower: 12 commits, the
// last 6 at 130 ns/op instead of 100.
func TestBenchHistoryChangePoint(t *testing.T) {
	dir, _, _ := benchRepo(t)
	t.Chdir(dir)
	var commits []string
	data := t.TempDir()
	for i := range 12 {
		gitIn(t, dir, "commit", "-q", "--allow-empty", "-m", fmt.Sprint("c", i))
		commits = append(commits, gitIn(t, dir, "rev-parse", "HEAD"))
		base := 100.0
		if i >= 6 {
			base = 130
		}
		var b strings.Builder
		b.WriteString("pkg: example.com/h\n")
		for k := range 5 {
			fmt.Fprintf(&b, "BenchmarkSearch-2 1000 %.1f ns/op\n", base+float64((k*7+i*3)%5)-2)
		}
		f := filepath.Join(data, fmt.Sprint(i, ".txt"))
		os.WriteFile(f, []byte(b.String()), 0o644)
		if code, _, stderr := runCmd("bench", "import", "--commit", commits[i], f); code != exitOK {
			t.Fatalf("import: %s", stderr)
		}
	}
	code, stdout, stderr := runCmd("bench", "history", "BenchmarkSearch", "--permutations", "999")
	if code != exitOK {
		t.Fatalf("history exited %d: %s", code, stderr)
	}
	var marked []string
	for _, line := range strings.Split(stdout, "\n") {
		if strings.Contains(line, "change point") {
			marked = append(marked, strings.Fields(line)[0])
		}
	}
	if len(marked) != 1 || marked[0] != commits[6][:12] {
		t.Errorf("change points at %v; want [%s]:\n%s", marked, commits[6][:12], stdout)
	}
	t.Run("page", func(t *testing.T) {
		page := filepath.Join(t.TempDir(), "history.html")
		if code, _, stderr := runCmd("bench", "history", "BenchmarkSearch", "--permutations", "999", "--html", page); code != exitOK {
			t.Fatalf("history --html exited %d: %s", code, stderr)
		}
		br := loadPage(t, page, "svg.trend")
		marks, err := chromedp.Run(br.ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("svg.trend g.cp")).map(g => g.dataset.commit)`))
		if err != nil {
			t.Fatal(err)
		}
		if len(marks) != 1 || marks[0] != commits[6][:12] {
			t.Errorf("change point markers at %v; want [%s]", marks, commits[6][:12])
		}
		points, err := chromedp.Run(br.ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg.trend circle").length`))
		if err != nil || points != 12 {
			t.Errorf("%d points drawn (%v); want 12", points, err)
		}
		br.checkNoErrors(t)
	})
}

// loadPage opens an HTML page in headless Chromium and waits for sel.
func loadPage(t *testing.T, page, sel string) *browser {
	t.Helper()
	br := newBrowser(t, 1280, 900)
	if err := chromedp.Do(br.ctx, chromedp.Navigate("file://"+page), chromedp.WaitReady(sel)); err != nil {
		t.Fatalf("load %s: %v", page, err)
	}
	w, err := chromedp.Run(br.ctx, chromedp.Evaluate[float64](`document.querySelector(`+strconv.Quote(sel)+`).getBoundingClientRect().width`))
	if err != nil || w == 0 {
		t.Errorf("%s is not drawn (width %g, %v)", sel, w, err)
	}
	return br
}

// checkCheckPage checks the --html page of the ground-truth check: a
// trend chart, the regression highlighted in the table, and its
// differential flame graph drawn.
func checkCheckPage(t *testing.T, page string) {
	br := loadPage(t, page, "svg.trend")
	rows, err := chromedp.Run(br.ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("table.compare tr.regression td:first-child")).map(td => td.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 || !strings.HasPrefix(rows[0], "example.com/benchgt.Sum-") {
		t.Errorf("regression rows %q; want example.com/benchgt.Sum", rows)
	}
	charts, err := chromedp.Run(br.ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg.trend").length`))
	if err != nil || charts != 3 {
		t.Errorf("%d trend charts (%v); want 3, Sum's sec/op, B/op and allocs/op", charts, err)
	}
	// The flame graph is a document of its own in the iframe.
	_, err = chromedp.Run(br.ctx, chromedp.Poll[chromedp.Void](`(function(){var f = document.querySelector("iframe.flame"); return f && f.contentWindow.wallprofFlame !== undefined;})()`,
		chromedp.WithPollingTimeout(20*time.Second)))
	if err != nil {
		t.Fatalf("no flame graph drawn in the page: %v", err)
	}
	names, err := chromedp.Run(br.ctx, chromedp.Evaluate[[]string](`document.querySelector("iframe.flame").contentWindow.wallprofFlame.frames().map(f => f.name)`))
	if err != nil {
		t.Fatal(err)
	}
	// The CPU profile has about ten samples: the benchmark's function is
	// in them all, scratch not always.
	if !slices.Contains(names, "example.com/benchgt.Sum") {
		t.Errorf("the flame graph has no frame example.com/benchgt.Sum among its %d frames", len(names))
	}
	br.checkNoErrors(t)
}

// The goal, through the command: 50 commits × 20 benchmarks × 10
// samples (sec/op, B/op, allocs/op), benchmarks Op00, Op05, Op10 and Op15
// 10% slower from commit 31 on, ±2% noise everywhere. 'wallprof bench
// history' answers in under 1 s from SQLite and from Postgres and marks
// exactly commit 31. (internal/bench's TestBenchHistoryScale checks every
// benchmark and BenchmarkHistory times it.)
func TestBenchHistoryScaleCLI(t *testing.T) {
	dbs := map[string]string{"sqlite": filepath.Join(t.TempDir(), "h.db")}
	if _, err := pgtest.Find(); err == nil && !testing.Short() {
		dbs["postgres"] = pgtest.Start(t)
	}
	commit := func(i int) string { return fmt.Sprintf("%040x", 0xabc000+i) }
	for kind, dsn := range dbs {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			st, err := bench.Open(ctx, dsn, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(1, 14))
			for c := range 50 {
				run := &bench.Run{Commit: commit(c), Time: time.Unix(int64(1e9+3600*c), 0), Label: "import"}
				for b := range 20 {
					base := 1e-6 * float64(b+1)
					if b%5 == 0 && c >= 31 {
						base *= 1.10
					}
					for range 10 {
						run.Results = append(run.Results, bench.Result{Pkg: "example.com/big", Name: fmt.Sprintf("Op%02d-2", b), Iters: 1000,
							Config: map[string]string{"goos": "linux", "pkg": "example.com/big"},
							Values: []bench.Value{{Value: base * (1 + 0.04*(rng.Float64()-0.5)), Unit: "sec/op"}, {Value: 64, Unit: "B/op"}, {Value: 1, Unit: "allocs/op"}}})
					}
				}
				if err := st.Save(ctx, run); err != nil {
					t.Fatal(err)
				}
			}
			st.Close()
			for _, name := range []string{"BenchmarkOp05", "Op07"} {
				start := time.Now()
				code, stdout, stderr := runCmd("bench", "history", "--db", dsn, name)
				el := time.Since(start)
				if code != exitOK {
					t.Fatalf("history %s exited %d: %s", name, code, stderr)
				}
				if el > time.Second {
					t.Errorf("history %s took %v; the goal is under 1 s", name, el)
				}
				var marked []string
				for _, line := range strings.Split(stdout, "\n") {
					if strings.Contains(line, "change point") {
						marked = append(marked, strings.Fields(line)[0])
					}
				}
				want := "[" + commit(31)[:12] + "]"
				if name == "Op07" {
					want = "[]"
				}
				if fmt.Sprint(marked) != want || strings.Count(stdout, "n=10") != 50 {
					t.Errorf("history %s: change points at %v; want %s:\n%s", name, marked, want, stdout)
				}
				t.Logf("%s: history %s in %v", kind, name, el)
			}
		})
	}
}
