package linux

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestRunPaths(t *testing.T) {
	dirs := []string{"/usr/local/bin", "relative/ignored", "/usr/bin"}
	for _, c := range []struct {
		name, argv0, comm, cwd string
		want                   []string
	}{
		{"bare name through PATH", "redis-server", "redis-server", "/",
			[]string{"/usr/local/bin/redis-server", "/usr/bin/redis-server", "/opt/redis/redis-server"}},
		{"absolute", "/usr/bin/redis-server", "redis-server", "/",
			[]string{"/usr/bin/redis-server", "/usr/local/bin/redis-server", "/opt/redis/redis-server"}},
		{"relative to the working directory", "./bin/../srv", "srv", "/home/u",
			[]string{"/home/u/srv", "/usr/local/bin/srv", "/usr/bin/srv", "/opt/redis/srv"}},
		{"rewritten title", "redis-server *:6379", "redis-server", "/",
			[]string{"/usr/local/bin/redis-server *:6379", "/usr/bin/redis-server *:6379", "/opt/redis/redis-server *:6379",
				"/usr/local/bin/redis-server", "/usr/bin/redis-server", "/opt/redis/redis-server"}},
		{"no argv", "", "kworker", "/", []string{"/usr/local/bin/kworker", "/usr/bin/kworker", "/opt/redis/kworker"}},
		{"relative name, unknown cwd", "./srv", "", "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := runPaths(c.argv0, c.comm, c.cwd, "/opt/redis/redis-check-rdb", dirs)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("runPaths(%q, %q, %q) =\n%q\nwant\n%q", c.argv0, c.comm, c.cwd, got, c.want)
			}
		})
	}
}

func TestPathDirs(t *testing.T) {
	env := []byte("HOME=/root\x00XPATH=/no\x00PATH=/a:/b\x00TERM=x\x00")
	if got := pathDirs(env); !reflect.DeepEqual(got, []string{"/a", "/b"}) {
		t.Errorf("pathDirs = %q", got)
	}
	if got := pathDirs([]byte("HOME=/root\x00")); got != nil {
		t.Errorf("pathDirs without PATH = %q", got)
	}
}

// copyFile copies an executable.
func copyFile(t *testing.T, from, to string) {
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

// A program run through a symlink is named by the symlink, however it was
// run, and never by another program of the same name; its executable is
// the file the symlink leads to.
func TestReadProgramSymlink(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep command to copy")
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"real", "bin", "decoy"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// dir/bin/nap -> ../real/nap-real, as Debian's redis-server -> redis-check-rdb.
	real := filepath.Join(dir, "real", "nap-real")
	copyFile(t, sleep, real)
	link := filepath.Join(dir, "bin", "nap")
	if err := os.Symlink("../real/nap-real", link); err != nil {
		t.Fatal(err)
	}
	// Another program called nap, earlier in PATH.
	copyFile(t, sleep, filepath.Join(dir, "decoy", "nap"))
	path := "PATH=" + filepath.Join(dir, "decoy") + ":" + filepath.Join(dir, "bin") + ":/usr/bin:/bin"

	for _, c := range []struct {
		name string
		cmd  *exec.Cmd
		want string
	}{
		{"absolute symlink", &exec.Cmd{Path: link, Args: []string{link, "30"}}, link},
		{"bare name found in PATH", &exec.Cmd{Path: link, Args: []string{"nap", "30"}, Env: []string{path}}, link},
		{"relative path", &exec.Cmd{Path: link, Args: []string{"./nap", "30"}, Dir: filepath.Join(dir, "bin")}, link},
		{"argv[0] rewritten, found by comm", &exec.Cmd{Path: link, Args: []string{"something else", "30"}, Env: []string{path}}, link},
		{"the file itself", &exec.Cmd{Path: real, Args: []string{real, "30"}}, real},
		{"no name leads to it", &exec.Cmd{Path: link, Args: []string{"elsewhere", "30"}, Env: []string{"PATH=/nonexistent"}}, real},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				c.cmd.Process.Kill()
				c.cmd.Wait()
			}()
			// Start returns once the exec has closed the close-on-exec
			// pipe, which is before the kernel sets the new command line:
			// wait for it.
			cmdline := fmt.Sprintf("/proc/%d/cmdline", c.cmd.Process.Pid)
			for i := 0; i < 200; i++ {
				if b, _ := os.ReadFile(cmdline); strings.HasPrefix(string(b), c.cmd.Args[0]+"\x00") {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			got, err := ReadProgram(c.cmd.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			if want := (Program{Path: c.want, Exe: real}); got != want {
				t.Errorf("ReadProgram = %+v, want %+v", got, want)
			}
		})
	}

	got, err := ProgramAt(link)
	if want := (Program{Path: link, Exe: real}); err != nil || got != want {
		t.Errorf("ProgramAt(%s) = %+v, %v; want %+v", link, got, err, want)
	}
	if _, err := ProgramAt(filepath.Join(dir, "missing")); err == nil {
		t.Error("ProgramAt of a missing file succeeded")
	}
}

func TestCommandLine(t *testing.T) {
	got, err := CommandLine(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(os.Args, " "); got != want {
		t.Errorf("CommandLine(self) = %q, want %q", got, want)
	}
	if _, err := CommandLine(1 << 30); err == nil {
		t.Error("CommandLine of a process that does not exist succeeded")
	}
	if _, err := ReadProgram(1 << 30); err == nil {
		t.Error("ReadProgram of a process that does not exist succeeded")
	}
}
