package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// Each bad input gives one sentence that says what is wrong, and the right
// exit code; none prints a Go stack trace.
func TestErrors(t *testing.T) {
	dir := t.TempDir()
	corrupt := filepath.Join(dir, "corrupt.pb.gz")
	if err := os.WriteFile(corrupt, []byte("\x1f\x8b\x08\x00garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
		root bool // needs a machine that can record
	}{
		{"no command", nil, exitUsage, "Usage", false},
		{"unknown command", []string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`, false},
		{"bad flag", []string{"record", "--bogus"}, exitUsage, "flag provided but not defined", false},
		{"nothing to record", []string{"record"}, exitUsage, "say what to record", false},
		{"format and name disagree", []string{"record", "--format", "pprof", "-o", "x.folded", "-p", "1"}, exitUsage, "names a collapsed file", false},
		{"frequency out of range", []string{"record", "-F", "0", "--", "true"}, exitUsage, "out of range", false},
		{"bad format", []string{"record", "--format", "svg", "--", "true"}, exitUsage, "unknown --format", false},
		{"report without file", []string{"report"}, exitUsage, "exactly one profile", false},
		{"report missing file", []string{"report", filepath.Join(dir, "nope.pb.gz")}, exitError, "does not exist", false},
		{"report corrupt file", []string{"report", corrupt}, exitError, "is not a pprof profile", false},
		{"no such pid", []string{"record", "-p", "999999999"}, exitError, "no process with PID 999999999", true},
		{"command not found", []string{"record", "--", "no-such-command-wallprof"}, exitError, "command not found: no-such-command-wallprof", true},
		{"output not writable", []string{"record", "-o", filepath.Join(dir, "missing", "x.pb.gz"), "--", "true"}, exitError, "cannot write the profile", true},
		{"output is a directory", []string{"record", "-o", dir, "--", "true"}, exitError, "is a directory", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.root {
				requireRecording(t)
			}
			code, out := wallprof(t, c.args...)
			if code != c.code {
				t.Errorf("exit code %d, want %d; output:\n%s", code, c.code, out)
			}
			if !strings.Contains(out, c.want) {
				t.Errorf("output does not say %q:\n%s", c.want, out)
			}
			if goTrace.MatchString(out) || strings.Contains(out, "panic") {
				t.Errorf("output has a stack trace:\n%s", out)
			}
		})
	}
}

// goTrace matches the first line of a Go stack trace.
var goTrace = regexp.MustCompile(`goroutine \d+ \[`)

// Without privileges, record says what to do instead of failing obscurely.
func TestRecordWithoutPrivileges(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run wallprof as an unprivileged user")
	}
	cmd := exec.Command(wallprofBin(t), "record", "--", "true")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != exitError {
		t.Fatalf("want exit %d, got %v:\n%s", exitError, err, out)
	}
	if !strings.Contains(string(out), "needs root, or the CAP_BPF and CAP_PERFMON capabilities") {
		t.Errorf("unhelpful message:\n%s", out)
	}
}
