package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/wallprof/wallprof/internal/profile"
)

// tagFilter keeps or drops samples by their labels, as pprof's -tagfocus
// and -tagignore do: 'key=value' matches a label (value a regexp for a
// string label: state=runnable, thread=worker; a number or a range lo:hi
// for a numeric one: tid=1234, pid=100:200; several values separated by
// commas match any of them), and a bare regexp matches any string label's
// value. The labels are those of the pprof file: pid, tid, thread, state
// and the samples' own (goroutine labels), and for the goroutine view
// pid, goid, gstate, wait_reason and the goroutine's labels.
type tagFilter struct {
	key     string
	res     []*regexp.Regexp // string values
	numeric [][2]int64       // numeric ranges, inclusive
	nums    bool             // the values all read as numbers or ranges
}

// parseTagFilter reads one -tagfocus or -tagignore value.
func parseTagFilter(s string) (*tagFilter, error) {
	f := &tagFilter{}
	vals := s
	if k, v, ok := strings.Cut(s, "="); ok {
		f.key, vals = k, v
	}
	f.nums = f.key != ""
	for _, v := range strings.Split(vals, ",") {
		re, err := regexp.Compile(v)
		if err != nil {
			return nil, fmt.Errorf("%q is not a valid regular expression: %v", v, err)
		}
		f.res = append(f.res, re)
		if r, ok := parseRange(v); ok {
			f.numeric = append(f.numeric, r)
		} else {
			f.nums = false
		}
	}
	return f, nil
}

// parseRange reads N, N:M, N: or :M.
func parseRange(v string) ([2]int64, bool) {
	lo, hi, isRange := strings.Cut(v, ":")
	if !isRange {
		n, err := strconv.ParseInt(v, 10, 64)
		return [2]int64{n, n}, err == nil
	}
	r := [2]int64{-1 << 63, 1<<63 - 1}
	var err error
	if lo != "" {
		if r[0], err = strconv.ParseInt(lo, 10, 64); err != nil {
			return r, false
		}
	}
	if hi != "" {
		if r[1], err = strconv.ParseInt(hi, 10, 64); err != nil {
			return r, false
		}
	}
	return r, lo != "" || hi != ""
}

// match reports whether labels (strings) and numeric labels match.
func (f *tagFilter) match(labels map[string]string, nums map[string]int64) bool {
	if f.key == "" {
		for _, v := range labels {
			if f.matchString(v) {
				return true
			}
		}
		return false
	}
	if n, ok := nums[f.key]; ok && f.nums {
		for _, r := range f.numeric {
			if n >= r[0] && n <= r[1] {
				return true
			}
		}
		return false
	}
	if n, ok := nums[f.key]; ok {
		return f.matchString(strconv.FormatInt(n, 10))
	}
	v, ok := labels[f.key]
	return ok && f.matchString(v)
}

func (f *tagFilter) matchString(v string) bool {
	for _, re := range f.res {
		if re.MatchString(v) {
			return true
		}
	}
	return false
}

// filterByTags keeps the samples (and goroutine samples) that focus
// matches, if given, and ignore does not.
func filterByTags(p *profile.Profile, focus, ignore *tagFilter) {
	keep := func(labels map[string]string, nums map[string]int64) bool {
		return (focus == nil || focus.match(labels, nums)) && (ignore == nil || !ignore.match(labels, nums))
	}
	samples := p.Samples[:0]
	for _, s := range p.Samples {
		labels := map[string]string{"thread": s.Thread, "state": s.State.String()}
		for k, v := range s.Labels {
			labels[k] = v
		}
		if keep(labels, map[string]int64{"pid": int64(s.PID), "tid": int64(s.TID)}) {
			samples = append(samples, s)
		}
	}
	p.Samples = samples
	gs := p.Goroutines[:0]
	for _, g := range p.Goroutines {
		labels := map[string]string{"gstate": g.State.String()}
		if g.WaitReason != "" {
			labels["wait_reason"] = g.WaitReason
		}
		for k, v := range g.Labels {
			labels[k] = v
		}
		if keep(labels, map[string]int64{"pid": int64(g.PID), "goid": int64(g.GoID)}) {
			gs = append(gs, g)
		}
	}
	p.Goroutines = gs
}
