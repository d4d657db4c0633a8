package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// result is what one run measured.
type result struct {
	Config, Workload string
	Round            int
	Run              int            // in a pooled report, which results.csv (rounds pair within one)
	W                workloadReport // the workload's own report
	Count            float64        // with COUNT: the event's count over the whole command, 0 if not counted
	CmdWall          time.Duration  // launch of the outermost process to its exit
	ToolCPU          time.Duration  // the profiler's own user+sys CPU
	ToolRSSKB        int64          // peak RSS of the profiler process (KiB)
	Startup          time.Duration  // launch (or attach) to the workload's main
	Tail             time.Duration  // workload's exit to the profiler's exit (profile written)
	Self             selfReport     // wallprof's own cost line
}

func monoNS() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}

func rusage(ps *os.ProcessState) (cpu time.Duration, maxRSSKB int64) {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), ru.Maxrss
}

// runWrapped runs argv, a workload possibly under a tool that launches it,
// and measures it. The tool's CPU is the rusage of the whole tree (the tool
// waits for the workload, so its rusage includes it) minus what the
// workload reports for itself; its peak RSS is the tree's maximum, which is
// the tool's since the workloads are tiny.
func runWrapped(ctx context.Context, argv []string, workload string) (result, error) {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout = io.Discard
	cmd.Stderr = &stderr
	launch := monoNS()
	err := cmd.Run()
	exit := monoNS()
	if err != nil {
		return result{}, fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, tail(stderr.String()))
	}
	r := result{CmdWall: time.Duration(exit - launch)}
	if err := r.fill(stderr.String(), workload, launch, exit); err != nil {
		return r, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	cpu, rss := rusage(cmd.ProcessState)
	r.ToolCPU, r.ToolRSSKB = cpu-r.W.CPU, rss
	r.Self = parseSelfReport(stderr.String())
	return r, nil
}

func (r *result) fill(stderr, workload string, launch, exit int64) error {
	r.W = parseWorkloadReport(stderr, workload)
	if !r.W.hasFields {
		return fmt.Errorf("no %q report line on stderr\n%s", workload+": ... elapsed_ns=", tail(stderr))
	}
	r.Startup = time.Duration(r.W.StartNS - launch)
	r.Tail = time.Duration(exit - r.W.EndNS)
	return nil
}

// runAlongside starts tool, waits until it prints ready, runs the workload
// argv, then stops the tool with SIGINT and waits for it to print its
// results (to outFile) and exit.
func runAlongside(ctx context.Context, tool, argv []string, ready, workload, outFile string) (result, error) {
	out, err := os.Create(outFile)
	if err != nil {
		return result{}, err
	}
	defer out.Close()
	var toolErr bytes.Buffer
	tc := exec.CommandContext(ctx, tool[0], tool[1:]...)
	tc.Stderr = &toolErr
	// Its own process group, which is sent the SIGINT as by Ctrl-C: the
	// tool and, when counting, the perf stat around it.
	tc.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pipe, err := tc.StdoutPipe()
	if err != nil {
		return result{}, err
	}
	launch := monoNS()
	if err := tc.Start(); err != nil {
		return result{}, fmt.Errorf("start %s: %w", tool[0], err)
	}
	copied := make(chan error, 1)
	attached := make(chan struct{})
	go func() { copied <- copyAfterReady(pipe, out, ready, attached) }()
	select {
	case <-attached:
	case err := <-copied:
		tc.Wait()
		return result{}, fmt.Errorf("%s exited before %q: %v\n%s", strings.Join(tool, " "), ready, err, tail(toolErr.String()))
	case <-time.After(60 * time.Second):
		tc.Process.Kill()
		tc.Wait()
		return result{}, fmt.Errorf("%s: no %q after 60s", strings.Join(tool, " "), ready)
	}
	attachedAt := monoNS()
	w, werr := runWrapped(ctx, argv, workload)
	syscall.Kill(-tc.Process.Pid, syscall.SIGINT)
	<-copied
	terr := tc.Wait()
	exit := monoNS()
	if werr != nil {
		return result{}, werr
	}
	if terr != nil && !isInterrupt(terr) {
		return result{}, fmt.Errorf("%s: %w\n%s", strings.Join(tool, " "), terr, tail(toolErr.String()))
	}
	r := w
	r.CmdWall = time.Duration(exit - launch)
	r.Startup = time.Duration(attachedAt - launch)
	r.Tail = time.Duration(exit - r.W.EndNS)
	r.ToolCPU, r.ToolRSSKB = rusage(tc.ProcessState)
	r.Self = selfReport{}
	return r, nil
}

// copyAfterReady copies r to w, closing ready once a line contains want.
func copyAfterReady(r io.Reader, w io.Writer, want string, ready chan struct{}) error {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadString('\n')
		if strings.Contains(line, want) {
			close(ready)
			_, err := io.Copy(w, br)
			return err
		}
		if _, werr := io.WriteString(w, line); werr != nil {
			return werr
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("end of output")
			}
			return err
		}
	}
}

func isInterrupt(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGINT
}

// tail returns the last lines of s, for error messages.
func tail(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}
