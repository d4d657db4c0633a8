package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// The report's view and filter flags reach the report; the views'
// content is golden-tested in internal/present.
func TestReportFlags(t *testing.T) {
	path := writeProfile(t, t.TempDir(), "shop.pb.gz", smallProfile(time.Second, 1))
	for _, c := range []struct {
		args       []string
		code       int
		want, not  []string
		wantStderr string
	}{
		{args: []string{path}, want: []string{"top functions by wall time", "threads: 1 (state % of accounted time)"}, not: []string{"call tree"}},
		{args: []string{"--tree", path}, want: []string{"call tree by wall time", "    shop.(*Cart).Checkout", "      crypto/sha256.block"}, not: []string{"top functions", "threads:"}},
		{args: []string{"--tree", "--top", "1", path}, want: []string{"call tree", "top functions by wall time: 1 of 4"}},
		{args: []string{"--threads", "--states", path}, want: []string{"blocked (sleeping+disk+other)", "time in each state"}, not: []string{"top functions"}},
		{args: []string{"--tree", "--nodefraction", "0.5", path}, want: []string{"nodes under 50.00% of it: 1 hidden"}},
		{args: []string{"--tree", "--focus", "sha256", path}, want: []string{"focus:", "1 of 2 samples kept"}, not: []string{"syscall.read"}},
		{args: []string{"--tree", "--ignore", "sha256", path}, want: []string{"syscall.read"}, not: []string{"crypto/sha256.block"}},
		{args: []string{"--tree", "--hide", `^main\.main$`, path}, want: []string{"0  shop.(*Cart).Checkout"}, not: []string{"main.main"}},
		{args: []string{"--json", "--tree", path}, want: []string{`"tree": {`, `"threads": [`}},
		{args: []string{"--focus", "a(", path}, code: exitUsage, wantStderr: "parsing focus regexp"},
	} {
		var stdout, stderr bytes.Buffer
		code := runReport(context.Background(), c.args, &stdout, &stderr)
		if code != c.code || !strings.Contains(stderr.String(), c.wantStderr) {
			t.Errorf("report %q: exit %d, stderr %q", c.args, code, stderr.String())
		}
		for _, w := range c.want {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("report %q lacks %q:\n%s", c.args, w, stdout.String())
			}
		}
		for _, n := range c.not {
			if strings.Contains(stdout.String(), n) {
				t.Errorf("report %q has %q:\n%s", c.args, n, stdout.String())
			}
		}
	}
}
