// Command flame benchmarks flame graph rendering: the time and peak memory
// to render a million-sample profile, with wallprof (HTML and SVG) and with
// inferno-flamegraph (and flamegraph.pl when installed) on the same stacks in
// collapsed form, and the size of each output. Runs are interleaved and
// medians reported. See RESULTS.md.
//
//	go run ./bench/flame [-samples 1000000] [-rounds 5] [-dir /tmp/flamebench]
package main

import (
	"bufio"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/profile"
)

func main() {
	samples := flag.Int("samples", 1_000_000, "samples in the generated profile")
	rounds := flag.Int("rounds", 5, "interleaved rounds")
	dir := flag.String("dir", filepath.Join(os.TempDir(), "flamebench"), "work directory")
	measure := flag.Bool("measure", false, "only measure (the inputs are in -dir); used internally")
	flag.Parse()
	var err error
	if *measure {
		err = measureAll(*rounds, *dir)
	} else {
		err = run(*samples, *rounds, *dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench/flame:", err)
		os.Exit(1)
	}
}

type tool struct {
	name string
	out  string
	cmd  func(out string) *exec.Cmd
	wall []time.Duration
	rss  []int64 // KiB
	size int64
}

func run(n, rounds int, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	bin := filepath.Join(dir, "wallprof")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/wallprof").CombinedOutput(); err != nil {
		return fmt.Errorf("build wallprof (run from the repository root): %v\n%s", err, out)
	}
	p := generate(n)
	pb, folded := filepath.Join(dir, "big.pb.gz"), filepath.Join(dir, "big.folded")
	if err := writeFile(pb, func(w *bufio.Writer) error { return present.WritePprof(w, p) }); err != nil {
		return err
	}
	// Microseconds: the counts flamegraph.pl and inferno read.
	if err := writeFile(folded, func(w *bufio.Writer) error {
		return present.WriteCollapsed(w, p, present.CollapsedOptions{Unit: time.Microsecond})
	}); err != nil {
		return err
	}
	lines, _ := countLines(folded)
	fmt.Printf("profile: %d samples, %d distinct stacks (collapsed lines); pprof %s, collapsed %s\n",
		n, lines, kib(size(pb)), kib(size(folded)))
	// Measure from a fresh, small process: a child inherits its parent's
	// peak RSS when it execs, and this one holds the generated profile.
	self, err := os.Executable()
	if err != nil {
		return err
	}
	c := exec.Command(self, "-measure", "-rounds", fmt.Sprint(rounds), "-dir", dir)
	c.Stdout, c.Stderr = os.Stdout, os.Stderr
	return c.Run()
}

func measureAll(rounds int, dir string) error {
	bin := filepath.Join(dir, "wallprof")
	pb, folded := filepath.Join(dir, "big.pb.gz"), filepath.Join(dir, "big.folded")

	tools := []*tool{
		{name: "wallprof flame (HTML)", out: "out.html", cmd: func(o string) *exec.Cmd { return exec.Command(bin, "flame", pb, "-o", o) }},
		{name: "wallprof flame --svg", out: "out.svg", cmd: func(o string) *exec.Cmd { return exec.Command(bin, "flame", "--svg", pb, "-o", o) }},
	}
	if path, err := exec.LookPath("inferno-flamegraph"); err == nil {
		tools = append(tools, &tool{name: "inferno-flamegraph", out: "inferno.svg", cmd: func(o string) *exec.Cmd {
			return shell(fmt.Sprintf("exec %q %q > %q", path, folded, o))
		}})
	} else {
		fmt.Println("inferno-flamegraph not found (cargo install inferno): skipped")
	}
	if path, err := exec.LookPath("flamegraph.pl"); err == nil {
		tools = append(tools, &tool{name: "flamegraph.pl", out: "fg.svg", cmd: func(o string) *exec.Cmd {
			return shell(fmt.Sprintf("exec %q %q > %q", path, folded, o))
		}})
	} else {
		fmt.Println("flamegraph.pl not found (FlameGraph is not packaged in Debian): skipped")
	}
	for r := 0; r < rounds; r++ {
		for _, t := range tools {
			out := filepath.Join(dir, t.out)
			c := t.cmd(out)
			c.Stderr = os.Stderr
			start := time.Now()
			if err := c.Run(); err != nil {
				return fmt.Errorf("%s: %v", t.name, err)
			}
			t.wall = append(t.wall, time.Since(start))
			t.rss = append(t.rss, c.ProcessState.SysUsage().(*syscall.Rusage).Maxrss)
			t.size = size(out)
		}
	}
	fmt.Printf("\n| renderer | median wall time | median peak RSS | output size |\n|---|---:|---:|---:|\n")
	for _, t := range tools {
		fmt.Printf("| %s | %.2f s | %d MiB | %s |\n", t.name, median(t.wall).Seconds(), medianInt(t.rss)/1024, kib(t.size))
	}
	return nil
}

func shell(s string) *exec.Cmd { return exec.Command("sh", "-c", s) }

// generate makes n samples of random stacks 5 to 64 frames deep, walking a
// skewed call graph of 3000 functions under 20 roots, in every state.
func generate(n int) *profile.Profile {
	r := rand.New(rand.NewPCG(1, 2))
	exe := &profile.Mapping{ID: 1, File: "/bin/big", Start: 0x1000, Limit: 0x1000000}
	const funcs = 3000
	locs := make([]*profile.Location, funcs)
	for i := range locs {
		locs[i] = &profile.Location{ID: uint64(i + 1), Mapping: exe, Address: uint64(0x1000 + 16*i),
			Frames: []profile.Frame{{Function: fmt.Sprintf("pkg%d.(*Type%d).Method%d", i%37, i%101, i)}}}
	}
	p := &profile.Profile{Duration: 10 * time.Second, Period: 1e7, Command: "big", Mappings: []*profile.Mapping{exe}, Locs: locs}
	for i := 0; i < n; i++ {
		depth := 5 + r.IntN(60)
		st := make([]*profile.Location, depth)
		f := r.IntN(20)
		for d := depth - 1; d >= 0; d-- {
			st[d] = locs[f]
			f = (f*7 + 1 + int(r.ExpFloat64()*3)) % funcs
		}
		p.Samples = append(p.Samples, &profile.Sample{Stack: st, PID: 1, TID: 1 + r.IntN(8), Thread: "t",
			State: profile.State(r.IntN(int(profile.NumStates))), Value: int64(1000 + r.IntN(20000000))})
	}
	return p
}

func writeFile(path string, f func(*bufio.Writer) error) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(fh)
	if err := f(w); err != nil {
		fh.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

func countLines(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<24)
	n := 0
	for s.Scan() {
		n++
	}
	return n, s.Err()
}

func size(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return -1
	}
	return st.Size()
}

func kib(n int64) string {
	if n >= 10<<20 {
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	}
	if n >= 1<<20 {
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", (n+1023)/1024)
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func medianInt(d []int64) int64 {
	s := append([]int64(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
