package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	pprof "github.com/google/pprof/profile"

	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/profile"
)

// smallProfile is a wallprof profile with on-CPU and blocked time in
// functions whose names the tests look for.
func smallProfile(d time.Duration, scale int64) *profile.Profile {
	m := &profile.Mapping{ID: 1, Start: 0x400000, Limit: 0x500000, File: "/usr/bin/shop"}
	loc := func(id uint64, fn string) *profile.Location {
		return &profile.Location{ID: id, Mapping: m, Address: 0x400000 + id*0x10,
			Frames: []profile.Frame{{Function: fn, File: "/src/shop/shop.go", Line: int(id)}}}
	}
	main, handler, hash, read := loc(1, "main.main"), loc(2, "shop.(*Cart).Checkout"), loc(3, "crypto/sha256.block"), loc(4, "syscall.read")
	ms := int64(time.Millisecond)
	return &profile.Profile{
		Start: time.Unix(1767225600, 0).UTC(), Duration: d, Period: int64(time.Second) / 99,
		Command:  "./shop",
		Mappings: []*profile.Mapping{m},
		Locs:     []*profile.Location{main, handler, hash, read},
		Samples: []*profile.Sample{
			{Stack: []*profile.Location{hash, handler, main}, PID: 7, TID: 7, Thread: "shop", State: profile.OnCPU, Value: 300 * ms * scale},
			{Stack: []*profile.Location{read, handler, main}, PID: 7, TID: 7, Thread: "shop", State: profile.Sleeping, Value: 600 * ms},
		},
		Threads: []*profile.Thread{{PID: 7, TID: 7, Name: "shop", End: d,
			Time: [profile.NumStates]time.Duration{time.Duration(300 * ms * scale), 0, d - time.Duration(300*ms*scale)}, Samples: 2}},
	}
}

func writeProfile(t *testing.T, dir, name string, p *profile.Profile) string {
	t.Helper()
	path := filepath.Join(dir, name)
	var b bytes.Buffer
	if err := present.WritePprof(&b, p); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// lineWriter passes each complete line written to it to lines.
type lineWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	lines chan string
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(b)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			w.buf.WriteString(line)
			return len(b), nil
		}
		select {
		case w.lines <- strings.TrimSuffix(line, "\n"):
		default:
		}
	}
}

// startView runs 'wallprof view' on path in the background and returns
// the URL it printed, its exit code channel, its stderr and a stop function.
func startView(t *testing.T, path string) (url string, code chan int, stderr *syncBuffer, stop func()) {
	t.Helper()
	return startViewArgs(t, path)
}

// startViewArgs is startView with more arguments after --http.
func startViewArgs(t *testing.T, args ...string) (url string, code chan int, stderr *syncBuffer, stop func()) {
	t.Helper()
	t.Setenv("DISPLAY", "") // never open a browser from a test
	t.Setenv("WAYLAND_DISPLAY", "")
	t.Setenv("HOME", t.TempDir()) // pprof must not write anything of ours there
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stdout := &lineWriter{lines: make(chan string, 4)}
	stderr = &syncBuffer{}
	code = make(chan int, 1)
	go func() { code <- runView(ctx, append([]string{"--http", "127.0.0.1:0"}, args...), stdout, stderr) }()
	select {
	case url = <-stdout.lines:
	case c := <-code:
		t.Fatalf("view exited with %d before serving: %s", c, stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("no URL printed; stderr: %s", stderr.String())
	}
	return url, code, stderr, cancel
}

// Any pprof file is served, with its own default sample type.
func TestViewForeignPprof(t *testing.T) {
	fn := &pprof.Function{ID: 1, Name: "main.foreignWork", Filename: "/src/x.go"}
	loc := &pprof.Location{ID: 1, Address: 0x1000, Line: []pprof.Line{{Function: fn, Line: 3}}}
	pp := &pprof.Profile{
		SampleType: []*pprof.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Sample:     []*pprof.Sample{{Location: []*pprof.Location{loc}, Value: []int64{5, 50_000_000}}},
		Location:   []*pprof.Location{loc}, Function: []*pprof.Function{fn},
		PeriodType: &pprof.ValueType{Type: "cpu", Unit: "nanoseconds"}, Period: 10_000_000,
	}
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := pp.Write(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	url, code, stderr, stop := startView(t, path)
	if body := get(t, url+"top"); !strings.Contains(body, "main.foreignWork") || !strings.Contains(body, "Type: cpu") {
		t.Errorf("top page of a Go CPU profile lacks main.foreignWork or Type: cpu")
	}
	stop()
	if c := <-code; c != exitOK {
		t.Errorf("exit %d: %s", c, stderr.String())
	}
}

func TestViewServesPprofUI(t *testing.T) {
	path := writeProfile(t, t.TempDir(), "shop.pb.gz", smallProfile(time.Second, 1))
	url, code, stderr, cancel := startView(t, path)
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/ui/") || strings.HasSuffix(url, ":0/ui/") {
		t.Fatalf("printed URL %q, want http://127.0.0.1:PORT/ui/", url)
	}
	for _, page := range []struct{ path, want string }{
		{"", "shop.(*Cart).Checkout"}, // the index redirects to the flame graph
		{"flamegraph", "crypto/sha256.block"},
		{"top", "syscall.read"},
	} {
		body := get(t, url+page.path)
		if !strings.Contains(body, page.want) {
			t.Errorf("%s does not mention %s", url+page.path, page.want)
		}
		// The wall sample type is the one shown.
		if !strings.Contains(body, "Type: wall") {
			t.Errorf("%s does not mention the wall sample type", url+page.path)
		}
	}
	// The flame graph's data is the wall time: 900ms in all.
	if body := get(t, url+"top"); !strings.Contains(body, "900ms") && !strings.Contains(body, "0.90s") {
		t.Errorf("top page does not show the total wall time of 900ms")
	}
	// Requests outside /ui/ are redirected there.
	if body := get(t, strings.TrimSuffix(url, "ui/")); !strings.Contains(body, "shop.(*Cart).Checkout") {
		t.Errorf("the root does not lead to the UI")
	}

	cancel()
	select {
	case c := <-code:
		if c != exitOK {
			t.Errorf("view exited with %d after Ctrl-C; stderr: %s", c, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("view did not stop after its context was cancelled")
	}
	if _, err := http.Get(url); err == nil {
		t.Errorf("the server still answers after stopping")
	}
	if entries, _ := os.ReadDir(filepath.Join(os.Getenv("HOME"), "pprof")); len(entries) > 0 {
		t.Errorf("pprof saved files under $HOME/pprof")
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, body)
	}
	return string(body)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestViewErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{nil, exitUsage, "exactly one profile"},
		{[]string{"--http", "nonsense", "x.pb.gz"}, exitUsage, "not a host:port"},
		{[]string{filepath.Join(dir, "missing.pb.gz")}, exitError, "does not exist"},
	} {
		var stderr bytes.Buffer
		if got := runView(context.Background(), c.args, io.Discard, &stderr); got != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("view %q: exit %d, %q; want %d, %q", c.args, got, stderr.String(), c.code, c.want)
		}
	}
}

func TestInjectedFlags(t *testing.T) {
	f := newInjectedFlags([]string{"-b", "-n=3", "-s=x", "-l=a", "-l=b", "file"})
	b, n, s := f.Bool("b", false, ""), f.Int("n", 0, ""), f.String("s", "", "")
	l, d := f.StringList("l", "def", ""), f.StringList("d", "def", "")
	fl := f.Float64("f", 1.5, "")
	args := f.Parse(func() { t.Error("usage called") })
	if !*b || *n != 3 || *s != "x" || *fl != 1.5 || len(args) != 1 || args[0] != "file" {
		t.Errorf("parsed %v %v %v %v %v", *b, *n, *s, *fl, args)
	}
	if len(*l) != 2 || *(*l)[0] != "a" || *(*l)[1] != "b" || len(*d) != 1 || *(*d)[0] != "def" {
		t.Errorf("string lists %v %v", *l, *d)
	}
	called := false
	if args := newInjectedFlags([]string{"-bogus"}).Parse(func() { called = true }); args != nil || !called {
		t.Errorf("a bad flag: args %v, usage called %v", args, called)
	}
}
