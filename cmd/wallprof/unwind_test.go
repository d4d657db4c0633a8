//go:build linux && amd64

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

	"github.com/wallprof/wallprof/internal/groundtruth"
	"github.com/wallprof/wallprof/internal/profile"
)

// stackFuncs returns a sample's function names, outermost first.
func stackFuncs(s *profile.Sample) []string {
	var out []string
	for i := len(s.Stack) - 1; i >= 0; i-- {
		fr := s.Stack[i].Frames
		for j := len(fr) - 1; j >= 0; j-- {
			out = append(out, fr[j].Function)
		}
	}
	return out
}

// inOrder reports whether chain is a subsequence of funcs.
func inOrder(funcs, chain []string) bool {
	i := 0
	for _, f := range funcs {
		if i < len(chain) && f == chain[i] {
			i++
		}
	}
	return i == len(chain)
}

// nofpChains are the nofp workload's call paths, outermost first: a sample
// whose stack holds the last function must hold the others, in this order.
var nofpChains = []struct {
	chain []string
	state string // "on" or "off": the state its samples must include
}{
	{[]string{"main", "driver", "stage_parse", "parse_leaf", "spin"}, "on"},
	{[]string{"main", "driver", "stage_sort", "cmp_items", "cmp_leaf"}, "on"},
	{[]string{"main", "driver", "stage_deep", "recurse", "recurse", "recurse", "recurse", "recurse", "recurse", "recurse", "deep_leaf"}, "on"},
	{[]string{"worker_main", "worker_loop", "worker_nap"}, "off"},
	{[]string{"worker_main", "worker_loop", "worker_wait"}, "off"},
	// Blocked from the start to the end: its stack is read by the task
	// iterator at the end of the recording, from another process.
	{[]string{"idle_main", "idle_wait"}, "off"},
}

// unwindShares records nofp with env and returns the share of its on-CPU
// time whose stack reaches main or the worker's start routine, and the
// profile.
func unwindShares(t *testing.T, bin string, env ...string) (float64, *profile.Profile, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "nofp.pb.gz")
	cmd := exec.Command(wallprofBin(t), "record", "-o", out, "--", bin, "4")
	cmd.Env = append(os.Environ(), env...)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("wallprof record: %v\n%s", err, b)
	}
	p := readProfile(t, out)
	var all, reached int64
	for _, s := range p.Samples {
		if s.State != profile.OnCPU || len(s.Stack) == 0 {
			continue
		}
		all += s.Value
		if stackHas(s, "main") || stackHas(s, "worker_main") {
			reached += s.Value
		}
	}
	if all == 0 {
		t.Fatalf("no on-CPU samples:\n%s", b)
	}
	return float64(reached) / float64(all), p, string(b)
}

// TestRecordUnwindsWithoutFramePointers records a C program built without
// frame pointers: its stacks are complete, on and off CPU, every function
// under its callers, where the frame-pointer walk loses them.
func TestRecordUnwindsWithoutFramePointers(t *testing.T) {
	requireRecording(t)
	bin := groundtruth.Build(t, "nofp")
	share, p, stderr := unwindShares(t, bin)
	t.Logf("%.1f%% of on-CPU time reaches main or worker_main\n%s", 100*share, stderr)
	if share < 0.95 {
		t.Errorf("only %.1f%% of on-CPU time reaches main or the thread's start routine; want at least 95%%", 100*share)
	}
	if !strings.Contains(stderr, "unwound in the kernel") {
		t.Errorf("no note on the in-kernel unwinding in:\n%s", stderr)
	}
	for _, c := range nofpChains {
		leaf := c.chain[len(c.chain)-1]
		var with, complete int64
		states := map[bool]bool{}
		for _, s := range p.Samples {
			funcs := stackFuncs(s)
			if !inOrder(funcs, []string{c.chain[len(c.chain)-2], leaf}) {
				continue
			}
			with += s.Value
			states[s.State == profile.OnCPU] = true
			if inOrder(funcs, c.chain) {
				complete += s.Value
			}
		}
		switch {
		case with == 0:
			t.Errorf("%s: no sample", strings.Join(c.chain, " > "))
		case float64(complete) < 0.95*float64(with):
			t.Errorf("%s: %.1f%% of its time has the whole chain; want 95%%", strings.Join(c.chain, " > "), 100*float64(complete)/float64(with))
		case !states[c.state == "on"]:
			t.Errorf("%s: no %s-CPU sample", strings.Join(c.chain, " > "), c.state)
		}
	}

	// The same program walked by frame pointer alone loses the callers:
	// the workload does test what it claims to.
	fpShare, _, _ := unwindShares(t, bin, "WALLPROF_UNWIND=fp")
	t.Logf("by frame pointer: %.1f%%", 100*fpShare)
	if fpShare > 0.8 {
		t.Errorf("by frame pointer %.1f%% of on-CPU time reaches main: the workload has frame pointers after all", 100*fpShare)
	}
}

// TestRecordStockfish records Debian's stockfish (stripped, no frame
// pointers, AVX code that realigns its stack) at -F 999, its bench at the
// default depth (13, ~2.5 s): at least 95% of its on-CPU time reaches the
// program's entry or a thread's start. (Its first milliseconds, clearing
// the hash table in glibc's memset, can come before glibc's table is in
// and be walked by frame pointer: at depth 10, 0.7 s, that was up to 9% of
// the samples in one run of eight.)
func TestRecordStockfish(t *testing.T) {
	requireRecording(t)
	bin := "/usr/games/stockfish"
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %s is missing (.ci/run installs the stockfish package)", bin)
		}
		t.Skipf("%s is not installed (apt-get install stockfish)", bin)
	}
	out := filepath.Join(t.TempDir(), "sf.pb.gz")
	code, stderr := wallprof(t, "record", "-F", "999", "-o", out, "--", bin, "bench", "16", "1", "13")
	if code != 0 {
		t.Fatalf("wallprof record exited %d:\n%s", code, stderr)
	}
	p := readProfile(t, out)
	var all, reached int64
	roots := map[string]int64{}
	for _, s := range p.Samples {
		if s.State != profile.OnCPU || len(s.Stack) == 0 {
			continue
		}
		all += s.Value
		funcs := stackFuncs(s)
		root := funcs[0]
		roots[root] += s.Value
		// The entry point (_start, named by address: stripped) calls
		// __libc_start_main; threads start at clone3.
		if root == "clone3" || (len(funcs) > 1 && funcs[1] == "__libc_start_main_impl") {
			reached += s.Value
		}
	}
	share := float64(reached) / float64(max(all, 1))
	t.Logf("%.1f%% of %d samples' on-CPU time reaches the entry or a thread start; roots: %v\n%s", 100*share, len(p.Samples), topRoots(roots, 8), stderr)
	if share < 0.95 {
		t.Errorf("only %.1f%% of on-CPU time reaches the entry or a thread start; roots: %v", 100*share, topRoots(roots, 8))
	}
}

func topRoots(m map[string]int64, n int) string {
	type kv struct {
		k string
		v int64
	}
	var all []kv
	for k, v := range m {
		all = append(all, kv{k, v})
	}
	for i := range all {
		for j := i + 1; j < len(all); j++ {
			if all[j].v > all[i].v {
				all[i], all[j] = all[j], all[i]
			}
		}
	}
	var s []string
	for i := 0; i < len(all) && i < n; i++ {
		s = append(s, fmt.Sprintf("%s=%d", all[i].k, all[i].v))
	}
	return strings.Join(s, " ")
}

// TestRecordCgoUnwinds records a Go program whose CPU time is in C code
// without frame pointers, called through cgo: the C frames are unwound
// with .eh_frame, the Go frames by frame pointer, across asmcgocall's switch
// to the system stack, and at least 95% of the C function's on-CPU time
// reaches main.main.
func TestRecordCgoUnwinds(t *testing.T) {
	requireRecording(t)
	if _, err := exec.LookPath("gcc"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but gcc is missing")
		}
		t.Skip("gcc is not installed")
	}
	bin := filepath.Join(t.TempDir(), "cgocall")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = groundtruth.WorkloadDir(t, "cgocall")
	build.Env = append(os.Environ(), "CGO_ENABLED=1", "GOWORK=off", "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out := filepath.Join(t.TempDir(), "cgo.pb.gz")
	checkWholeChain(t, out, []string{"main.main", "main.goCaller", "runtime.cgocall", "runtime.asmcgocall", "c_spin", "c_leaf"},
		"record", "-o", out, "--", bin, "3")
}

// checkWholeChain records with args into out and checks that at least 95%
// of the on-CPU time of the chain's last function has the whole chain, in
// order, in its stack.
func checkWholeChain(t *testing.T, out string, chain []string, args ...string) {
	t.Helper()
	code, stderr := wallprof(t, args...)
	if code != 0 {
		t.Fatalf("wallprof record exited %d:\n%s", code, stderr)
	}
	p := readProfile(t, out)
	leaf := chain[len(chain)-1]
	var with, whole int64
	for _, s := range p.Samples {
		if s.State != profile.OnCPU || !stackHas(s, leaf) {
			continue
		}
		with += s.Value
		if inOrder(stackFuncs(s), chain) {
			whole += s.Value
		}
	}
	share := float64(whole) / float64(max(with, 1))
	t.Logf("%.1f%% of %s's on-CPU time has %s\n%s", 100*share, leaf, strings.Join(chain, " > "), stderr)
	if with == 0 || share < 0.95 {
		t.Errorf("%.1f%% of %s's on-CPU time (%d ns) has the whole chain %s; want 95%%", 100*share, leaf, with, strings.Join(chain, " > "))
	}
}

// TestRecordCSharedUnwinds records a C program (no frame pointers) that
// calls an exported function of a Go c-shared library: the Go frames go on
// through crosscall2 into the C caller, and at least 95% of the Go
// function's on-CPU time reaches the C program's main. With the installed
// Go, and with Go 1.22 when its toolchain is in the module cache (its
// runtime leaves runtime.goexit at the bottom of the goroutine stack, and
// its library has no .gopclntab section).
func TestRecordCSharedUnwinds(t *testing.T) {
	requireRecording(t)
	if _, err := exec.LookPath("gcc"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but gcc is missing")
		}
		t.Skip("gcc is not installed")
	}
	toolchains := []string{""}
	if out, err := exec.Command("go", "env", "GOMODCACHE").Output(); err == nil {
		if _, err := os.Stat(filepath.Join(strings.TrimSpace(string(out)), "golang.org", "toolchain@v0.0.1-go1.22.12.linux-amd64")); err == nil {
			toolchains = append(toolchains, "go1.22.12")
		}
	}
	src := groundtruth.WorkloadDir(t, "cshared")
	for _, tc := range toolchains {
		name := tc
		if name == "" {
			name = "installed"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			build := exec.Command("go", "build", "-buildmode=c-shared", "-o", filepath.Join(dir, "libspin.so"), ".")
			build.Dir = src
			build.Env = append(os.Environ(), "CGO_ENABLED=1", "GOWORK=off", "GOFLAGS=-mod=mod")
			if tc != "" {
				build.Env = append(build.Env, "GOTOOLCHAIN="+tc)
			}
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go build: %v\n%s", err, out)
			}
			bin := filepath.Join(dir, "cshared")
			if out, err := exec.Command("gcc", "-O2", "-fomit-frame-pointer", "-o", bin, filepath.Join(src, "main.c"),
				"-L"+dir, "-lspin", "-Wl,-rpath,"+dir).CombinedOutput(); err != nil {
				t.Fatalf("gcc: %v\n%s", err, out)
			}
			out := filepath.Join(dir, "cshared.pb.gz")
			checkWholeChain(t, out, []string{"main", "c_caller", "crosscall2", "main.GoSpin", "main.goLeaf"},
				"record", "-o", out, "--", bin, "3")
		})
	}
}

// TestRecordShortChildrenNamed records a shell loop whose children (ls)
// live a few tens of milliseconds each, less than the ring buffer's read
// interval: their mappings are read at their exec (on_exec), so their user
// frames are named (before, nearly all were [unknown]+0x...: the children
// were gone when their first samples were read).
func TestRecordShortChildrenNamed(t *testing.T) {
	requireRecording(t)
	out := filepath.Join(t.TempDir(), "kids.pb.gz")
	code, stderr := wallprof(t, "record", "-F", "999", "-o", out, "--", "sh", "-c", "for i in $(seq 30); do ls -R /usr/share/doc > /dev/null; done")
	if code != 0 {
		t.Fatalf("wallprof record exited %d:\n%s", code, stderr)
	}
	p := readProfile(t, out)
	var frames, unknown int
	pids := map[int]bool{}
	for _, s := range p.Samples {
		if s.Thread != "ls" {
			continue
		}
		pids[s.PID] = true
		for _, l := range s.Stack {
			if l.Mapping != nil && l.Mapping.Kernel {
				continue
			}
			for _, f := range l.Frames {
				frames++
				if strings.HasPrefix(f.Function, "[unknown]") {
					unknown++
				}
			}
		}
	}
	t.Logf("%d ls processes, %d user frames, %d unnamed", len(pids), frames, unknown)
	if len(pids) < 10 || frames < 100 {
		t.Fatalf("only %d ls processes and %d user frames recorded", len(pids), frames)
	}
	if float64(unknown) > 0.05*float64(frames) {
		t.Errorf("%d of %d user frames of the short children unnamed, want under 5%%", unknown, frames)
	}
}

// TestRecordUnwindsAtTheStackTop records a loop whose stack ends a few
// hundred bytes above it, at an unreadable page (a context of its own,
// makecontext): the in-kernel walk reads the stack through a window larger
// than what is left of it, and must still take every frame up to the
// context's entry.
func TestRecordUnwindsAtTheStackTop(t *testing.T) {
	requireRecording(t)
	bin := groundtruth.Build(t, "topstack")
	out := filepath.Join(t.TempDir(), "topstack.pb.gz")
	code, stderr := wallprof(t, "record", "-F", "999", "-o", out, "--", bin, "2")
	if code != 0 {
		t.Fatalf("wallprof record exited %d:\n%s", code, stderr)
	}
	p := readProfile(t, out)
	chain := []string{"ctx_entry", "ctx_work", "ctx_leaf"}
	var with, complete int64
	for _, s := range p.Samples {
		funcs := stackFuncs(s)
		if s.State != profile.OnCPU || !inOrder(funcs, chain[2:]) {
			continue
		}
		with += s.Value
		if inOrder(funcs, chain) {
			complete += s.Value
		}
	}
	t.Logf("%d of %d ns under ctx_leaf have the whole chain\n%s", complete, with, stderr)
	if with == 0 {
		t.Fatalf("no on-CPU sample in ctx_leaf:\n%s", stderr)
	}
	if float64(complete) < 0.95*float64(with) {
		t.Errorf("%.1f%% of ctx_leaf's on-CPU time has %s; want 95%%", 100*float64(complete)/float64(with), strings.Join(chain, " > "))
	}
	// User space repairs a walk that stopped early from the stack's
	// snapshot, so the chain alone would not show the kernel's walk
	// failing at the top: its note says where walks stopped.
	if m := readStopRe.FindStringSubmatch(stderr); m != nil {
		if v, err := strconv.ParseFloat(m[1], 64); err == nil && v >= 1 {
			t.Errorf("%s%% of the kernel's walks stopped at stack memory they could not read; want none:\n%s", m[1], stderr)
		}
	}
}

// readStopRe finds the share of walks that stopped at unreadable stack
// memory in record's note on the in-kernel unwinder.
var readStopRe = regexp.MustCompile(`stack memory that could not be read [<>]?([0-9.]+)%`)
