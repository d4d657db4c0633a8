package main

import (
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/wallprof/wallprof/internal/golden"
)

func commandNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// 'wallprof CMD --help', '-h' and 'wallprof help CMD' print the command's
// usage and flags on stdout and exit 0; the text is
// testdata/help/CMD.txt ('go test -update' rewrites it).
func TestHelpGolden(t *testing.T) {
	for _, name := range commandNames() {
		t.Run(name, func(t *testing.T) {
			var first string
			for _, args := range [][]string{{name, "--help"}, {name, "-h"}, {"help", name}, {name, "-help"}} {
				code, stdout, stderr := runCmd(args...)
				if code != exitOK || stderr != "" {
					t.Errorf("wallprof %s: exit %d, stderr %q; want 0 and nothing", strings.Join(args, " "), code, stderr)
				}
				if first == "" {
					first = stdout
					golden.Check(t, "help/"+name+".txt", []byte(stdout))
				} else if stdout != first {
					t.Errorf("wallprof %s prints another text than wallprof %s --help", strings.Join(args, " "), name)
				}
			}
			if !strings.HasPrefix(first, "Usage") || !strings.Contains(first, "\nFlags:\n") {
				t.Errorf("the help does not start with Usage or has no Flags section:\n%s", first)
			}
		})
	}
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}} {
		code, stdout, stderr := runCmd(args...)
		if code != exitOK || stderr != "" {
			t.Errorf("wallprof %s: exit %d, stderr %q", args[0], code, stderr)
		}
		golden.Check(t, "help/wallprof.txt", []byte(stdout))
	}
}

// usageErrors are common mistakes with each command; each must say what is
// wrong in one line with the hint, on stderr, and exit 2.
var usageErrors = map[string][][]string{
	"record": {
		{"--bogus", "--", "true"},
		{},
		{"-F", "abc", "-p", "1"},
		{"-F", "0", "-p", "1"},
		{"-p", "1,x"},
		{"-p", "-3"},
		{"-p1,0"},
		{"--duration", "soon", "-p", "1"},
		{"--format", "pprof", "-o", "x.folded", "-p", "1"},
		{"-o", "-", "--json", "-", "-p", "1"},
		{"--format", "svg", "-p", "1"},
		{"--duration", "-1s", "-p", "1"},
		{"-o"},
	},
	"trace": {
		{},
		{"--bogus", "t.out"},
		{"a.out", "b.out"},
		{"--url", "http://127.0.0.1:1/debug/pprof/trace", "t.out"},
	},
	"agent": {
		{"-p", "1"},
		{"--otlp", "http://127.0.0.1:4318", "--period", "10ms"},
		{"--otlp", "http://127.0.0.1:4318", "-p", "x"},
		{"--otlp", "http://127.0.0.1:4318", "-p", "1", "--period", "100ms"},
		{"--otlp", "http://127.0.0.1:4318", "-p", "1", "--token-file", "t", "--user", "u"},
		{"--otlp", "http://127.0.0.1:4318", "-p", "1", "--user", "u"},
		{"--otlp", "http://127.0.0.1:4318", "-p", "1", "extra"},
		{"--otlp", "http://127.0.0.1:4317", "--otlp-protocol", "http/json", "-p", "1"},
		{"--config", "/nonexistent/agent.yaml"},
	},
	"latency": {
		{"main.handle"},
		{"-p", "1"},
		{"-p", "1", "--duration", "-1s", "main.handle"},
		{"-p", "1", "--bogus", "main.handle"},
	},
	"top": {
		{"-p", "1", "--interval", "10ms"},
		{"-p", "1", "extra"},
		{"-p", "1", "--sort", "name"},
		{"-p", "1", "--view", "stacks"},
		{"--view", "goroutines"},
		{"-p", "1", "--window", "500ms"},
		{"-p", "1", "--filter", "("},
	},
	"report": {
		{"--bogus", "a.pb.gz"},
		{},
		{"a.pb.gz", "b.pb.gz"},
		{"--top", "many", "a.pb.gz"},
		{"--focus", "(", "a.pb.gz"},
	},
	"flame": {
		{"--bogus", "a.pb.gz"},
		{},
		{"--weight", "heap", "a.pb.gz"},
		{"--min-width", "100", "a.pb.gz"},
		{"--focus", "(", "a.pb.gz"},
	},
	"view": {
		{"--bogus", "a.pb.gz"},
		{},
		{"--http", "8080", "a.pb.gz"},
	},
	"diff": {
		{"--bogus", "a.pb.gz", "b.pb.gz"},
		{"a.pb.gz"},
		{"--weight", "heap", "a.pb.gz", "b.pb.gz"},
		{"--top", "x", "a.pb.gz", "b.pb.gz"},
	},
	"convert": {
		{"--bogus", "in.txt", "-o", "out.pb.gz"},
		{"-o", "out.pb.gz"},
		{"in.txt"},
		{"in.txt", "-o", "out.bin"},
		{"--to", "svg", "in.txt", "-o", "out.pb.gz"},
		{"--period", "soon", "in.txt", "-o", "out.pb.gz"},
		{"--pid", "x", "in.txt", "-o", "out.pb.gz"},
	},
	"gctrace": {
		{"--bogus", "gc.log"},
		{},
		{"a.log", "b.log", "c.log"},
		{"--requests", "x", "gc.log"},
	},
	"load": {
		{"--bogus", "http://localhost:1/"},
		{"--rate", "100/s", "--duration", "1s"},
		{"http://localhost:1/"},
		{"--rate", "fast", "--duration", "1s", "http://localhost:1/"},
		{"-c", "x", "-n", "10", "http://localhost:1/"},
		{"-H", "no-colon", "-c", "1", "-n", "1", "http://localhost:1/"},
	},
	"run": {
		{"--bogus"},
		{"--load", "http://localhost:1/", "--rate", "10/s", "--duration", "1s"},
		{"--rate", "10/s", "--duration", "1s", "--", "true"},
		{"--load", "http://localhost:1/", "--", "true"},
		{"--load", "http://localhost:1/", "--rate", "1/s", "--duration", "1s", "-F", "0", "--", "true"},
		{"--load", "http://localhost:1/", "--rate", "1/s", "--duration", "1s", "--pprof", "localhost:1", "--", "true"},
	},
	"dump": {
		{},
		{"--bogus", "-p", "1"},
		{"-p", "-3"},
		{"-p", "abc"},
		{"-p", "1", "extra"},
	},
	"bench": {
		{"--bogus"},
		{"--count", "0"},
		{"--alpha", "2"},
		{"--count", "x"},
		{"--threshold", "-1"},
	},
	"escapes": {
		{"--bogus"},
		{},
		{"--profile", "a.pb.gz", "--top", "-1"},
		{"--profile", "a.pb.gz", "--top", "x"},
	},
}

// Usage errors: one sentence and the hint on stderr, nothing on stdout,
// exit 2; the messages are testdata/usage/CMD.txt.
func TestUsageErrorsGolden(t *testing.T) {
	for _, name := range commandNames() {
		cases, ok := usageErrors[name]
		if !ok {
			t.Errorf("no usage errors listed for %s", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			hint := "; run 'wallprof " + name + " --help' for the flags.\n"
			var b strings.Builder
			for _, args := range cases {
				code, stdout, stderr := runCmd(append([]string{name}, args...)...)
				line := "wallprof " + quoteArgs(append([]string{name}, args...))
				b.WriteString("$ " + line + "\n" + stderr)
				if code != exitUsage || stdout != "" {
					t.Errorf("%s: exit %d, stdout %q; want exit %d and nothing on stdout", line, code, stdout, exitUsage)
				}
				if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "wallprof "+name+": ") || !strings.HasSuffix(stderr, hint) {
					t.Errorf("%s: stderr %q; want one line 'wallprof %s: ...%s'", line, stderr, name, strings.TrimSuffix(hint, "\n"))
				}
			}
			golden.Check(t, "usage/"+name+".txt", []byte(b.String()))
		})
	}
}

// The top level's usage errors.
func TestUsageErrorsTopLevel(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate"}, "wallprof: unknown command \"frobnicate\"; run 'wallprof help' for the list.\n"},
		{[]string{"help", "nosuch"}, "wallprof help: unknown command \"nosuch\"; run 'wallprof help' for the list.\n"},
		{[]string{"help", "record", "report"}, "wallprof help: give one command, e.g. 'wallprof help record'.\n"},
	} {
		code, stdout, stderr := runCmd(c.args...)
		if code != exitUsage || stdout != "" || stderr != c.want {
			t.Errorf("wallprof %s: exit %d, stdout %q, stderr %q; want %d, nothing, %q", strings.Join(c.args, " "), code, stdout, stderr, exitUsage, c.want)
		}
	}
	// Without a command: the list of commands, on stderr.
	if code, stdout, stderr := runCmd(); code != exitUsage || stdout != "" || !strings.HasPrefix(stderr, "wallprof: where does the time go?") {
		t.Errorf("wallprof: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// quoteArgs writes a command line as a shell would read it back.
func quoteArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " '\"()*$\\;&|<>") {
			a = strconv.Quote(a)
		}
		out[i] = a
	}
	return strings.Join(out, " ")
}
