package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// The one CLI rule: every subcommand defines its flags, usage text and
// parsing through a cmdFlags, so that they all behave alike:
//
//   - 'wallprof CMD --help', '-h' and 'wallprof help CMD' print the
//     command's usage and its flags' defaults on stdout, and exit 0;
//   - a usage error (unknown flag, bad value, missing argument, flags that
//     conflict) prints one sentence and a hint on stderr, and exits 2:
//     "wallprof CMD: what is wrong; run 'wallprof CMD --help' for the flags."
//     Never the whole usage.

// cmdFlags is the flag set of one subcommand.
type cmdFlags struct {
	*flag.FlagSet
	name   string // the subcommand, e.g. "record"
	usage  string // the text printed before the flags, ending with "Flags:\n"
	stdout io.Writer
	stderr io.Writer
}

// newCmdFlags returns the flag set of subcommand name, whose --help prints
// usage followed by the flags and their defaults.
func newCmdFlags(name, usage string, stdout, stderr io.Writer) *cmdFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// The flag package would print its error and the whole usage: say
	// nothing here, parse says it in one line.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return &cmdFlags{FlagSet: fs, name: name, usage: usage, stdout: stdout, stderr: stderr}
}

// parse parses args, allowing flags after the positional arguments
// ('wallprof report app.pb.gz --top 30'); everything after "--" is
// positional. When it returns done, the command returns code: exitOK after
// --help, exitUsage after a usage error.
func (c *cmdFlags) parse(args []string) (code int, done bool) {
	return c.handle(parseInterspersed(c.FlagSet, splitAttached(c.FlagSet, args, false)))
}

// parseToArgs parses args up to the first positional argument, for
// commands whose positional arguments are a command line of their own
// ('wallprof record -F 999 -- ./server --port 8080').
func (c *cmdFlags) parseToArgs(args []string) (code int, done bool) {
	return c.handle(c.FlagSet.Parse(splitAttached(c.FlagSet, args, true)))
}

// splitAttached splits the values attached to single-letter flags, as perf
// and getopt read them: '-F99' is '-F 99', '-p1234' is '-p 1234', '-ofile'
// is '-o file'. Only a single dash followed by the name of a known
// one-letter flag that takes a value is split, and never an argument that
// is itself a flag's name ('-pid'), a flag's value, or after "--" (nor,
// with toArgs, after the first positional argument: a command line of its
// own).
func splitAttached(fs *flag.FlagSet, args []string, toArgs bool) []string {
	out := make([]string, 0, len(args)+1)
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || (toArgs && (a == "-" || !strings.HasPrefix(a, "-"))) {
			return append(out, args[i:]...)
		}
		if !strings.HasPrefix(a, "-") || strings.HasPrefix(a, "--") || len(a) < 2 {
			out = append(out, a)
			continue
		}
		name := strings.SplitN(a[1:], "=", 2)[0]
		if f := fs.Lookup(name); f != nil {
			out = append(out, a)
			if !strings.Contains(a, "=") && !isBoolFlag(f) && i+1 < len(args) {
				i++ // its value, whatever it looks like
				out = append(out, args[i])
			}
			continue
		}
		if f := fs.Lookup(a[1:2]); f != nil && !isBoolFlag(f) && len(a) > 2 && a[2] != '=' {
			out = append(out, a[:2], a[2:])
			continue
		}
		out = append(out, a)
	}
	return out
}

func (c *cmdFlags) handle(err error) (int, bool) {
	switch {
	case err == nil:
		return exitOK, false
	case errors.Is(err, flag.ErrHelp):
		c.printUsage(c.stdout)
		return exitOK, true
	}
	return c.usageError("%v", err), true
}

// printUsage writes the usage text and the flags with their defaults.
func (c *cmdFlags) printUsage(w io.Writer) {
	fmt.Fprint(w, c.usage)
	c.SetOutput(w)
	c.PrintDefaults()
	c.SetOutput(io.Discard)
}

// usageError prints one sentence saying what is wrong with the command
// line, with the hint where the flags are, and returns exitUsage. The
// message is a sentence without the command's name; a final period is
// optional.
func (c *cmdFlags) usageError(format string, a ...any) int {
	msg := strings.TrimSuffix(strings.TrimSpace(fmt.Sprintf(format, a...)), ".")
	fmt.Fprintf(c.stderr, "wallprof %s: %s; run 'wallprof %s --help' for the flags.\n", c.name, msg, c.name)
	return exitUsage
}

// isSet reports whether the flag name was given on the command line.
func (c *cmdFlags) isSet(name string) bool {
	set := false
	c.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
