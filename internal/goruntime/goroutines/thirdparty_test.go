package goroutines

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/goruntime/rtlayout"
)

// thirdParty are Go programs built by others (distribution and vendor
// builds, stripped, some with cgo or GOEXPERIMENTs) that wait on stdin or
// on a FIFO ("{fifo}" is replaced by the path of one nobody writes to).
// Those installed on the machine are read.
var thirdParty = [][]string{
	{"/usr/local/bin/terraform", "console"},
	{"/usr/bin/kubectl", "create", "--dry-run=client", "-f", "-"},
	{"/usr/local/bin/docker", "login", "--username", "x", "--password-stdin"},
	{"/usr/bin/caddy", "adapt", "--config", "/dev/stdin"}, // Debian 12: Go 1.19
	{"/usr/bin/gcloud-crc32c", "{fifo}"},                  // blocks opening a FIFO
}

// TestThirdPartyBinaries reads the goroutines of the Go programs of
// thirdParty that are installed: every goroutine's stack must unwind to
// runtime.goexit through functions of the binary, the main goroutine must
// be found, and the program must keep running. Programs built by an
// unsupported Go version must get the one-sentence error.
func TestThirdPartyBinaries(t *testing.T) {
	requireRoot(t)
	tested := 0
	for _, argv := range thirdParty {
		if _, err := os.Stat(argv[0]); err != nil {
			continue
		}
		tested++
		t.Run(argv[0], func(t *testing.T) {
			args := slices.Clone(argv[1:])
			for i, a := range args {
				if a == "{fifo}" {
					args[i] = filepath.Join(t.TempDir(), "fifo")
					if err := syscall.Mkfifo(args[i], 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			cmd := exec.Command(argv[0], args...)
			cmd.Dir = t.TempDir() // terraform leaves a state lock file behind
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() }()
			time.Sleep(time.Second) // let it reach its read of stdin
			r, err := Open(cmd.Process.Pid)
			if errors.Is(err, rtlayout.ErrUnsupportedVersion) {
				if !strings.Contains(err.Error(), "is not supported; supported: 1.19–1.26") {
					t.Errorf("unclear error: %v", err)
				}
				t.Logf("as expected: %v", err)
				return
			}
			if errors.Is(err, ErrNoFuncTable) {
				// A known limit (docker's client is linked externally).
				t.Logf("known limit: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			snap, err := r.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s, allgs via %s: %d goroutines of %d allgs, %d dropped, %d retried",
				r.GoVersion(), r.AllgsSource(), len(snap.Goroutines), snap.AllGs, snap.Dropped, snap.Retried)
			if snap.Dropped > len(snap.Goroutines)/10 {
				t.Errorf("%d goroutines dropped", snap.Dropped)
			}
			var sawMain bool
			for _, g := range snap.Goroutines {
				if g.ID == 1 {
					sawMain = true
					if g.Stack != nil && !slices.Contains(frames(r, g), "main.main") {
						t.Errorf("main goroutine (%s %q): stack %q has no main.main", g.Status, g.WaitReason, frames(r, g))
					}
					t.Logf("main goroutine: %s %q, %d frames", g.Status, g.WaitReason, len(g.Stack))
				}
				if g.Stack == nil {
					continue
				}
				fs := frames(r, g)
				if len(fs) == 0 || (!g.Truncated && fs[len(fs)-1] != "runtime.goexit") {
					t.Errorf("goroutine %d (%s %q): stack %q", g.ID, g.Status, g.WaitReason, fs)
				}
				for _, pc := range g.Stack {
					if r.Table().Lookup(pc-1-r.LoadBias()) == nil {
						t.Errorf("goroutine %d: pc %#x is not in a Go function", g.ID, pc)
					}
				}
			}
			if !sawMain {
				t.Error("main goroutine not found")
			}
			if st := procState(t, cmd.Process.Pid); st == "T" || st == "t" || st == "Z" {
				t.Errorf("target state %s after reading", st)
			}
		})
	}
	if tested == 0 {
		t.Skip("none of the third-party Go programs is installed")
	}
}
