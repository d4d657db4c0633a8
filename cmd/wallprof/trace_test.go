package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/trace"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/pprof/profile"
)

// writeTestTrace traces this test process while goroutines sleep, block
// on a channel and allocate, and writes the trace to a file.
func writeTestTrace(t *testing.T) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Skipf("cannot trace: %v", err)
	}
	ch := make(chan int)
	done := make(chan bool)
	for i := 0; i < 4; i++ {
		go func() {
			for j := 0; j < 30; j++ {
				time.Sleep(time.Millisecond)
				_ = make([]byte, 1<<16)
				ch <- j
			}
			done <- true
		}()
	}
	go func() {
		for range ch {
		}
	}()
	for i := 0; i < 4; i++ {
		<-done
	}
	close(ch)
	trace.Stop()
	path := filepath.Join(t.TempDir(), "trace.out")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, buf.Bytes()
}

func TestTraceCommandBadInput(t *testing.T) {
	_, full := writeTestTrace(t)
	dir := t.TempDir()
	for _, c := range []struct {
		name, want string
		data       []byte
	}{
		{"empty", "is empty", nil},
		{"text", "is not a Go execution trace", []byte("GET / HTTP/1.1\n\nnot a trace\n")},
		{"old", "older than Go 1.22", []byte("go 1.21 trace\x00\x00\x00\x01")},
		{"half", "cut short", full[:len(full)/2]},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name)
			if err := os.WriteFile(path, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			code, out := wallprof(t, "trace", path)
			if code != exitError || !strings.Contains(out, c.want) || strings.Contains(out, "panic") || strings.Contains(out, "goroutine ") {
				t.Fatalf("exit %d, output:\n%s\nwant exit 1 and %q", code, out, c.want)
			}
			if c.name != "half" && strings.Count(strings.TrimSpace(out), "\n") != 0 {
				t.Errorf("want one sentence, got:\n%s", out)
			}
		})
	}
	if code, out := wallprof(t, "trace", filepath.Join(dir, "missing")); code != exitError || !strings.Contains(out, "does not exist") {
		t.Errorf("missing file: exit %d, %s", code, out)
	}
	if code, _ := wallprof(t, "trace"); code != exitUsage {
		t.Errorf("no argument: exit %d, want %d", code, exitUsage)
	}
}

func TestTraceCommand(t *testing.T) {
	path, data := writeTestTrace(t)
	code, out := wallprof(t, "trace", path)
	if code != 0 || !strings.Contains(out, "scheduling latency") || !strings.Contains(out, "blocking by reason") {
		t.Fatalf("exit %d:\n%s", code, out)
	}

	code, out = wallprof(t, "trace", "--json", path)
	var js struct {
		Format   string `json:"format"`
		Blocking []struct {
			Reason string `json:"reason"`
		} `json:"blocking"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &js) != nil || js.Format != "wallprof.trace/v1" || len(js.Blocking) == 0 {
		t.Fatalf("--json: exit %d, format %q:\n%.500s", code, js.Format, out)
	}

	// --url, as from /debug/pprof/trace.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(data) }))
	defer srv.Close()
	if code, out := wallprof(t, "trace", "--url", srv.URL+"/debug/pprof/trace?seconds=1"); code != 0 || !strings.Contains(out, "scheduling latency") {
		t.Errorf("--url: exit %d:\n%s", code, out)
	}

	dir := t.TempDir()
	page := filepath.Join(dir, "trace.html")
	if code, out := wallprof(t, "trace", path, "-o", page); code != 0 {
		t.Fatalf("-o: exit %d:\n%s", code, out)
	}
	for _, name := range []string{"trace.sched-latency.pb.gz", "trace.blocking.pb.gz", "trace.syscalls.pb.gz"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		p, err := profile.Parse(f)
		f.Close()
		if err != nil || p.CheckValid() != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name == "trace.blocking.pb.gz" && len(p.Sample) == 0 {
			t.Errorf("%s has no sample", name)
		}
	}
	flame := filepath.Join(dir, "blocking.html")
	if code, out := wallprof(t, "flame", filepath.Join(dir, "trace.blocking.pb.gz"), "-o", flame); code != 0 {
		t.Errorf("wallprof flame on the blocking profile: exit %d:\n%s", code, out)
	}
}

// TestTracePageBrowser loads the trace page in headless Chromium and
// requires it to render without a page error.
func TestTracePageBrowser(t *testing.T) {
	path, _ := writeTestTrace(t)
	page := filepath.Join(t.TempDir(), "trace.html")
	if code, out := wallprof(t, "trace", path, "-o", page); code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	br := newBrowser(t, 1280, 900)
	if err := chromedp.Do(br.ctx, chromedp.Navigate("file://"+page), chromedp.WaitVisible("#timeline svg"),
		chromedp.WaitVisible("#blocking")); err != nil {
		t.Fatalf("load %s: %v", page, err)
	}
	bars, err := chromedp.Run(br.ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg.chart rect").length`))
	if err != nil {
		t.Fatal(err)
	}
	if bars == 0 {
		t.Error("the page's charts have no bar")
	}
	br.checkNoErrors(t)
}
