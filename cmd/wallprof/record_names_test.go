package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	pprof "github.com/google/pprof/profile"

	"github.com/wallprof/wallprof/internal/groundtruth"
)

// A program run through a symlink (Debian's redis-server is a link to
// redis-check-rdb) is named as it was run: in the profile's program, its
// mapping's file and pprof's main mapping (go tool pprof's "File:"), and
// in the line that says what is recorded. Launched and attached.
func TestRecordSymlinkedProgram(t *testing.T) {
	requireRecording(t)
	bin := groundtruth.Build(t, "cpubound")
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	real := filepath.Join(dir, "cpubound-real")
	copyExecutable(t, bin, real)
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "bin", "spin")
	if err := os.Symlink("../cpubound-real", link); err != nil {
		t.Fatal(err)
	}

	t.Run("launched", func(t *testing.T) {
		out := filepath.Join(dir, "launched.pb.gz")
		// Stopped by --duration: a command that exits before its samples are
		// read has no mappings to name.
		code, stderr := wallprof(t, "record", "--duration", "1s", "-o", out, "--", link, "--iters", "100000000000")
		if code != 0 {
			t.Fatalf("wallprof record exited %d:\n%s", code, stderr)
		}
		checkProgramName(t, out, link, real)
	})
	t.Run("attached", func(t *testing.T) {
		target := exec.Command(link, "--iters", "100000000000")
		if err := target.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			target.Process.Kill()
			target.Wait()
		}()
		out := filepath.Join(dir, "attached.pb.gz")
		code, stderr := wallprof(t, "record", "-p", fmt.Sprint(target.Process.Pid), "--duration", "1s", "-o", out)
		if code != 0 {
			t.Fatalf("wallprof record exited %d:\n%s", code, stderr)
		}
		if want := fmt.Sprintf("recording process %d (%s --iters 100000000000)", target.Process.Pid, link); !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
		checkProgramName(t, out, link, real)
	})
}

// checkProgramName checks that the profile in out names its program link,
// never real, the file link leads to.
func checkProgramName(t *testing.T, out, link, real string) {
	t.Helper()
	p := readProfile(t, out)
	if p.Program != link {
		t.Errorf("program = %q, want %q", p.Program, link)
	}
	crunch := false
	for _, s := range p.Samples {
		for _, l := range s.Stack {
			if len(l.Frames) > 0 && (l.Frames[0].Function == "crunch" || l.Frames[0].Function == "mix") {
				crunch = true
				if l.Mapping == nil || l.Mapping.File != link {
					t.Fatalf("%s's mapping is %+v, want the file %s", l.Frames[0].Function, l.Mapping, link)
				}
			}
		}
	}
	if !crunch {
		t.Fatal("no sample in crunch or mix: the program's mapping is in no stack")
	}
	for _, m := range p.Mappings {
		if m.File == real {
			t.Errorf("a mapping is named %s, the file behind the symlink", real)
		}
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pp, err := pprof.Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	if got := pp.Mapping[0].File; got != link {
		t.Errorf("pprof's main mapping (go tool pprof's File:) is %s, want %s", got, link)
	}
}

// copyExecutable copies the file from to the executable to.
func copyExecutable(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
