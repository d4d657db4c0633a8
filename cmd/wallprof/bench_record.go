//go:build linux && amd64

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"github.com/wallprof/wallprof/internal/bench"
	"github.com/wallprof/wallprof/internal/linux"
	"github.com/wallprof/wallprof/internal/outfile"
	"github.com/wallprof/wallprof/internal/present"
	"github.com/wallprof/wallprof/internal/record"
)

// recordBenchmark is bench check's bench.Recorder: it launches the test
// binary under the recorder as 'wallprof record -- COMMAND' does
// (launchGated), with the goroutine view, until it exits, and writes the
// wall-clock profile as pprof.
func recordBenchmark(ctx context.Context, dir string, argv []string, out string) error {
	if msg := preflight(); msg != "" {
		if errors.Is(linux.CheckPrivileges(), linux.ErrNoPrivileges) {
			msg = "needs root"
		}
		return fmt.Errorf("%w: %s", bench.ErrCannotRecord, strings.TrimSuffix(msg, "."))
	}
	var stderr bytes.Buffer
	o := record.Options{Goroutines: true, Command: strings.Join(argv, " "), Plan: setPlanFromEnv}
	g, err := launchGated(argv[0], argv, o, func(cmd *exec.Cmd) {
		cmd.Dir, cmd.Stderr = dir, &stderr
	})
	if err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- g.cmd.Wait() }()
	g.open()
	var waitErr error
	select {
	case waitErr = <-exited:
	case <-ctx.Done():
		_ = g.cmd.Process.Kill()
		<-exited
		g.rec.Close()
		return ctx.Err()
	}
	if err := g.rec.Stop(); err != nil {
		return err
	}
	if waitErr != nil {
		return fmt.Errorf("%v: %s", waitErr, strings.TrimSpace(stderr.String()))
	}
	p, err := g.rec.Profile()
	if err != nil {
		return err
	}
	f, err := outfile.Create(out)
	if err != nil {
		return err
	}
	defer f.Abandon()
	if err := present.WritePprof(f, p); err != nil {
		return err
	}
	return f.Commit()
}
