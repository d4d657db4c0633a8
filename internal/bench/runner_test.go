package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// RunHere runs every benchmark once per round: with two benchmarks and 3
// rounds, A B A B A B, not A A A B B B as 'go test -count 3' would.
func TestBenchRunHereInterleaves(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a test binary")
	}
	for _, tool := range []string{"git", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip("no " + tool)
		}
	}
	dir := t.TempDir()
	order := filepath.Join(t.TempDir(), "order")
	t.Setenv("WALLPROF_TEST_ORDER", order)
	files := map[string]string{
		"go.mod": "module example.com/rounds\n\ngo 1.24\n",
		"r_test.go": `package rounds

import (
	"os"
	"testing"
)

func note(name string) {
	f, _ := os.OpenFile(os.Getenv("WALLPROF_TEST_ORDER"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	f.WriteString(name + "\n")
	f.Close()
}

func BenchmarkA(b *testing.B) { note("A"); for b.Loop() {} }
func BenchmarkB(b *testing.B) { note("B"); for b.Loop() {} }
`}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "c"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v %s", args, err, out)
		}
	}
	run, err := RunHere(context.Background(), dir, RunConfig{Count: 3, Benchtime: "10x"})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(order)
	var seq []string // without the repeated calls of one run (b.N ramp-up)
	for _, l := range strings.Fields(string(data)) {
		if len(seq) == 0 || seq[len(seq)-1] != l {
			seq = append(seq, l)
		}
	}
	if got := strings.Join(seq, " "); got != "A B A B A B" {
		t.Errorf("benchmarks ran in the order %s; want A B A B A B", got)
	}
	s := run.Samples()
	if len(s) != 6 || len(s[Series{"example.com/rounds", "A-" + procs(run), "sec/op"}]) != 3 || run.Label != "run" || run.Commit == "" {
		t.Errorf("run: %+v, samples %v", run, s)
	}
}

// procs is the -GOMAXPROCS suffix of the run's first result.
func procs(r *Run) string {
	if len(r.Results) == 0 {
		return ""
	}
	n := r.Results[0].Name
	return n[strings.LastIndexByte(n, '-')+1:]
}
