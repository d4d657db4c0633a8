package escapes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Analyze runs the compiler's escape analysis on pkgs (package patterns,
// "./..." when empty) in dir with the caller's environment:
// 'go build -o /dev/null -gcflags=-m=2 PKGS'. The -m flags apply to the
// named packages only, not their dependencies. A build that fails returns
// an error holding the go command's first error line.
//
// The text output of -m=2 is used rather than -json=0,file://DIR: the go
// command replays a cached compile's stderr, so a second run is fast and
// still sees every diagnostic, while -json names an output directory in the
// compiler flags (a fresh one per run misses the build cache) and leaves
// files to clean up. -m=2 also carries the flow explanation of every
// escape, which the reasons are read from.
func Analyze(ctx context.Context, dir string, pkgs []string) ([]Diagnostic, error) {
	if len(pkgs) == 0 {
		pkgs = []string{"./..."}
	}
	args := append([]string{"build", "-o", os.DevNull, "-gcflags=-m=2"}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	runErr := cmd.Run()
	if runErr != nil {
		var exit *exec.ExitError
		if !errors.As(runErr, &exit) {
			return nil, fmt.Errorf("run go build: %w", runErr)
		}
		return nil, fmt.Errorf("go build %s failed: %s", strings.Join(pkgs, " "), firstError(stderr.String()))
	}
	return ParseDiagnostics(&stderr)
}

// firstError picks the first line of a failed build's output that is not
// a package header or an optimisation diagnostic.
func firstError(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		if m := posRE.FindStringSubmatch(l); m != nil && isMDiagnostic(m[4]) {
			continue
		}
		return strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(l), ":"), "; to add it")
	}
	return "no error message"
}

func isMDiagnostic(msg string) bool {
	if strings.HasPrefix(msg, " ") || strings.HasSuffix(msg, ":") {
		return true
	}
	d := Diagnostic{Message: msg}
	if d.Kind() != KindOther {
		return true
	}
	for _, p := range []string{"can inline ", "cannot inline ", "inlining call to ", "func literal "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return strings.Contains(msg, " capturing by ")
}
