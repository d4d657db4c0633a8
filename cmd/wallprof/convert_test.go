package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wallprof/wallprof/internal/present"
)

// convertSamples is where the converter's real samples live.
const convertSamples = "../../internal/convert/testdata"

func runCLI(t *testing.T, stdin []byte, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	if stdin != nil {
		f, err := os.CreateTemp(t.TempDir(), "stdin")
		if err != nil {
			t.Fatal(err)
		}
		f.Write(stdin)
		f.Seek(0, 0)
		old := os.Stdin
		os.Stdin = f
		defer func() { os.Stdin = old; f.Close() }()
	}
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// wallprof convert on a real perf script sample writes a profile that
// present.ReadProfileFile reads back, in each output format.
func TestConvertCLI(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(convertSamples, "perf-cpu.txt")
	out := filepath.Join(dir, "cpu.pb.gz")
	code, _, stderr := runCLI(t, nil, "convert", in, "-o", out)
	if code != exitOK || !strings.Contains(stderr, "read perf script output") {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	p, err := present.ReadProfileFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if tot := p.TotalByState(); tot[0] == 0 || len(p.Threads) == 0 {
		t.Errorf("on-CPU total %d, %d threads", tot[0], len(p.Threads))
	}

	// Collapsed from stdin, forced format, per thread with states.
	data, err := os.ReadFile(filepath.Join(convertSamples, "gdb.txt"))
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, data, "convert", "--from", "gdb", "--per-thread", "--states", "-o", "-", "--to", "collapsed", "-")
	if code != exitOK || !strings.Contains(stdout, "compute-0/") || !strings.Contains(stdout, ";[other] 20000000\n") {
		t.Errorf("exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	// speedscope, from the extension.
	ss := filepath.Join(dir, "gdb.speedscope.json")
	if code, _, stderr := runCLI(t, nil, "convert", filepath.Join(convertSamples, "gdb.txt"), "-o", ss, "-q"); code != exitOK || stderr != "" {
		t.Errorf("speedscope: exit %d, stderr %q", code, stderr)
	}
	var f map[string]any
	if b, err := os.ReadFile(ss); err != nil || json.Unmarshal(b, &f) != nil || f["$schema"] == nil {
		t.Errorf("speedscope output unreadable: %v", err)
	}
}

// A corrupted copy converts what it can and says what it skipped.
func TestConvertSkipped(t *testing.T) {
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(convertSamples, "eustack.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	lines[3] = "this line is garbage\n"
	lines[7] = "#9 zzz\n"
	in := filepath.Join(dir, "corrupt.txt")
	if err := os.WriteFile(in, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.pb.gz")
	code, _, stderr := runCLI(t, nil, "convert", in, "-o", out)
	want := `wallprof convert: skipped 2 of 66 lines that are not eu-stack output; the first, line 4: "this line is garbage".`
	if code != exitOK || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant %s", code, stderr, want)
	}
	if _, err := present.ReadProfileFile(out); err != nil {
		t.Error(err)
	}
}

// Bad uses and inputs give one sentence and the right exit code.
func TestConvertErrors(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.txt")
	os.WriteFile(junk, []byte("hello\nworld\n"), 0o644)
	empty := filepath.Join(dir, "empty.txt")
	os.WriteFile(empty, nil, 0o644)
	sample := filepath.Join(convertSamples, "ptpmp.txt")
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"help", []string{"convert", "--help"}, exitOK, "Usage: wallprof convert"},
		{"no input", []string{"convert", "-o", "x.pb.gz"}, exitUsage, "exactly one input"},
		{"no output", []string{"convert", sample}, exitUsage, "give an output file with -o"},
		{"unknown extension", []string{"convert", sample, "-o", filepath.Join(dir, "x.bin")}, exitUsage, "name it with --to"},
		{"bad from", []string{"convert", "--from", "dtrace", sample, "-o", "x.pb.gz"}, exitUsage, `unknown input format "dtrace"`},
		{"bad to", []string{"convert", "--to", "svg", sample, "-o", "x.pb.gz"}, exitUsage, `unknown --to "svg"`},
		{"bad pid", []string{"convert", "--pid", "x", sample, "-o", "x.pb.gz"}, exitUsage, "--pid takes"},
		{"missing input", []string{"convert", filepath.Join(dir, "nope"), "-o", filepath.Join(dir, "x.pb.gz")}, exitError, "does not exist"},
		{"undetectable", []string{"convert", junk, "-o", filepath.Join(dir, "x.pb.gz")}, exitError, "not in a format wallprof recognises"},
		{"empty", []string{"convert", empty, "-o", filepath.Join(dir, "x.pb.gz")}, exitError, "the input is empty"},
		{"nothing read", []string{"convert", "--from", "perf", sample, "-o", filepath.Join(dir, "x.pb.gz")}, exitError, "has no perf script output that wallprof could read"},
		{"not pprof", []string{"convert", "--from", "pprof", sample, "-o", filepath.Join(dir, "x.pb.gz")}, exitError, "is not a pprof profile"},
		{"unwritable", []string{"convert", sample, "-o", filepath.Join(dir, "no", "x.pb.gz")}, exitError, "cannot write"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, nil, c.args...)
			said := stderr
			if c.code == exitOK {
				said = stdout // --help
			}
			if code != c.code || !strings.Contains(said, c.want) {
				t.Errorf("exit %d (want %d), stderr:\n%s\nwant %q", code, c.code, stderr, c.want)
			}
			if strings.Count(strings.TrimSpace(stderr), "\n") > 0 && c.code != exitOK && c.code != exitUsage {
				t.Errorf("more than one line:\n%s", stderr)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "x.pb.gz")); err == nil {
		t.Error("a failed conversion left an output file")
	}
}
