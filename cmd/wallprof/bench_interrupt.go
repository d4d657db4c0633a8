package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"

	"github.com/wallprof/wallprof/internal/bench"
)

// Exit codes of an interrupted bench command, as a shell gives a command
// killed by the signal (128+N; 'wallprof record -- COMMAND' passes them on
// the same way).
const (
	exitInterrupted = 128 + int(syscall.SIGINT)
	exitTerminated  = 128 + int(syscall.SIGTERM)
)

// benchInterrupted handles err when ctx was cancelled (Ctrl-C, SIGTERM):
// it stores the complete rounds of an interrupted run, marked incomplete,
// says in one sentence on stderr what was kept, and returns the exit code
// and true. It returns false when the command was not interrupted.
func benchInterrupted(ctx context.Context, st bench.Store, name string, err error, stderr io.Writer) (int, bool) {
	if ctx.Err() == nil {
		return 0, false
	}
	code := interruptedCode(ctx)
	var ie *bench.InterruptedError
	if !errors.As(err, &ie) || ie.Rounds == 0 {
		fmt.Fprintf(stderr, "wallprof %s: interrupted before a round was complete; nothing was stored.\n", name)
		return code, true
	}
	// ctx is cancelled; the save must not be.
	if err := saveRuns(context.WithoutCancel(ctx), st, ie.Runs...); err != nil {
		fmt.Fprintf(stderr, "wallprof %s: interrupted after %d of %d rounds, and their samples could not be stored: %v.\n", name, ie.Rounds, ie.Total, err)
		return code, true
	}
	ids := make([]string, len(ie.Runs))
	for i, r := range ie.Runs {
		ids[i] = fmt.Sprint(r.ID)
	}
	what := "run " + ids[0]
	if len(ids) > 1 {
		what = "runs " + strings.Join(ids, " and ")
	}
	fmt.Fprintf(stderr, "wallprof %s: interrupted after %d of %d rounds; the samples of those %d rounds are stored as %s, marked incomplete.\n",
		name, ie.Rounds, ie.Total, ie.Rounds, what)
	return code, true
}

// interruptedCode is the exit code of a command whose ctx was cancelled:
// 143 after SIGTERM, else 130 (Ctrl-C).
func interruptedCode(ctx context.Context) int {
	if c := context.Cause(ctx); c != nil && strings.HasPrefix(c.Error(), syscall.SIGTERM.String()+" ") {
		return exitTerminated
	}
	return exitInterrupted
}
