package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/load"
)

func runLoadCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(context.Background(), append([]string{"load"}, args...), &o, &e)
	return code, o.String(), e.String()
}

func TestLoadBadFlags(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"--bogus", "http://127.0.0.1:1/"}, "flag provided but not defined"},
		{"no model", []string{"http://127.0.0.1:1/"}, "give --rate R with --duration D"},
		{"no bound", []string{"--rate", "10/s", "http://127.0.0.1:1/"}, "give a duration or a request count"},
		{"bad rate", []string{"--rate", "fast", "--duration", "1s", "http://127.0.0.1:1/"}, `rate "fast"`},
		{"bad duration", []string{"--rate", "10", "--duration", "soon", "http://127.0.0.1:1/"}, "invalid value"},
		{"no url", []string{"--rate", "10", "--duration", "1s"}, "give [METHOD] URL"},
		{"too many args", []string{"-c", "1", "-n", "1", "GET", "http://127.0.0.1:1/", "extra"}, "give [METHOD] URL"},
		{"bad scheme", []string{"-c", "1", "-n", "1", "127.0.0.1:1"}, "must start with http://"},
		{"bad header", []string{"-c", "1", "-n", "1", "-H", "nocolon", "http://127.0.0.1:1/"}, "want 'Key: Value'"},
		{"missing body", []string{"-c", "1", "-n", "1", "--body", filepath.Join(dir, "nope"), "http://127.0.0.1:1/"}, "read the body"},
		{"targets and url", []string{"-c", "1", "-n", "1", "--targets", filepath.Join(dir, "t"), "http://127.0.0.1:1/"}, "not both"},
		{"missing targets", []string{"-c", "1", "-n", "1", "--targets", filepath.Join(dir, "t")}, "read the targets"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runLoadCLI(t, c.args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			if out != "" || !strings.Contains(errOut, c.want) || strings.Count(errOut, "\n") != 1 {
				t.Errorf("stdout %q, stderr %q; want one line with %q", out, errOut, c.want)
			}
		})
	}
}

func TestLoadHelp(t *testing.T) {
	code, out, _ := runLoadCLI(t, "--help")
	if code != exitOK || !strings.Contains(out, "--concurrency") || !strings.Contains(out, "coordinated omission") {
		t.Errorf("exit %d, help %q", code, out)
	}
}

type seenRequest struct{ method, path, header, body string }

func recordingServer(t *testing.T) (*httptest.Server, func() []seenRequest) {
	var mu sync.Mutex
	var seen []seenRequest
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, seenRequest{r.Method, r.URL.Path, r.Header.Get("X-Test"), string(b)})
		mu.Unlock()
		if r.URL.Path == "/missing" {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(s.Close)
	return s, func() []seenRequest { mu.Lock(); defer mu.Unlock(); return append([]seenRequest(nil), seen...) }
}

func TestLoadText(t *testing.T) {
	s, seen := recordingServer(t)
	body := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(body, []byte(`{"x":1}`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runLoadCLI(t, "--rate", "100/s", "--duration", "200ms", "--body", body, "-H", "X-Test: yes", "put", s.URL+"/api")
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, want := range []string{"target:       PUT " + s.URL + "/api", "open model, constant rate 100/s, 200ms", "p50", "p99.9", "status codes: 200: ", "errors:       none"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	got := seen()
	if len(got) == 0 {
		t.Fatal("the server saw no request")
	}
	for _, g := range got {
		if g != (seenRequest{"PUT", "/api", "yes", `{"x":1}`}) {
			t.Errorf("server saw %+v", g)
		}
	}
}

func TestLoadJSONWithTargetsFile(t *testing.T) {
	s, seen := recordingServer(t)
	targets := filepath.Join(t.TempDir(), "targets.txt")
	data := "GET " + s.URL + "/ok\nX-Test: a\n\nGET " + s.URL + "/missing\n"
	if err := os.WriteFile(targets, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runLoadCLI(t, "--targets", targets, "--concurrency", "2", "--requests", "10", "--json")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var r load.Result
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if r.Format != load.Format || r.Mode != "concurrency" || r.Requests != 10 || len(r.Targets) != 2 ||
		r.StatusCodes["200"] != 5 || r.StatusCodes["404"] != 5 || r.Latency.P99 <= 0 {
		t.Errorf("result %+v", r)
	}
	if n := len(seen()); n != 10 {
		t.Errorf("server saw %d requests, want 10", n)
	}
}

func TestLoadRefusedExitsNonZero(t *testing.T) {
	code, out, errOut := runLoadCLI(t, "-c", "1", "-n", "3", "http://127.0.0.1:1/")
	if code != exitError || !strings.Contains(out, "3 connection refused") || !strings.Contains(errOut, "no request succeeded") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestLoadStopsWhenNothingListens: a load at a closed port stops after the
// first refused connections instead of sending its whole duration there,
// and says why.
func TestLoadStopsWhenNothingListens(t *testing.T) {
	start := time.Now()
	code, out, errOut := runLoadCLI(t, "--rate", "2000/s", "--duration", "20s", "http://127.0.0.1:1/")
	took := time.Since(start)
	if code != exitError || !strings.Contains(out, "nothing listens at http://127.0.0.1:1/") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if took > 10*time.Second {
		t.Errorf("the load ran %v of its 20 s against a closed port", took.Round(time.Millisecond))
	}
}
