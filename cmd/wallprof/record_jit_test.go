package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/profile"
	"github.com/wallprof/wallprof/internal/record"
)

// The JIT tests record programs whose hot function has a known name, run
// by runtimes that tell profilers the names of the code they generate:
// python's perf trampolines (-X perf), node's perf map, and the perf map
// the JVM writes when it exits. The function must show in the profile, and
// the frames in anonymous executable memory left unnamed must be under 5%
// of the process's on-CPU frames there.

// requireRuntime returns the path of a runtime the test needs. When it is
// missing, the test skips, but fails under CI=true: .ci/run installs it.
func requireRuntime(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %s is not installed (.ci/run installs it)", name)
		}
		t.Skipf("%s is not installed", name)
	}
	return path
}

// jitWorkload copies testdata/jit/name into a temporary directory.
func jitWorkload(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "jit", name))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// recordJIT records args and returns the profile.
func recordJIT(t *testing.T, flags []string, args ...string) *profile.Profile {
	t.Helper()
	out := filepath.Join(t.TempDir(), "jit.pb.gz")
	all := append(append([]string{"record", "-o", out}, flags...), "--")
	code, stderr := wallprof(t, append(all, args...)...)
	if code != 0 {
		t.Fatalf("wallprof record exited %d:\n%s", code, stderr)
	}
	t.Logf("%s", stderr)
	return readProfile(t, out)
}

// checkJITProfile checks that the on-CPU time under a frame matching fn is
// a good part of the recording's (the runtime's start-up and compiler
// threads take the rest; the machine is shared), and that under 5% of the on-CPU frames in
// anonymous executable memory stayed unnamed.
func checkJITProfile(t *testing.T, p *profile.Profile, fn *regexp.Regexp) {
	t.Helper()
	var all, under, anon, unnamed int64
	for _, s := range p.Samples {
		if s.State != profile.OnCPU {
			continue
		}
		all += s.Value
		found := false
		for _, l := range s.Stack {
			for _, f := range l.Frames {
				found = found || fn.MatchString(f.Function)
			}
			if record.IsAnonymous(l.Mapping) {
				anon += s.Value
				if len(l.Frames) > 0 && strings.HasPrefix(l.Frames[0].Function, "[anon]+") {
					unnamed += s.Value
				}
			}
		}
		if found {
			under += s.Value
		}
	}
	if all == 0 {
		t.Fatal("no on-CPU samples")
	}
	share := float64(under) / float64(all)
	t.Logf("on-CPU time under %s: %.1f%%; unnamed frames in anonymous executable memory: %.2f%% of %d ns of such frames", fn, 100*share, 100*float64(unnamed)/float64(max(anon, 1)), anon)
	if share < 0.25 {
		t.Errorf("only %.1f%% of the on-CPU time is under %s", 100*share, fn)
		logTop(t, p)
	}
	if anon == 0 {
		t.Errorf("no on-CPU frame in anonymous executable memory: the JIT code was not sampled")
	} else if float64(unnamed) > 0.05*float64(anon) {
		t.Errorf("%.1f%% of the on-CPU frames in anonymous executable memory stayed unnamed (want < 5%%)", 100*float64(unnamed)/float64(anon))
		logTop(t, p)
	}
}

func logTop(t *testing.T, p *profile.Profile) {
	t.Helper()
	for i, s := range p.Samples {
		if i > 15 {
			break
		}
		var names []string
		for _, l := range s.Stack {
			for _, f := range l.Frames {
				names = append(names, f.Function)
			}
		}
		t.Logf("%s %d: %s", s.State, s.Value, strings.Join(names, " < "))
	}
}

// python returns a Python 3.minor or later, or "" and the versions it
// found.
func python(minor int) (string, string) {
	cands := []string{"python3", "python3.12", "python3.13", "python3.14"}
	if home, err := os.UserHomeDir(); err == nil { // pyenv's interpreters
		more, _ := filepath.Glob(filepath.Join(home, ".pyenv", "versions", "3.*", "bin", "python3"))
		cands = append(cands, more...)
	}
	var seen []string
	for _, c := range cands {
		path, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		out, err := exec.Command(path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])").Output()
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(out))
		seen = append(seen, path+" is "+v)
		major, mi, _ := strings.Cut(v, ".")
		if n, err := strconv.Atoi(mi); err == nil && major == "3" && n >= minor {
			return path, ""
		}
	}
	if len(seen) == 0 {
		return "", "no python3"
	}
	return "", strings.Join(seen, ", ")
}

func TestRecordPythonPerfTrampolines(t *testing.T) {
	requireRecording(t)
	py, found := python(12)
	if py == "" {
		// Debian 12's python3 is 3.11, which has no -X perf: not
		// something .ci/run can install from Debian's packages.
		t.Skipf("python -X perf needs Python 3.12 or later; found %s", found)
	}
	script := jitWorkload(t, "burn.py")
	// The recording stops before the program does, so that its mappings
	// are read while it runs.
	p := recordJIT(t, []string{"--duration", "2s"}, py, "-X", "perf", script, "3")
	checkJITProfile(t, p, regexp.MustCompile(`^py::burn_cpu_python_marker:`))
}

func TestRecordNodePerfBasicProf(t *testing.T) {
	requireRecording(t)
	node := requireRuntime(t, "node")
	script := jitWorkload(t, "burn.js")
	// --perf-basic-prof also writes a V8 log in the current folder: elsewhere.
	p := recordJIT(t, []string{"--duration", "2s"}, node, "--perf-basic-prof",
		"--no-logfile-per-isolate", "--logfile="+filepath.Join(filepath.Dir(script), "v8.log"), script, "3")
	checkJITProfile(t, p, regexp.MustCompile(`burnCpuNodeMarker`))
}

// Without --perf-basic-prof node's code stays unnamed, and the profile
// says so and how to fix it.
func TestRecordNodeUnnamedJitNote(t *testing.T) {
	requireRecording(t)
	node := requireRuntime(t, "node")
	script := jitWorkload(t, "burn.js")
	p := recordJIT(t, []string{"--duration", "1s"}, node, script, "2")
	want := regexp.MustCompile(`^\d+\.\d% of the on-CPU frames in anonymous executable memory \(JIT or interpreter code\) of process \d+ stayed unnamed: no perf map or jitdump for PID \d+ .*run node with --perf-basic-prof`)
	for _, n := range p.Notes {
		if want.MatchString(n) {
			return
		}
	}
	t.Errorf("no note matches %s in %q", want, p.Notes)
}

// The JVM writes its perf map when it exits (-XX:+DumpPerfMapAtExit): the
// names are looked up when the profile is built, after the program ended.
func TestRecordJavaPerfMapAtExit(t *testing.T) {
	requireRecording(t)
	java := requireRuntime(t, "java")
	javac := requireRuntime(t, "javac")
	src := jitWorkload(t, "BurnJava.java")
	dir := filepath.Dir(src)
	if out, err := exec.Command(javac, "-d", dir, src).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	// Frame pointers in compiled code, so that the kernel's walk goes
	// through it to the callers.
	p := recordJIT(t, nil, java, "-XX:+UnlockDiagnosticVMOptions", "-XX:+DumpPerfMapAtExit",
		"-XX:+PreserveFramePointer", "-cp", dir, "BurnJava", "3")
	checkJITProfile(t, p, regexp.MustCompile(`BurnJava\.burnCpuJavaMarker`))
}

// Python 3.13's -X perf_jit writes a jitdump file instead of a perf map.
// The program exits by itself: it writes the file through a buffer that a
// SIGTERM (the end of a --duration) would not flush.
func TestRecordPythonJitdump(t *testing.T) {
	requireRecording(t)
	py, found := python(13)
	if py == "" {
		t.Skipf("python -X perf_jit needs Python 3.13 or later; found %s", found)
	}
	script := jitWorkload(t, "burn.py")
	// Five seconds, not three: the recorder reads the target's new
	// mappings (the JIT code, the jitdump file) when the samples that need
	// them are read, about once a second, and it must do so while the
	// program lives; on a loaded machine three seconds left too few reads.
	p := recordJIT(t, nil, py, "-X", "perf_jit", script, "5")
	checkJITProfile(t, p, regexp.MustCompile(`^py::burn_cpu_python_marker:`))
}

// A process in its own PID and mount namespaces, as in a container: node
// is PID 1 there and writes /tmp/perf-1.map on a /tmp that only its mount
// namespace sees. wallprof attaches by host PID and reads the map through
// /proc/PID/root with the PID from NSpid.
func TestRecordNodeInContainerNamespaces(t *testing.T) {
	requireRecording(t)
	node := requireRuntime(t, "node")
	unshare := requireRuntime(t, "unshare")
	data, err := os.ReadFile(filepath.Join("testdata", "jit", "burn.js"))
	if err != nil {
		t.Fatal(err)
	}
	wallprofBin(t) // built before node starts: it burns for 3 s, a build can take that long
	target := exec.Command(unshare, "--pid", "--fork", "--mount", "--mount-proc", "sh", "-c",
		`mount -t tmpfs tmpfs /tmp && exec "$0" --perf-basic-prof --no-logfile-per-isolate --logfile=/tmp/v8.log -e "$1" 3`, node, string(data))
	if err := target.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		target.Process.Kill()
		target.Wait()
	}()
	// node is unshare's child, once sh has exec'ed it.
	var pid int
	for i := 0; i < 100 && pid == 0; i++ {
		time.Sleep(20 * time.Millisecond)
		kids, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", target.Process.Pid, target.Process.Pid))
		for _, f := range strings.Fields(string(kids)) {
			n, _ := strconv.Atoi(f)
			if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", n)); n > 0 && filepath.Base(exe) == filepath.Base(node) {
				pid = n
			}
		}
	}
	if pid == 0 {
		t.Fatal("node did not start in its namespaces")
	}
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if !regexp.MustCompile(`(?m)^NSpid:\s+\d+\s+1$`).Match(status) {
		t.Fatalf("node is not PID 1 of its namespace:\n%s", status)
	}
	time.Sleep(300 * time.Millisecond) // past node's start-up
	out := filepath.Join(t.TempDir(), "ns.pb.gz")
	// node exits during the recording, and its mount namespace (its /tmp
	// and the map on it) with it: the map must have been opened while it
	// lived (in a slow hour CI's 1.5 s recording outlived node by chance,
	// and every JIT frame stayed unnamed).
	code, stderr := wallprof(t, "record", "-p", strconv.Itoa(pid), "--duration", "10s", "-o", out)
	if code != 0 {
		t.Fatalf("wallprof record exited %d:\n%s", code, stderr)
	}
	checkJITProfile(t, readProfile(t, out), regexp.MustCompile(`burnCpuNodeMarker`))
}
