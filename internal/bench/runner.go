package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"
)

// RunConfig says how to run benchmarks.
type RunConfig struct {
	Packages  []string // package patterns; ./... when empty
	Bench     string   // the -bench regexp; "." when empty
	Count     int      // samples per benchmark (-count, or rounds of an A/B run)
	Benchtime string   // -benchtime; go's default when empty
	// Progress, if set, is told where Interleave stands before each
	// round and when the last one is done.
	Progress func(Progress)
}

func (c RunConfig) bench() string {
	if c.Bench == "" {
		return "."
	}
	return c.Bench
}

func (c RunConfig) packages() []string {
	if len(c.Packages) == 0 {
		return []string{"./..."}
	}
	return c.Packages
}

// Git describes the checkout at dir: its top directory, HEAD's hash and
// whether tracked files differ from it.
func Git(ctx context.Context, dir string) (top, commit string, dirty bool, err error) {
	out, err := command(ctx, dir, "git", "rev-parse", "--show-toplevel", "HEAD")
	if err != nil {
		return "", "", false, fmt.Errorf("%s is not in a git repository with a commit: %w", dir, err)
	}
	f := strings.Fields(out)
	if len(f) != 2 {
		return "", "", false, fmt.Errorf("git rev-parse printed %q", out)
	}
	st, err := command(ctx, dir, "git", "status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return "", "", false, err
	}
	return f[0], f[1], strings.TrimSpace(st) != "", nil
}

// ResolveRev returns the commit hash of rev in the repository at dir.
func ResolveRev(ctx context.Context, dir, rev string) (string, error) {
	out, err := command(ctx, dir, "git", "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("%q is not a commit of this repository", rev)
	}
	return strings.TrimSpace(out), nil
}

func command(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v: %s", filepath.Base(name), strings.Join(args, " "), err, oneLine(stderr.String()))
	}
	return string(out), nil
}

func newRun(label, commit string, dirty bool) *Run {
	host, _ := os.Hostname()
	return &Run{Commit: commit, Dirty: dirty, Time: time.Now(), Machine: host, Toolchain: runtime.Version(), Label: label}
}

// RunHere runs the benchmarks of the packages of cfg in dir, builds their
// test binaries with 'go test -c' and runs them in cfg.Count rounds, each
// binary once per round with -test.count 1 (as Interleave does for A/B
// runs), and returns the run, labelled "run", of the checkout's HEAD. A
// round runs every benchmark once, so slow changes of the machine (other
// tenants, heat) spread over all benchmarks evenly, where 'go test -count
// N' runs each benchmark N times in a row.
func RunHere(ctx context.Context, dir string, cfg RunConfig) (*Run, error) {
	_, commit, dirty, err := Git(ctx, dir)
	if err != nil {
		return nil, err
	}
	count := cfg.Count
	if count <= 0 {
		count = 10
	}
	tmp, err := os.MkdirTemp("", "wallprof-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	co := &Checkout{Dir: dir, Commit: commit, Dirty: dirty}
	if co.Binaries, err = BuildTests(ctx, dir, tmp, cfg); err != nil {
		return nil, err
	}
	runs, err := Interleave(ctx, []*Checkout{co}, []string{"run"}, cfg, count)
	if err != nil {
		return nil, err // an *InterruptedError holds the rounds done
	}
	if len(runs[0].Results) == 0 {
		return nil, fmt.Errorf("no benchmark matches -bench %s in %s", cfg.bench(), strings.Join(cfg.packages(), " "))
	}
	return runs[0], nil
}

// Binary is a test binary built from one package of one checkout.
type Binary struct {
	Path       string // the executable
	PkgDir     string // the package's directory, where it runs
	ImportPath string // the package's import path
}

// Checkout is one side of an A/B run: a directory and its test binaries.
type Checkout struct {
	Dir      string
	Commit   string
	Dirty    bool
	Binaries []Binary
}

// BuildTests builds the test binaries of the packages of cfg in dir into
// outDir with 'go test -c', skipping packages without test files.
func BuildTests(ctx context.Context, dir, outDir string, cfg RunConfig) ([]Binary, error) {
	out, err := command(ctx, dir, "go", append([]string{"list", "-f", "{{.Dir}}\t{{.ImportPath}}\t{{len .TestGoFiles}}{{len .XTestGoFiles}}"}, cfg.packages()...)...)
	if err != nil {
		return nil, fmt.Errorf("list the packages in %s: %w", dir, err)
	}
	var bins []Binary
	for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "\t")
		if len(f) != 3 || f[2] == "00" {
			continue
		}
		exe := filepath.Join(outDir, fmt.Sprintf("pkg%d.test", i))
		if _, err := command(ctx, f[0], "go", "test", "-c", "-o", exe, "."); err != nil {
			return nil, fmt.Errorf("build the tests of %s: %w", f[1], err)
		}
		bins = append(bins, Binary{Path: exe, PkgDir: f[0], ImportPath: f[1]})
	}
	if len(bins) == 0 {
		return nil, fmt.Errorf("no package with tests in %s", strings.Join(cfg.packages(), " "))
	}
	return bins, nil
}

// AddWorktree checks rev out in a new detached git worktree under tmp and
// returns its directory and a function that removes it.
func AddWorktree(ctx context.Context, repo, rev, tmp string) (string, func(), error) {
	dir := filepath.Join(tmp, "base")
	if _, err := command(ctx, repo, "git", "worktree", "add", "--detach", dir, rev); err != nil {
		return "", func() {}, err
	}
	return dir, func() {
		command(context.Background(), repo, "git", "worktree", "remove", "--force", dir)
	}, nil
}

// InterruptedError is the error of Interleave and RunHere when their
// context was cancelled (Ctrl-C) during the rounds: Runs hold the samples
// of the Rounds complete rounds (of Total), and are marked Incomplete.
type InterruptedError struct {
	Runs          []*Run
	Rounds, Total int
	Cause         error // context.Cause of the context
}

func (e *InterruptedError) Error() string {
	return fmt.Sprintf("interrupted after %d of %d rounds: %v", e.Rounds, e.Total, e.Cause)
}

func (e *InterruptedError) Unwrap() error { return e.Cause }

// Interleave runs the binaries of every checkout once per round with
// -test.count 1, rotating which checkout goes first from round to round,
// and returns one run per checkout, labelled by labels. When ctx is
// cancelled, the binary running is killed and the error is an
// *InterruptedError with the rounds complete before.
func Interleave(ctx context.Context, cos []*Checkout, labels []string, cfg RunConfig, rounds int) ([]*Run, error) {
	runs := make([]*Run, len(cos))
	for i, co := range cos {
		runs[i] = newRun(labels[i], co.Commit, co.Dirty)
	}
	step := NewProgress(cfg.Progress, "round", rounds)
	for r := range rounds {
		step(r)
		kept := make([]int, len(runs)) // the results before this round
		for i, run := range runs {
			kept[i] = len(run.Results)
		}
		for k := range cos {
			i := (k + r) % len(cos)
			for _, b := range cos[i].Binaries {
				res, err := runBinary(ctx, b, cfg, nil)
				if err != nil && ctx.Err() != nil {
					for i, run := range runs {
						run.Results = run.Results[:kept[i]]
						run.Incomplete = true
					}
					return nil, &InterruptedError{Runs: runs, Rounds: r, Total: rounds, Cause: context.Cause(ctx)}
				}
				if err != nil {
					return nil, err
				}
				runs[i].Results = append(runs[i].Results, res...)
			}
		}
	}
	step(rounds)
	return runs, nil
}

// benchArgs are the arguments of a test binary that runs the benchmarks
// of cfg once each, then extra.
func benchArgs(cfg RunConfig, extra []string) []string {
	args := []string{"-test.run", "^$", "-test.bench", cfg.bench(), "-test.benchmem", "-test.count", "1"}
	if cfg.Benchtime != "" {
		args = append(args, "-test.benchtime", cfg.Benchtime)
	}
	return append(args, extra...)
}

func runBinary(ctx context.Context, b Binary, cfg RunConfig, extra []string) ([]Result, error) {
	out, err := command(ctx, b.PkgDir, b.Path, benchArgs(cfg, extra)...)
	if err != nil {
		return nil, err
	}
	res, err := parse(strings.NewReader(out), filepath.Base(b.Path), false)
	if err == ErrNoBenchmarks {
		return nil, nil // a package without benchmarks matching
	}
	return res, err
}

var procsSuffix = regexp.MustCompile(`-\d+$`)

// BenchRegexp is the -test.bench pattern that selects exactly the
// benchmark of name (as in Result.Name).
func BenchRegexp(name string) string {
	parts := strings.Split(procsSuffix.ReplaceAllString(name, ""), "/")
	for i, p := range parts {
		if i == 0 {
			p = "Benchmark" + p
		}
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

// oneLine joins the lines of a command's stderr with "; ", leaving out the
// go tool's "# package" headers, and cuts it at 400 bytes.
func oneLine(msg string) string {
	var parts []string
	for _, l := range strings.Split(msg, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "# ") {
			parts = append(parts, l)
		}
	}
	s := strings.Join(parts, "; ")
	if len(s) > 400 {
		s = s[:400] + " ..."
	}
	return s
}
