package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

// The command's errors are one sentence; the ranking and reasons are tested
// in internal/goruntime/escapes. One real run checks the wiring.
func TestEscapes(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI needs the go command: %v", err)
		}
		t.Skipf("the go command is not on PATH: %v", err)
	}
	tmp := t.TempDir()
	app := filepath.Join("..", "..", "internal", "goruntime", "escapes", "testdata", "app")
	bin, allocs := filepath.Join(tmp, "app"), filepath.Join(tmp, "allocs.pb.gz")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = app
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build testdata/app: %v\n%s", err, out)
	}
	if out, err := exec.Command(bin, allocs).CombinedOutput(); err != nil {
		t.Fatalf("run testdata/app: %v\n%s", err, out)
	}
	cpu := filepath.Join(tmp, "cpu.pb.gz")
	writeCPUProfile(t, cpu)
	garbage := filepath.Join(tmp, "garbage.pb.gz")
	if err := os.WriteFile(garbage, []byte("not a profile"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(tmp, "nope.pb.gz")
	for _, c := range []struct {
		args       []string
		code       int
		want       []string
		wantStderr string
	}{
		{args: []string{"--profile", allocs, "--dir", app, "--top", "3"}, want: []string{
			"#  bytes  %  objects  location",
			"1", "main.go:45 main.search",
			"strings.ToLower allocates its result (inside a loop); called from main.go:45 (search)"}},
		{args: []string{".", "--dir", app, "--profile", allocs, "--sample", "alloc_objects", "--json"}, want: []string{
			`"format": "wallprof.escapes/v1"`, `"sample": "alloc_objects"`, `"line": 45`}},
		{args: []string{"--dir", app}, code: exitUsage, wantStderr: "give the allocation profile with --profile"},
		{args: []string{"--profile", missing, "--dir", app}, code: exitError, wantStderr: "wallprof escapes: " + missing + " does not exist.\n"},
		{args: []string{"--profile", garbage, "--dir", app}, code: exitError, wantStderr: "is not a pprof profile"},
		{args: []string{"--profile", cpu, "--dir", app}, code: exitError, wantStderr: "has no allocation samples (alloc_space, alloc_objects, inuse_space or inuse_objects)"},
		{args: []string{"--profile", allocs, "--dir", app, "--sample", "bytes"}, code: exitError, wantStderr: `unknown sample "bytes"`},
		{args: []string{"--profile", allocs, "--dir", app, "./nope"}, code: exitError, wantStderr: "wallprof escapes: go build ./nope failed: "},
		{args: []string{"--profile", allocs, "--dir", filepath.Join(tmp, "nodir")}, code: exitError, wantStderr: "is not a directory"},
		{args: []string{"--profile", allocs, "--top", "-1"}, code: exitUsage, wantStderr: "--top wants a count"},
	} {
		var stdout, stderr bytes.Buffer
		code := runEscapes(context.Background(), c.args, &stdout, &stderr)
		if code != c.code || !strings.Contains(stderr.String(), c.wantStderr) {
			t.Errorf("escapes %q: exit %d, stderr %q", c.args, code, stderr.String())
		}
		if c.code != exitOK && strings.Count(strings.TrimSpace(stderr.String()), "\n") > 0 {
			t.Errorf("escapes %q: error is more than one line: %q", c.args, stderr.String())
		}
		out := strings.Join(strings.Fields(stdout.String()), " ")
		for _, w := range c.want {
			if !strings.Contains(out, strings.Join(strings.Fields(w), " ")) {
				t.Errorf("escapes %q lacks %q:\n%s", c.args, w, stdout.String())
			}
		}
		if c.code == exitOK && strings.Contains(strings.Join(c.args, " "), "--json") {
			var v map[string]any
			if err := json.Unmarshal(stdout.Bytes(), &v); err != nil {
				t.Errorf("escapes %q: output is not JSON: %v", c.args, err)
			}
		}
	}
}

func writeCPUProfile(t *testing.T, path string) {
	t.Helper()
	fn := &profile.Function{ID: 1, Name: "main.main", Filename: "main.go"}
	loc := &profile.Location{ID: 1, Line: []profile.Line{{Function: fn, Line: 3}}}
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Sample:     []*profile.Sample{{Location: []*profile.Location{loc}, Value: []int64{1, 10000000}}},
		Location:   []*profile.Location{loc},
		Function:   []*profile.Function{fn},
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := p.Write(f); err != nil {
		t.Fatal(err)
	}
}
