package runreport

import (
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/google/pprof/profile"

	"github.com/wallprof/wallprof/internal/goruntime/escapes"
)

// Delta returns after minus before for two heap or allocation profiles of
// the same process: what was allocated between them. The inputs are left
// unchanged.
func Delta(before, after *profile.Profile) (*profile.Profile, error) {
	b := before.Copy()
	b.Scale(-1)
	d, err := profile.Merge([]*profile.Profile{after.Copy(), b})
	if err != nil {
		return nil, fmt.Errorf("subtract the allocation profiles: %w", err)
	}
	// Drop the stacks that did not change, as pprof's -base does.
	keep := d.Sample[:0]
	for _, s := range d.Sample {
		for _, v := range s.Value {
			if v != 0 {
				keep = append(keep, s)
				break
			}
		}
	}
	d.Sample = keep
	d.TimeNanos = after.TimeNanos
	if before.TimeNanos > 0 && after.TimeNanos > before.TimeNanos {
		d.DurationNanos = after.TimeNanos - before.TimeNanos
	}
	return d, nil
}

// DropProfiler removes from p the stacks that run through the profile
// endpoint (net/http/pprof, runtime/pprof): the allocations made to serve
// the profiles wallprof fetched, which are not the server's own work. It
// returns the bytes of the sample type named space that it removed.
func DropProfiler(p *profile.Profile, space string) int64 {
	si := -1
	for i, st := range p.SampleType {
		if st.Type == space {
			si = i
		}
	}
	var dropped int64
	keep := p.Sample[:0]
	for _, s := range p.Sample {
		if fromProfiler(s) {
			if si >= 0 {
				dropped += s.Value[si]
			}
			continue
		}
		keep = append(keep, s)
	}
	p.Sample = keep
	return dropped
}

func fromProfiler(s *profile.Sample) bool {
	for _, loc := range s.Location {
		for _, ln := range loc.Line {
			if ln.Function != nil && (strings.HasPrefix(ln.Function.Name, "net/http/pprof.") || strings.HasPrefix(ln.Function.Name, "runtime/pprof.")) {
				return true
			}
		}
	}
	return false
}

// Totals returns the sums of the sample types named space and objects
// (for example alloc_space and alloc_objects); a missing type sums to 0.
func Totals(p *profile.Profile, space, objects string) (bytes, count int64) {
	bi, oi := -1, -1
	for i, st := range p.SampleType {
		switch st.Type {
		case space:
			bi = i
		case objects:
			oi = i
		}
	}
	for _, s := range p.Sample {
		if bi >= 0 {
			bytes += s.Value[bi]
		}
		if oi >= 0 {
			count += s.Value[oi]
		}
	}
	return bytes, count
}

// HeapSnapshot is one heap profile fetched during the run.
type HeapSnapshot struct {
	At      time.Duration // offset from the server's start
	Profile *profile.Profile
}

// Site names the allocation site of a stack as "function (file.go:line)":
// the first frame, from the leaf, in package main or in a module outside
// the standard library; without one, the first frame outside the runtime.
func Site(s *profile.Sample) string {
	first := ""
	for _, loc := range s.Location {
		for _, ln := range loc.Line { // innermost inlined frame first
			if ln.Function == nil {
				continue
			}
			name := ln.Function.Name
			if strings.HasPrefix(name, "runtime.") || strings.HasPrefix(name, "internal/runtime/") {
				continue
			}
			at := fmt.Sprintf("%s (%s:%d)", name, path.Base(ln.Function.Filename), ln.Line)
			if !escapes.IsStdFunc(name) {
				return at
			}
			if first == "" {
				first = at
			}
		}
	}
	if first != "" {
		return first
	}
	if len(s.Location) > 0 && len(s.Location[0].Line) > 0 && s.Location[0].Line[0].Function != nil {
		return s.Location[0].Line[0].Function.Name
	}
	return "unknown"
}

// Other names the series that sums the sites not shown on their own.
const Other = "other sites"

// BuildHeapSeries turns heap profiles into the bytes in use over time by
// allocation site, keeping the top sites (by their largest size at any
// time) and summing the rest in Other.
func BuildHeapSeries(snaps []HeapSnapshot, top int, failed int) *HeapSeries {
	per := make([]map[string]int64, len(snaps))
	peak := map[string]int64{}
	for i, sn := range snaps {
		m := map[string]int64{}
		idx := -1
		for j, st := range sn.Profile.SampleType {
			if st.Type == "inuse_space" {
				idx = j
			}
		}
		if idx >= 0 {
			for _, s := range sn.Profile.Sample {
				if fromProfiler(s) {
					continue
				}
				m[Site(s)] += s.Value[idx]
			}
		}
		for k, v := range m {
			peak[k] = max(peak[k], v)
		}
		per[i] = m
	}
	sites := make([]string, 0, len(peak))
	for k := range peak {
		sites = append(sites, k)
	}
	sort.Slice(sites, func(i, j int) bool {
		if peak[sites[i]] != peak[sites[j]] {
			return peak[sites[i]] > peak[sites[j]]
		}
		return sites[i] < sites[j]
	})
	rest := false
	if len(sites) > top {
		sites, rest = sites[:top], true
	}
	h := &HeapSeries{Sites: append([]string(nil), sites...), Failed: failed}
	if rest {
		h.Sites = append(h.Sites, Other)
	}
	shown := map[string]int{}
	for j, s := range sites {
		shown[s] = j
	}
	for i, sn := range snaps {
		row := make([]int64, len(h.Sites))
		for k, v := range per[i] {
			if j, ok := shown[k]; ok {
				row[j] += v
			} else {
				row[len(row)-1] += v
			}
		}
		h.At = append(h.At, sn.At)
		h.Bytes = append(h.Bytes, row)
	}
	return h
}
