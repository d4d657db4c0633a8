package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The command reads logs, compares two, writes JSON and fails in one
// sentence; the summaries themselves are golden-tested in
// internal/goruntime/gctrace.
func TestGctrace(t *testing.T) {
	dir := t.TempDir()
	logs := filepath.Join("..", "..", "internal", "goruntime", "gctrace", "testdata")
	old, cur := filepath.Join(logs, "go1.16.15.log"), filepath.Join(logs, "go1.26.8.log")
	plain := filepath.Join(dir, "server.log")
	if err := os.WriteFile(plain, []byte("listening on :8080\nserved 10 requests\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "nope.log")
	for _, c := range []struct {
		args       []string
		code       int
		want       []string
		wantStderr string
	}{
		{args: []string{cur}, want: []string{"gctrace:          " + cur, "collections (1 forced); skipped 8 other", "GC time, runtime: ", "stop-the-world:", "heap (MB)"}},
		{args: []string{cur, "--requests", "3400"}, want: []string{"requests per GC:  100.00 (3400 requests)"}},
		{args: []string{old, cur}, want: []string{"delta %", "collections", "GC time, clock", "heap live, median"}},
		{args: []string{"--requests", "42,34", old, cur}, want: []string{"requests per GC  1.00  1.00  +0.00  +0.0%"}},
		{args: []string{cur, "--json"}, want: []string{`"format": "wallprof.gctrace/v1"`, `"collections": 34`}},
		{args: []string{missing}, code: exitError, wantStderr: "wallprof gctrace: " + missing + " does not exist.\n"},
		{args: []string{plain}, code: exitError, wantStderr: "has no gctrace line in its 2 lines; run the program with GODEBUG=gctrace=1"},
		{args: []string{}, code: exitUsage, wantStderr: "give one or two log files"},
		{args: []string{cur, "--requests", "1,2"}, code: exitUsage, wantStderr: "--requests has 2 values for 1 log(s)"},
		{args: []string{cur, "--requests", "x"}, code: exitUsage, wantStderr: `--requests wants a positive count, got "x"`},
	} {
		var stdout, stderr bytes.Buffer
		code := runGctrace(context.Background(), c.args, &stdout, &stderr)
		if code != c.code || !strings.Contains(stderr.String(), c.wantStderr) {
			t.Errorf("gctrace %q: exit %d, stderr %q", c.args, code, stderr.String())
		}
		if c.code != exitOK && strings.Count(strings.TrimSpace(stderr.String()), "\n") > 0 && !strings.Contains(stderr.String(), "Usage") {
			t.Errorf("gctrace %q: error is more than one line: %q", c.args, stderr.String())
		}
		out := stdout.String()
		for _, w := range c.want {
			if !strings.Contains(strings.Join(strings.Fields(out), " "), strings.Join(strings.Fields(w), " ")) {
				t.Errorf("gctrace %q lacks %q:\n%s", c.args, w, out)
			}
		}
	}
}

// With two logs, --json holds both summaries and the deltas.
func TestGctraceJSONTwoLogs(t *testing.T) {
	logs := filepath.Join("..", "..", "internal", "goruntime", "gctrace", "testdata")
	var stdout, stderr bytes.Buffer
	code := runGctrace(context.Background(), []string{"--json", filepath.Join(logs, "go1.20.14.log"), filepath.Join(logs, "go1.22.12.log")}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var got struct {
		Logs   []map[string]any          `json:"logs"`
		Deltas map[string]map[string]any `json:"deltas"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Logs) != 2 || got.Deltas["collections"] == nil || got.Deltas["stw_ms"] == nil {
		t.Errorf("JSON: %s", stdout.String())
	}
}
