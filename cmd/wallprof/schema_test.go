package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/wallprof/wallprof/internal/bench"
	"github.com/wallprof/wallprof/internal/dump"
	"github.com/wallprof/wallprof/internal/goruntime/escapes"
	"github.com/wallprof/wallprof/internal/goruntime/gctrace"
	"github.com/wallprof/wallprof/internal/latency"
	"github.com/wallprof/wallprof/internal/load"
	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/runreport"
)

// schemaDir holds one JSON Schema per schema id: wallprof.NAME/vN is
// wallprof.NAME.vN.json.
var schemaDir = filepath.Join("..", "..", "doc", "schemas")

// schemaIDs are the ids of every JSON output.
var schemaIDs = []string{
	present.ReportFormat, present.DiffFormat, present.GoroutinesFormat,
	load.Format, gctrace.Format, escapes.Format, runreport.Format, dump.Format, recordFormat,
	latency.Format, bench.Format,
}

func schemaFile(id string) string { return strings.ReplaceAll(id, "/", ".") + ".json" }

// Every schema id is spelled wallprof.NAME/vN and has its schema file, and
// every schema file is one of them.
func TestSchemaFiles(t *testing.T) {
	want := map[string]bool{}
	for _, id := range schemaIDs {
		var name string
		var v int
		if n, err := fmt.Sscanf(strings.Replace(id, "/v", " ", 1), "wallprof.%s %d", &name, &v); n != 2 || err != nil || id != fmt.Sprintf("wallprof.%s/v%d", name, v) {
			t.Errorf("schema id %q is not spelled wallprof.NAME/vN", id)
		}
		want[schemaFile(id)] = true
	}
	files, _ := filepath.Glob(filepath.Join(schemaDir, "*.json"))
	for _, f := range files {
		if !want[filepath.Base(f)] {
			t.Errorf("%s is no output's schema", f)
		}
		delete(want, filepath.Base(f))
	}
	for f := range want {
		t.Errorf("%s is missing", filepath.Join(schemaDir, f))
	}
}

// Every JSON output validates against its schema, and the schema declares
// every top-level property the output has.
func TestSchemaOutputs(t *testing.T) {
	c := jsonschema.NewCompiler()
	schemas := map[string]*jsonschema.Schema{}
	declared := map[string]map[string]bool{}
	for _, id := range schemaIDs {
		path, err := filepath.Abs(filepath.Join(schemaDir, schemaFile(id)))
		if err != nil {
			t.Fatal(err)
		}
		s, err := c.Compile(path)
		if err != nil {
			t.Fatalf("compile %s: %v", path, err)
		}
		schemas[id] = s
		var raw struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		data, _ := os.ReadFile(path)
		if err := json.Unmarshal(data, &raw); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		declared[id] = map[string]bool{}
		for p := range raw.Properties {
			declared[id][p] = true
		}
	}
	outputs := schemaOutputs(t)
	seen := map[string]bool{}
	for _, name := range sortedNames(outputs) {
		var v any
		if err := json.Unmarshal(outputs[name], &v); err != nil {
			t.Errorf("%s: not JSON: %v", name, err)
			continue
		}
		obj, _ := v.(map[string]any)
		id, _ := obj["format"].(string)
		s, ok := schemas[id]
		if !ok {
			t.Errorf("%s: format %q is no known schema id", name, id)
			continue
		}
		seen[id] = true
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(outputs[name]))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(inst); err != nil {
			t.Errorf("%s does not validate against %s: %v", name, schemaFile(id), err)
		}
		for k := range obj {
			if !declared[id][k] {
				t.Errorf("%s has property %q, which %s does not declare", name, k, schemaFile(id))
			}
		}
	}
	for _, id := range schemaIDs {
		if !seen[id] {
			t.Errorf("no output of schema %s was checked", id)
		}
	}
}

func sortedNames(m map[string][]byte) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// schemaOutputs produces the JSON outputs: from the commands where that
// takes no privilege or network, and the golden files of the packages that
// write them (which their tests keep byte for byte equal to the output).
func schemaOutputs(t *testing.T) map[string][]byte {
	out := map[string][]byte{}
	dir := t.TempDir()
	cmd := func(args ...string) []byte {
		code, stdout, stderr := runCmd(args...)
		if code != exitOK {
			t.Fatalf("wallprof %s: exit %d: %s", strings.Join(args, " "), code, stderr)
		}
		return []byte(stdout)
	}
	before := writeProfile(t, dir, "before.pb.gz", smallProfile(time.Second, 1))
	after := writeProfile(t, dir, "after.pb.gz", smallProfile(2*time.Second, 6))
	out["report --json"] = cmd("report", "--json", before)
	out["report --json --tree"] = cmd("report", "--json", "--tree", "--focus", "sha256", before)
	out["diff --json"] = cmd("diff", "--json", before, after)
	logs := filepath.Join("..", "..", "internal", "goruntime", "gctrace", "testdata")
	out["gctrace --json"] = cmd("gctrace", "--json", filepath.Join(logs, "go1.26.8.log"))
	out["gctrace --json (two logs)"] = cmd("gctrace", "--json", "--requests", "100", filepath.Join(logs, "go1.16.15.log"), filepath.Join(logs, "go1.26.8.log"))

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	out["load --json"] = cmd("load", "--json", "-c", "2", "-n", "20", srv.URL)
	var res load.Result
	if err := json.Unmarshal(out["load --json"], &res); err != nil {
		t.Fatal(err)
	}

	var b bytes.Buffer
	if err := escapes.WriteJSON(&b, escapes.Join(nil, nil, escapes.Options{Sample: "alloc_space", Dir: dir})); err != nil {
		t.Fatal(err)
	}
	out["escapes.WriteJSON"] = bytes.Clone(b.Bytes())

	b.Reset()
	rep := &runreport.Report{Format: runreport.Format, Command: []string{"./server"}, Started: time.Unix(0, 0).UTC(),
		Load: &res, Artefacts: map[string]string{"report data (JSON)": "r.json"}, Notes: []string{"no wall-clock profile"}}
	if err := runreport.WriteJSON(&b, rep); err != nil {
		t.Fatal(err)
	}
	out["runreport.WriteJSON"] = bytes.Clone(b.Bytes())

	b.Reset()
	status := 3
	sum := newRecordSummary(smallProfile(time.Second, 1), nil, "-", "pprof", 1234, 99, "command")
	sum.CommandExit = &status
	if err := writeJSON(&b, sum); err != nil {
		t.Fatal(err)
	}
	out["record --json"] = bytes.Clone(b.Bytes())

	b.Reset()
	var snap latency.Snapshot
	snap.Counters = latency.Counters{Count: 3, Sum: 6 * time.Millisecond, Max: 3 * time.Millisecond, Nested: 1}
	for _, d := range []uint64{1e6, 2e6, 3e6} {
		snap.Hist[latency.BucketOf(d)]++
	}
	fn := latency.Func{Name: "main.handle", Entry: 0x4000, Probe: 0x4012, Rets: []uint64{0x4080}}
	lrep := &latency.Report{PID: 1, Program: "/srv/app", GoVersion: "go1.26.8", DurationNs: 1e9, Recursion: "outermost",
		Functions: []latency.FuncReport{latency.FuncReportOf(fn, snap)}, Cost: latency.CostReport{Probes: 2, ProbeHits: 7}}
	if err := latency.WriteJSON(&b, lrep); err != nil {
		t.Fatal(err)
	}
	out["latency.WriteJSON"] = bytes.Clone(b.Bytes())

	benchData := filepath.Join("..", "..", "internal", "bench", "testdata")
	db := filepath.Join(dir, "bench.db")
	out["bench import --json"] = cmd("bench", "import", "--json", "--db", db, filepath.Join(benchData, "old.txt"))
	out["bench history --json"] = cmd("bench", "history", "--json", "--db", db, "--unit", "", "Search")
	b.Reset()
	benchRun := func(name string) *bench.Run {
		f, err := os.Open(filepath.Join(benchData, name))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		res, err := bench.Parse(f, name)
		if err != nil {
			t.Fatal(err)
		}
		return &bench.Run{Results: res}
	}
	oldRun, newRun := benchRun("old.txt"), benchRun("new.txt")
	if err := bench.WriteJSON(&b, &bench.Report{Command: "check", Runs: []bench.RunInfo{oldRun.Info(), newRun.Info()},
		Deltas: bench.Compare(oldRun, newRun, bench.Options{}), Regressions: 4,
		Explanations: []*bench.Explanation{{CPU: []bench.Growth{{Function: "f", New: 1}}, Profiles: []string{"a", "b", "c", "d"}}}}); err != nil {
		t.Fatal(err)
	}
	out["bench.WriteJSON (check)"] = bytes.Clone(b.Bytes())

	goldens, _ := filepath.Glob(filepath.Join("..", "..", "internal", "present", "testdata", "*.json"))
	more, _ := filepath.Glob(filepath.Join(logs, "*.json"))
	dumps, _ := filepath.Glob(filepath.Join("..", "..", "internal", "dump", "testdata", "*.json"))
	more = append(more, dumps...)
	for _, g := range append(goldens, more...) {
		data, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		out[g] = data
	}
	return out
}
