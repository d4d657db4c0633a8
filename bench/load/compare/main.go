// Command compare runs 'wallprof load', hey and the vegeta CLI against the
// same local server (bench/load/server), interleaved, and prints a Markdown
// table of medians: the achieved rate, the load generator's own CPU time
// (user+system, from the child's rusage) and the p50/p99 latency each tool
// reports. See bench/load/README.md.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type sample struct {
	rate     float64 // achieved requests/s
	cpu      time.Duration
	p50, p99 time.Duration
}

type tool struct {
	name string
	run  func(scenario string) (sample, error)
}

var (
	wallprof = flag.String("wallprof", "wallprof", "wallprof binary")
	hey      = flag.String("hey", "hey", "hey binary")
	vegeta   = flag.String("vegeta", "vegeta", "vegeta binary")
	url      = flag.String("url", "http://127.0.0.1:18080/", "target (start bench/load/server first)")
	rate     = flag.Int("rate", 2000, "open-model rate, requests/s")
	conc     = flag.Int("c", 50, "closed-model concurrency")
	dur      = flag.Duration("duration", 5*time.Second, "duration of each run")
	runs     = flag.Int("runs", 3, "interleaved runs per tool and scenario")
	tmp      = flag.String("tmp", os.TempDir(), "directory for vegeta's result files")
)

func main() {
	flag.Parse()
	tools := []tool{{"wallprof load", runWallprof}, {"hey", runHey}, {"vegeta", runVegeta}}
	for _, sc := range []string{"rate", "closed"} {
		res := map[string][]sample{}
		for i := 0; i < *runs; i++ {
			for _, tl := range tools {
				s, err := tl.run(sc)
				if err != nil {
					fmt.Fprintf(os.Stderr, "%s %s: %v\n", tl.name, sc, err)
					os.Exit(1)
				}
				fmt.Fprintf(os.Stderr, "%s %s run %d: %.0f/s cpu %v p50 %v p99 %v\n", tl.name, sc, i+1, s.rate, s.cpu, s.p50, s.p99)
				res[tl.name] = append(res[tl.name], s)
			}
		}
		printTable(sc, tools, res)
	}
}

func printTable(sc string, tools []tool, res map[string][]sample) {
	if sc == "rate" {
		fmt.Printf("\n### Open model: %d requests/s for %v (hey: -c 10 -q %d)\n\n", *rate, *dur, *rate/10)
	} else {
		fmt.Printf("\n### Closed model: %d workers for %v\n\n", *conc, *dur)
	}
	fmt.Println("| tool | achieved rate (req/s) | generator CPU (s) | CPU µs per request | p50 | p99 |")
	fmt.Println("|---|---:|---:|---:|---:|---:|")
	for _, tl := range tools {
		ss := res[tl.name]
		r := median(ss, func(s sample) float64 { return s.rate })
		c := median(ss, func(s sample) float64 { return s.cpu.Seconds() })
		per := median(ss, func(s sample) float64 { return s.cpu.Seconds() * 1e6 / (s.rate * dur.Seconds()) })
		p50 := median(ss, func(s sample) float64 { return float64(s.p50) })
		p99 := median(ss, func(s sample) float64 { return float64(s.p99) })
		fmt.Printf("| %s | %.0f | %.2f | %.1f | %v | %v |\n", tl.name, r, c, per,
			time.Duration(p50).Round(time.Microsecond), time.Duration(p99).Round(time.Microsecond))
	}
}

func median(ss []sample, f func(sample) float64) float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = f(s)
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// execute runs a command and returns its stdout and its own CPU time.
func execute(name string, args ...string) ([]byte, time.Duration, error) {
	cmd := exec.Command(name, args...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
	return out, cpu, nil
}

func runWallprof(sc string) (sample, error) {
	args := []string{"load", "--json", "--duration", dur.String()}
	if sc == "rate" {
		args = append(args, "--rate", fmt.Sprintf("%d/s", *rate))
	} else {
		args = append(args, "--concurrency", strconv.Itoa(*conc))
	}
	out, cpu, err := execute(*wallprof, append(args, *url)...)
	if err != nil {
		return sample{}, err
	}
	var r struct {
		SentRate float64 `json:"sent_rate"`
		Latency  struct {
			P50 time.Duration `json:"p50_ns"`
			P99 time.Duration `json:"p99_ns"`
		} `json:"latency"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return sample{}, err
	}
	return sample{rate: r.SentRate, cpu: cpu, p50: r.Latency.P50, p99: r.Latency.P99}, nil
}

var (
	heyRate = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	heyPct  = regexp.MustCompile(`(?m)^\s+(50|99)%+ in ([0-9.]+) secs`)
)

func runHey(sc string) (sample, error) {
	args := []string{"-z", dur.String()}
	if sc == "rate" {
		args = append(args, "-c", "10", "-q", strconv.Itoa(*rate/10))
	} else {
		args = append(args, "-c", strconv.Itoa(*conc))
	}
	out, cpu, err := execute(*hey, append(args, *url)...)
	if err != nil {
		return sample{}, err
	}
	s := sample{cpu: cpu}
	m := heyRate.FindSubmatch(out)
	if m == nil {
		return s, fmt.Errorf("no Requests/sec in hey's output:\n%s", out)
	}
	s.rate, _ = strconv.ParseFloat(string(m[1]), 64)
	for _, m := range heyPct.FindAllSubmatch(out, -1) {
		secs, _ := strconv.ParseFloat(string(m[2]), 64)
		d := time.Duration(secs * float64(time.Second))
		if string(m[1]) == "50" {
			s.p50 = d
		} else {
			s.p99 = d
		}
	}
	return s, nil
}

func runVegeta(sc string) (sample, error) {
	bin := filepath.Join(*tmp, "vegeta-results.bin")
	targets := filepath.Join(*tmp, "vegeta-targets.txt")
	if err := os.WriteFile(targets, []byte("GET "+*url+"\n"), 0o644); err != nil {
		return sample{}, err
	}
	args := []string{"attack", "-targets", targets, "-duration", dur.String(), "-output", bin}
	if sc == "rate" {
		args = append(args, "-rate", fmt.Sprintf("%d/s", *rate))
	} else {
		args = append(args, "-rate", "0", "-workers", strconv.Itoa(*conc), "-max-workers", strconv.Itoa(*conc))
	}
	if _, cpu, err := execute(*vegeta, args...); err != nil {
		return sample{}, err
	} else {
		out, _, err := execute(*vegeta, "report", "-type", "json", bin)
		if err != nil {
			return sample{}, err
		}
		var r struct {
			Rate      float64 `json:"rate"`
			Latencies struct {
				P50 time.Duration `json:"50th"`
				P99 time.Duration `json:"99th"`
			} `json:"latencies"`
		}
		if err := json.Unmarshal(out, &r); err != nil {
			return sample{}, err
		}
		return sample{rate: r.Rate, cpu: cpu, p50: r.Latencies.P50, p99: r.Latencies.P99}, nil
	}
}
