package load

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
)

// WriteText writes a human-readable report of r.
func WriteText(w io.Writer, r *Result) error {
	var b strings.Builder
	target := ""
	if len(r.Targets) > 0 {
		target = r.Targets[0]
	}
	if len(r.Targets) > 1 {
		target += fmt.Sprintf(" (and %d more targets, in turn)", len(r.Targets)-1)
	}
	fmt.Fprintf(&b, "target:       %s\n", target)
	fmt.Fprintf(&b, "load:         %s\n", describePlan(r))
	if r.Interrupted {
		fmt.Fprintf(&b, "              interrupted: stopped after %s\n", round(r.Sending))
	}
	if r.Stopped != "" {
		fmt.Fprintf(&b, "              stopped after %s: %s\n", round(r.Sending), r.Stopped)
	}
	fmt.Fprintf(&b, "requests:     %d in %s, sent at %.1f/s\n", r.Requests, round(r.Sending), r.SentRate)
	fmt.Fprintf(&b, "success:      %d (%.2f%%), throughput %.1f/s over %s\n",
		r.Successes, 100*r.SuccessRatio, r.Throughput, round(r.Wall))
	l := r.Latency
	fmt.Fprintf(&b, "latency:      p50 %s  p90 %s  p99 %s  p99.9 %s  max %s  (min %s, mean %s)\n",
		ms(l.P50), ms(l.P90), ms(l.P99), ms(l.P999), ms(l.Max), ms(l.Min), ms(l.Mean))
	fmt.Fprintf(&b, "status codes: %s\n", statusLine(r.StatusCodes))
	if len(r.Errors) == 0 {
		b.WriteString("errors:       none\n")
	}
	for i, e := range r.Errors {
		label := "errors:      "
		if i > 0 {
			label = "             "
		}
		fmt.Fprintf(&b, "%s %d %s (e.g. %q)\n", label, e.Count, e.Kind, e.Example)
	}
	for _, e := range r.Errors {
		if e.Kind == KindTooManyOpen {
			b.WriteString("hint:         raise the open-files limit ('ulimit -n 65536', or run as root) or lower --rate/--concurrency.\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func describePlan(r *Result) string {
	var s string
	if r.Mode == "rate" {
		s = fmt.Sprintf("open model, constant rate %s/s", strconv.FormatFloat(r.Rate, 'f', -1, 64))
		if r.Concurrency > 0 {
			s += fmt.Sprintf(", at most %d in flight", r.Concurrency)
		}
	} else {
		s = fmt.Sprintf("closed model, %d workers back to back", r.Concurrency)
	}
	var bounds []string
	if r.Planned.Requests > 0 {
		bounds = append(bounds, fmt.Sprintf("%d requests", r.Planned.Requests))
	}
	if r.Planned.Duration > 0 {
		bounds = append(bounds, r.Planned.Duration.String())
	}
	return s + ", " + strings.Join(bounds, " or ")
}

func statusLine(codes map[string]int64) string {
	if len(codes) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(codes))
	for k := range codes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, codes[k])
	}
	return strings.Join(parts, ", ")
}

// ms formats a latency in milliseconds with 3 significant digits or more.
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0fms", v)
	case v >= 10:
		return fmt.Sprintf("%.1fms", v)
	case v >= 1:
		return fmt.Sprintf("%.2fms", v)
	}
	return fmt.Sprintf("%.3fms", v)
}

func round(d time.Duration) time.Duration {
	if d < 10*time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(time.Millisecond)
}
