package main

import (
	"os/exec"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionString(t *testing.T) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	for _, c := range []struct {
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v1.2.3"}}, true,
			"wallprof v1.2.3 (go1.26.0, " + platform + ")"},
		{&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"}, {Key: "vcs.modified", Value: "true"}}}, true,
			"wallprof devel (commit 0123456789ab+dirty, go1.26.0, " + platform + ")"},
		{&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.0.0-20261125160000-0123456789ab"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef"}, {Key: "vcs.modified", Value: "false"}}}, true,
			"wallprof v0.0.0-20261125160000-0123456789ab (commit 0123456789ab, go1.26.0, " + platform + ")"},
		{nil, false, "wallprof devel (" + runtime.Version() + ", " + platform + ")"},
	} {
		if got := versionString(c.bi, c.ok); got != c.want {
			t.Errorf("versionString = %q, want %q", got, c.want)
		}
	}
}

// The built binary names its commit, and "+dirty" exactly when the tree
// has changes.
func TestVersionCommand(t *testing.T) {
	out, err := exec.Command(wallprofBin(t), "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^wallprof \S+ \((commit [0-9a-f]{12}(\+dirty)?, )?go1\.\d+\S*, \w+/\w+\)\n$`).Match(out) {
		t.Errorf("wallprof version: %q", out)
	}
	if st, err := exec.Command("git", "status", "--porcelain").Output(); err == nil && strings.Contains(string(out), "commit ") {
		if dirty := len(strings.TrimSpace(string(st))) > 0; dirty != strings.Contains(string(out), "+dirty") {
			t.Errorf("wallprof version says %q; the tree is dirty: %v", out, dirty)
		}
	}
	if code, stdout, _ := runCmd("version"); code != 0 || !strings.HasPrefix(stdout, "wallprof ") {
		t.Errorf("wallprof version: exit %d, %q", code, stdout)
	}
}
