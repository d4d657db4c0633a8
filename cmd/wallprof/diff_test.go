package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDiffCommand(t *testing.T) {
	dir := t.TempDir()
	// After: twice as long, hashing three times as much per second.
	before := writeProfile(t, dir, "before.pb.gz", smallProfile(time.Second, 1))
	after := writeProfile(t, dir, "after.pb.gz", smallProfile(2*time.Second, 6))
	html := filepath.Join(dir, "diff.html")
	var stdout, stderr bytes.Buffer
	if code := runDiff(context.Background(), []string{"-o", html, before, after}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		// crypto/sha256.block: 300ms/s before, 1.8s/2s = 900ms/s after.
		"300.00ms  900.00ms  +600.00ms  +200.00%  crypto/sha256.block",
		// syscall.read: 600ms/s before, 600ms/2s = 300ms/s after.
		"600.00ms  300.00ms  -300.00ms   -50.00%  syscall.read",
		"on-CPU",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("diff output lacks %q:\n%s", want, out)
		}
	}
	page, err := os.ReadFile(html)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(page, []byte("<html")) || !bytes.Contains(page, []byte("crypto/sha256.block")) {
		t.Errorf("diff.html is not a flame graph page of the profiles (%d bytes)", len(page))
	}

	stdout.Reset()
	if code := runDiff(context.Background(), []string{"--json", "--top", "1", "--weight", "cpu", before, after}, &stdout, &stderr); code != exitOK {
		t.Fatalf("--json: exit %d: %s", code, stderr.String())
	}
	var doc struct {
		Weight string
		Flat   struct{ Rows []struct{ Name string } }
	}
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil || doc.Weight != "cpu" || len(doc.Flat.Rows) != 1 || doc.Flat.Rows[0].Name != "crypto/sha256.block" {
		t.Errorf("--json: %v %+v\n%s", err, doc, stdout.String())
	}
}

func TestDiffErrors(t *testing.T) {
	dir := t.TempDir()
	good := writeProfile(t, dir, "good.pb.gz", smallProfile(time.Second, 1))
	noDur := writeProfile(t, dir, "noduration.pb.gz", smallProfile(0, 1))
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{good}, exitUsage, "give two profile files"},
		{[]string{"--weight", "heap", good, good}, exitUsage, "unknown weight"},
		{[]string{good, filepath.Join(dir, "missing.pb.gz")}, exitError, "missing.pb.gz does not exist"},
		{[]string{good, noDur}, exitError, "noduration.pb.gz has no recording duration"},
		{[]string{"-o", filepath.Join(dir, "no", "such", "dir.html"), good, good}, exitError, "cannot write the differential flame graph"},
	} {
		var stderr bytes.Buffer
		got := runDiff(context.Background(), c.args, io.Discard, &stderr)
		if got != c.code || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("diff %q: exit %d, %q; want %d, %q", c.args, got, stderr.String(), c.code, c.want)
		}
		if n := strings.Count(strings.TrimSpace(stderr.String()), "\n"); got != exitUsage && n > 0 {
			t.Errorf("diff %q: more than one line of error:\n%s", c.args, stderr.String())
		}
	}
}
