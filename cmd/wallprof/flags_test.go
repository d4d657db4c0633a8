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
