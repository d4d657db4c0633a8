package main

import (
	"flag"
	"io"
	"slices"
	"testing"
)

func TestParseInterspersed(t *testing.T) {
	for _, c := range []struct {
		args     []string
		top      int
		json     bool
		focus    string
		wantArgs []string
	}{
		{[]string{"app.pb.gz"}, 20, false, "", []string{"app.pb.gz"}},
		{[]string{"app.pb.gz", "--top", "30", "--json"}, 30, true, "", []string{"app.pb.gz"}},
		{[]string{"--json", "a", "-focus=x", "b", "-top", "5"}, 5, true, "x", []string{"a", "b"}},
		{[]string{"a", "--", "--top", "7"}, 20, false, "", []string{"a", "--top", "7"}},
		{[]string{"-", "--json"}, 20, true, "", []string{"-"}},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		top := fs.Int("top", 20, "")
		js := fs.Bool("json", false, "")
		focus := fs.String("focus", "", "")
		if err := parseInterspersed(fs, c.args); err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if *top != c.top || *js != c.json || *focus != c.focus || !slices.Equal(fs.Args(), c.wantArgs) {
			t.Errorf("%q: top=%d json=%v focus=%q args=%q; want %d %v %q %q",
				c.args, *top, *js, *focus, fs.Args(), c.top, c.json, c.focus, c.wantArgs)
		}
	}
}

// Values attached to single-letter flags are split as getopt would, and
// nothing else is.
func TestSplitAttached(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.Int("F", 0, "")
	fs.String("p", "", "")
	fs.String("pid", "", "")
	fs.String("o", "", "")
	fs.Bool("q", false, "")
	fs.Bool("g", false, "")
	for _, c := range []struct {
		args   []string
		toArgs bool
		want   []string
	}{
		{[]string{"-F99", "-p1234", "-ofile"}, false, []string{"-F", "99", "-p", "1234", "-o", "file"}},
		{[]string{"-pid", "3", "-p=4", "-F", "-7"}, false, []string{"-pid", "3", "-p=4", "-F", "-7"}},
		{[]string{"-o", "-F99", "-q", "-g"}, false, []string{"-o", "-F99", "-q", "-g"}},
		{[]string{"-o-"}, false, []string{"-o", "-"}},
		{[]string{"-x9", "--F99", "a", "-F1"}, false, []string{"-x9", "--F99", "a", "-F", "1"}},
		{[]string{"-F1", "--", "cmd", "-F2"}, true, []string{"-F", "1", "--", "cmd", "-F2"}},
		{[]string{"-p1", "cmd", "-p2"}, true, []string{"-p", "1", "cmd", "-p2"}},
		{[]string{"-p1,2,3"}, true, []string{"-p", "1,2,3"}},
	} {
		if got := splitAttached(fs, c.args, c.toArgs); !slices.Equal(got, c.want) {
			t.Errorf("splitAttached(%q, %v) = %q, want %q", c.args, c.toArgs, got, c.want)
		}
	}
}
