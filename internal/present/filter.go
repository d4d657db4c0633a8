package present

import (
	"fmt"
	"regexp"

	"github.com/wallprof/wallprof/internal/profile"
)

// Filter selects samples and frames by regular expression, as pprof's
// -focus, -ignore and -hide options do. A location matches an expression
// when one of its frames' function or file names does, or its mapping's
// file name does; an unanchored match (regexp.MatchString) is enough.
//
//   - Focus keeps only the samples with at least one matching location.
//   - Ignore drops the samples with any matching location; a location that
//     matches both Ignore and Focus counts as ignored.
//   - Hide removes the matching frames from the stacks (the whole location
//     when its mapping's file matches); a sample left with no frames is
//     dropped.
//
// A nil expression does nothing. Exact per-thread totals are measured, not
// sampled, and are not filtered.
type Filter struct {
	Focus, Ignore, Hide *regexp.Regexp
}

// CompileFilter compiles the three expressions; an empty one is unset.
func CompileFilter(focus, ignore, hide string) (Filter, error) {
	var f Filter
	for _, o := range []struct {
		name, expr string
		dst        **regexp.Regexp
	}{{"focus", focus, &f.Focus}, {"ignore", ignore, &f.Ignore}, {"hide", hide, &f.Hide}} {
		if o.expr == "" {
			continue
		}
		re, err := regexp.Compile(o.expr)
		if err != nil {
			return Filter{}, fmt.Errorf("parsing %s regexp: %w", o.name, err)
		}
		*o.dst = re
	}
	return f, nil
}

// IsZero reports whether f filters nothing.
func (f Filter) IsZero() bool { return f.Focus == nil && f.Ignore == nil && f.Hide == nil }

// Apply returns p with f applied, and a warning for each expression that
// matched nothing (as pprof warns). p is not modified: the result shares
// what f leaves unchanged. A zero Filter returns p itself.
func (f Filter) Apply(p *profile.Profile) (*profile.Profile, []string) {
	if f.IsZero() || p == nil {
		return p, nil
	}
	const (
		unmarked = iota
		focused
		ignored
	)
	type locState struct {
		mark   int
		hidden bool
		repl   *profile.Location // the location with hidden frames removed, if any were
	}
	var focusMatched, ignoreMatched, hideMatched bool
	states := map[*profile.Location]*locState{}
	classify := func(l *profile.Location) *locState {
		if st := states[l]; st != nil {
			return st
		}
		st := &locState{}
		switch {
		case f.Ignore != nil && locMatches(l, f.Ignore):
			st.mark, ignoreMatched = ignored, true
		case f.Focus == nil || locMatches(l, f.Focus):
			st.mark, focusMatched = focused, true
		}
		if f.Hide != nil && locMatches(l, f.Hide) {
			hideMatched = true
			kept := unhiddenFrames(l, f.Hide)
			if len(kept) == 0 {
				st.hidden = true
			} else {
				c := *l
				c.Frames = kept
				st.repl = &c
			}
		}
		states[l] = st
		return st
	}
	for _, l := range p.Locs {
		if l != nil {
			classify(l)
		}
	}

	q := *p
	q.Samples = make([]*profile.Sample, 0, len(p.Samples))
	for _, s := range p.Samples {
		keep := false
		for _, l := range s.Stack {
			if l == nil {
				continue
			}
			st := classify(l)
			if st.mark == ignored {
				keep = false
				break
			}
			keep = keep || st.mark == focused
		}
		if !keep {
			continue
		}
		if f.Hide != nil {
			stack := make([]*profile.Location, 0, len(s.Stack))
			for _, l := range s.Stack {
				if l == nil {
					continue
				}
				switch st := states[l]; {
				case st.hidden:
				case st.repl != nil:
					stack = append(stack, st.repl)
				default:
					stack = append(stack, l)
				}
			}
			if len(stack) == 0 {
				continue
			}
			c := *s
			c.Stack = stack
			s = &c
		}
		q.Samples = append(q.Samples, s)
	}
	if f.Hide != nil {
		q.Locs = make([]*profile.Location, 0, len(p.Locs))
		for _, l := range p.Locs {
			st := states[l]
			switch {
			case st == nil:
				q.Locs = append(q.Locs, l)
			case st.hidden:
			case st.repl != nil:
				q.Locs = append(q.Locs, st.repl)
			default:
				q.Locs = append(q.Locs, l)
			}
		}
	}
	var warnings []string
	for _, w := range []struct {
		re      *regexp.Regexp
		matched bool
		name    string
	}{{f.Focus, focusMatched, "focus"}, {f.Ignore, ignoreMatched, "ignore"}, {f.Hide, hideMatched, "hide"}} {
		if w.re != nil && !w.matched {
			warnings = append(warnings, fmt.Sprintf("%s expression %q matched no frames", w.name, w.re.String()))
		}
	}
	return &q, warnings
}

// locMatches reports whether re matches a frame's function or file name, or
// the location's mapping file.
func locMatches(l *profile.Location, re *regexp.Regexp) bool {
	for _, fr := range l.Frames {
		if re.MatchString(fr.Function) || re.MatchString(fr.File) {
			return true
		}
	}
	return l.Mapping != nil && re.MatchString(l.Mapping.File)
}

// unhiddenFrames returns l's frames that re does not match; none when it
// matches the mapping's file.
func unhiddenFrames(l *profile.Location, re *regexp.Regexp) []profile.Frame {
	if l.Mapping != nil && re.MatchString(l.Mapping.File) {
		return nil
	}
	var kept []profile.Frame
	for _, fr := range l.Frames {
		if !re.MatchString(fr.Function) && !re.MatchString(fr.File) {
			kept = append(kept, fr)
		}
	}
	return kept
}
