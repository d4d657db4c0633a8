package bench

import (
	"encoding/json"
	"math"

	"golang.org/x/perf/benchmath"
)

// Options are the thresholds of a comparison.
type Options struct {
	Alpha     float64 // significance level of the Mann-Whitney U-test (benchstat's -alpha); 0.05 by default
	Threshold float64 // a regression must change the center by more than this fraction; 0.05 by default
}

func (o Options) withDefaults() Options {
	if o.Alpha == 0 {
		o.Alpha = 0.05
	}
	if o.Threshold == 0 {
		o.Threshold = 0.05
	}
	return o
}

// Summary is the center of a sample and its confidence interval, as
// benchstat computes them (median, 95% CI, no distribution assumed).
type Summary struct {
	Center float64 `json:"center"`
	Lo     float64 `json:"lo"`
	Hi     float64 `json:"hi"`
	N      int     `json:"n"`
}

// MarshalJSON writes Lo and Hi as null when they are infinite: a sample
// too small for a 95% interval (fewer than 6 values) has an unbounded one,
// and JSON has no infinity.
func (s Summary) MarshalJSON() ([]byte, error) {
	bound := func(v float64) *float64 {
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return nil
		}
		return &v
	}
	return json.Marshal(struct {
		Center float64  `json:"center"`
		Lo     *float64 `json:"lo"`
		Hi     *float64 `json:"hi"`
		N      int      `json:"n"`
	}{s.Center, bound(s.Lo), bound(s.Hi), s.N})
}

// Delta is the comparison of one series between a base and a new run.
type Delta struct {
	Series
	Base Summary `json:"base"`
	New  Summary `json:"new"`
	// P is the p-value of the Mann-Whitney U-test (benchstat's).
	P float64 `json:"p"`
	// Change is new/base - 1 of the centers; NaN when the base center is 0.
	Change float64 `json:"change"`
	// Significant is P < Alpha, where benchstat prints a percentage rather than "~".
	Significant bool `json:"significant"`
	// Regression is a significant change in the worse direction larger
	// than the threshold.
	Regression bool     `json:"regression"`
	Warnings   []string `json:"warnings,omitempty"`
}

// Compare compares every series present in both runs.
func Compare(base, head *Run, opt Options) []Delta {
	opt = opt.withDefaults()
	thr := &benchmath.Thresholds{CompareAlpha: opt.Alpha}
	bs, hs := base.Samples(), head.Samples()
	var out []Delta
	for _, s := range SortedSeries(hs) {
		bv, ok := bs[s]
		if !ok {
			continue
		}
		out = append(out, compareSeries(s, bv, hs[s], thr, opt))
	}
	return out
}

func compareSeries(s Series, base, head []float64, thr *benchmath.Thresholds, opt Options) Delta {
	a := benchmath.AssumeNothing
	s1, s2 := benchmath.NewSample(base, thr), benchmath.NewSample(head, thr)
	sum1, sum2 := a.Summary(s1, 0.95), a.Summary(s2, 0.95)
	c := a.Compare(s1, s2)
	d := Delta{Series: s, P: c.P,
		Base: Summary{sum1.Center, sum1.Lo, sum1.Hi, len(base)},
		New:  Summary{sum2.Center, sum2.Lo, sum2.Hi, len(head)},
	}
	switch {
	case sum1.Center == sum2.Center:
		d.Change = 0
	case sum1.Center == 0:
		d.Change = math.NaN()
	default:
		d.Change = sum2.Center/sum1.Center - 1
	}
	// benchstat prints "~" when P > alpha.
	d.Significant = !(c.P > c.Alpha)
	worse := sum2.Center > sum1.Center
	if HigherIsBetter(s.Unit) {
		worse = sum2.Center < sum1.Center
	}
	// From 0 (say, no allocation) to more is a regression of any size.
	d.Regression = d.Significant && worse && (math.IsNaN(d.Change) || math.Abs(d.Change) > opt.Threshold)
	for _, w := range append(append(sum1.Warnings, sum2.Warnings...), c.Warnings...) {
		d.Warnings = append(d.Warnings, w.Error())
	}
	return d
}

// FormatChange is the change as benchstat prints it: "~" when not
// significant, else a signed percentage with two decimals.
func (d Delta) FormatChange() string {
	switch {
	case !d.Significant:
		return "~"
	case d.Change == 0:
		return "0.00%"
	case math.IsNaN(d.Change):
		return "?"
	}
	return formatPct(d.Change)
}

func summarize(v []float64) Summary {
	s := benchmath.AssumeNothing.Summary(benchmath.NewSample(v, &benchmath.DefaultThresholds), 0.95)
	return Summary{s.Center, s.Lo, s.Hi, len(v)}
}
