package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// pprofServer serves a profile as a pprof endpoint does, recording the
// query of each request.
func pprofServer(t *testing.T, data []byte) (*httptest.Server, func() []string) {
	var mu sync.Mutex
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.RawQuery)
		mu.Unlock()
		if r.URL.Path != "/debug/pprof/profile" {
			http.NotFound(w, r)
			return
		}
		w.Write(data)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), queries...)
	}
}

// The viewing commands read a URL, stdin and any format convert reads,
// through one reader.
func TestViewingInputs(t *testing.T) {
	dir := t.TempDir()
	path := writeProfile(t, dir, "shop.pb.gz", smallProfile(time.Second, 1))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	srv, queries := pprofServer(t, data)
	url := srv.URL + "/debug/pprof/profile?seconds=1"
	folded := filepath.Join(dir, "shop.folded")
	if err := os.WriteFile(folded, []byte("main.main;shop.(*Cart).Checkout;crypto/sha256.block 30\nmain.main;syscall.read 10\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"report", url},
		{"report", folded},
		{"flame", url, "-o", filepath.Join(dir, "f.html")},
		{"diff", path, url},
	} {
		code, stdout, stderr := runCmd(args...)
		if code != exitOK {
			t.Errorf("wallprof %s: exit %d: %s", strings.Join(args, " "), code, stderr)
			continue
		}
		if args[0] != "flame" && !strings.Contains(stdout, "crypto/sha256.block") {
			t.Errorf("wallprof %s does not show crypto/sha256.block:\n%s", strings.Join(args, " "), stdout)
		}
	}
	if q := queries(); len(q) == 0 || q[0] != "seconds=1" {
		t.Errorf("the server got queries %q, want seconds=1 as given", q)
	}
	// A server that says no, and one that is not there: one sentence.
	for _, c := range []struct{ url, want string }{
		{srv.URL + "/nope", "404 Not Found"},
		{"http://127.0.0.1:1/debug/pprof/profile", "connection refused"},
	} {
		code, _, stderr := runCmd("report", c.url)
		if code != exitError || !strings.Contains(stderr, c.want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("report %s: exit %d, stderr %q; want one line with %q", c.url, code, stderr, c.want)
		}
	}

	// Stdin, through the built binary: '-' for report, flame and diff.
	for _, args := range [][]string{{"report", "-"}, {"flame", "-", "-o", filepath.Join(dir, "g.html")}, {"diff", "-", path}} {
		cmd := exec.Command(wallprofBin(t), args...)
		cmd.Stdin = bytes.NewReader(data)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("wallprof %s < shop.pb.gz: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if code, _, stderr := runCmd("diff", "-", "-"); code != exitUsage || !strings.Contains(stderr, "stdin") {
		t.Errorf("diff - -: exit %d, %q; want a usage error about stdin", code, stderr)
	}
}

// report --tagfocus and --tagignore filter samples by label as pprof's do.
func TestReportTagFocus(t *testing.T) {
	path := writeProfile(t, t.TempDir(), "shop.pb.gz", smallProfile(time.Second, 1))
	for _, c := range []struct {
		args        []string
		has, hasNot string
	}{
		{[]string{"--tagfocus", "state=on-cpu"}, "crypto/sha256.block", "syscall.read"},
		{[]string{"--tagignore", "state=on-cpu"}, "syscall.read", "crypto/sha256.block"},
		{[]string{"--tagfocus", "state=sleep.*,runnable"}, "syscall.read", "crypto/sha256.block"},
		{[]string{"--tagfocus", "tid=7"}, "syscall.read", ""},
		{[]string{"--tagfocus", "tid=1:6"}, "", "syscall.read"},
		{[]string{"--tagfocus", "thread=shop", "--tagignore", "sleeping"}, "crypto/sha256.block", "syscall.read"},
	} {
		code, stdout, stderr := runCmd(append([]string{"report", "--top", "10", path}, c.args...)...)
		if code != exitOK {
			t.Errorf("report %q: exit %d: %s", c.args, code, stderr)
			continue
		}
		// The top-functions tables, not the header (which names the
		// thread totals, unfiltered).
		top := stdout[strings.Index(stdout, "top functions"):]
		if c.has != "" && !strings.Contains(top, c.has) || c.hasNot != "" && strings.Contains(top, c.hasNot) {
			t.Errorf("report %q: want %q and not %q in:\n%s", c.args, c.has, c.hasNot, top)
		}
	}
	if code, _, stderr := runCmd("report", path, "--tagfocus", "state=("); code != exitUsage {
		t.Errorf("--tagfocus 'state=(': exit %d, %q", code, stderr)
	}
}

// view FILE -- PPROF-FLAGS passes the flags to pprof's driver; view reads
// a URL and collapsed stacks too.
func TestViewPprofFlagsAndInputs(t *testing.T) {
	dir := t.TempDir()
	path := writeProfile(t, dir, "shop.pb.gz", smallProfile(time.Second, 1))
	url, code, stderr, stop := startViewArgs(t, path, "--", "-tagfocus=state=sleeping")
	if body := get(t, url+"top"); !strings.Contains(body, "syscall.read") || strings.Contains(body, "crypto/sha256.block") {
		t.Errorf("-- -tagfocus=state=sleeping: the top page still has on-CPU functions, or lost the sleeping ones")
	}
	stop()
	if c := <-code; c != exitOK {
		t.Errorf("exit %d: %s", c, stderr.String())
	}

	data, _ := os.ReadFile(path)
	srv, _ := pprofServer(t, data)
	url, code, stderr, stop = startViewArgs(t, srv.URL+"/debug/pprof/profile")
	if body := get(t, url+"top"); !strings.Contains(body, "crypto/sha256.block") {
		t.Errorf("view URL: the top page lacks crypto/sha256.block: %s\n%s", stderr.String(), body)
	}
	stop()
	if c := <-code; c != exitOK {
		t.Errorf("view URL: exit %d: %s", c, stderr.String())
	}

	folded := filepath.Join(dir, "x.folded")
	os.WriteFile(folded, []byte("main;work 5\n"), 0o644)
	url, code, stderr, stop = startViewArgs(t, folded)
	if body := get(t, url+"top"); !strings.Contains(body, "work") {
		t.Errorf("view x.folded: the top page lacks work")
	}
	stop()
	if c := <-code; c != exitOK {
		t.Errorf("view x.folded: exit %d: %s", c, stderr.String())
	}
}
