// Package load applies HTTP load to a server and measures what it gets back.
//
// Two models are offered. The open model (Options.Rate > 0) sends requests at
// a constant arrival rate whatever the server does, with vegeta's attacker
// and constant pacer, so slow responses do not hide latency (no coordinated
// omission). The closed model (Options.Concurrency > 0, Rate == 0) runs a
// fixed number of workers, each sending its next request as soon as the
// previous one completes, like 'hey -c C -n N'. Both models share one HTTP
// client (see newClient) and one recorder: every request's latency goes into
// an HDR histogram, and Run returns a Result that serialises to JSON.
//
// Run never panics and has no package-level state; it stops early, keeping
// what it measured, when its context is cancelled.
package load

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// Target is one request to send. Targets are sent in turn (round robin).
type Target struct {
	Method string      `json:"method"`
	URL    string      `json:"url"`
	Header http.Header `json:"header,omitempty"`
	Body   []byte      `json:"-"`
}

// String returns "METHOD URL".
func (t Target) String() string { return t.Method + " " + t.URL }

// Progress is a snapshot of a running load, passed to Options.Progress.
type Progress struct {
	Elapsed  time.Duration // since the first request
	Duration time.Duration // the planned duration (0: bounded by Requests only)
	Requests uint64        // the planned request count (0: bounded by Duration only)
	Sent     uint64        // requests started
	Done     uint64        // requests completed (with a response or an error)
	Errors   uint64        // completed requests without a 2xx/3xx response
	Rate     float64       // completed requests per second over the last interval
	InFlight uint64        // Sent - Done
	Stopping bool          // the context was cancelled; in-flight requests are finishing
}

// Options describes a load. Exactly one of Rate (open model) and Concurrency
// without Rate (closed model) selects the model; see Validate.
type Options struct {
	Targets []Target

	// Rate is the arrival rate in requests per second (open model).
	Rate float64
	// Concurrency is the number of workers (closed model), or with Rate the
	// most requests in flight at once (0: unbounded).
	Concurrency int
	// Requests bounds the number of requests (0: no bound).
	Requests uint64
	// Duration bounds the time spent sending (0: no bound).
	Duration time.Duration
	// Timeout bounds each request, from connecting to reading the body
	// (default DefaultTimeout).
	Timeout time.Duration
	// KeepAlive reuses connections (default true through DefaultOptions).
	DisableKeepAlive bool
	// Grace is how long in-flight requests may still finish after the context
	// is cancelled (default 1s); then they are aborted and counted as
	// "interrupted".
	Grace time.Duration

	// Progress, when set, is called every ProgressInterval (default 250ms)
	// from a separate goroutine, and once more at the end.
	Progress         func(Progress)
	ProgressInterval time.Duration
}

// Defaults.
const (
	DefaultTimeout = 30 * time.Second
	DefaultGrace   = time.Second
)

// ErrOptions is wrapped by every error that Validate returns.
var ErrOptions = errors.New("invalid load options")

// Mode returns "rate" (open model) or "concurrency" (closed model).
func (o *Options) Mode() string {
	if o.Rate > 0 {
		return "rate"
	}
	return "concurrency"
}

// Validate checks the options and fills in defaults.
func (o *Options) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrOptions, fmt.Sprintf(format, a...))
	}
	switch {
	case len(o.Targets) == 0:
		return bad("no target: give a URL or a targets file")
	case o.Rate < 0 || o.Concurrency < 0 || o.Duration < 0 || o.Timeout < 0:
		return bad("rate, concurrency, duration and timeout cannot be negative")
	case o.Rate == 0 && o.Concurrency == 0:
		return bad("give a rate (open model) or a concurrency (closed model)")
	case o.Duration == 0 && o.Requests == 0:
		return bad("give a duration or a request count, or the load would never end")
	}
	for i, t := range o.Targets {
		if t.Method == "" {
			o.Targets[i].Method = http.MethodGet
		}
		if !strings.HasPrefix(t.URL, "http://") && !strings.HasPrefix(t.URL, "https://") {
			return bad("target %q: the URL must start with http:// or https://", t.URL)
		}
		if _, err := (&vegeta.Target{Method: o.Targets[i].Method, URL: t.URL}).Request(); err != nil {
			return bad("target %q: %v", t.URL, err)
		}
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Grace == 0 {
		o.Grace = DefaultGrace
	}
	if o.ProgressInterval == 0 {
		o.ProgressInterval = 250 * time.Millisecond
	}
	return nil
}

// ParseRate parses a rate: "1000", "1000/s", "50/100ms", "6000/1m".
func ParseRate(s string) (float64, error) {
	num, per, found := strings.Cut(s, "/")
	n, err := strconv.ParseFloat(num, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("rate %q: want a positive number of requests, e.g. 1000/s", s)
	}
	if !found {
		return n, nil
	}
	if per != "" && (per[0] < '0' || per[0] > '9') {
		per = "1" + per
	}
	d, err := time.ParseDuration(per)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("rate %q: want a period such as /s, /100ms or /1m after the slash", s)
	}
	return n / d.Seconds(), nil
}

// ParseTargets reads targets in vegeta's HTTP format: "METHOD URL" lines,
// each followed by optional "Key: Value" header lines and an optional
// "@path" line naming a body file, targets separated by blank lines; lines
// starting with '#' are comments. body and header are the defaults that each
// target's own body and headers override.
func ParseTargets(data []byte, body []byte, header http.Header) ([]Target, error) {
	if header == nil {
		header = http.Header{}
	}
	tr := vegeta.NewHTTPTargeter(bytes.NewReader(data), body, header)
	vts, err := vegeta.ReadAllTargets(tr)
	if err != nil {
		return nil, fmt.Errorf("parse targets: %w", err)
	}
	ts := make([]Target, len(vts))
	for i, v := range vts {
		ts[i] = Target{Method: v.Method, URL: v.URL, Header: v.Header, Body: v.Body}
	}
	return ts, nil
}

func (t Target) vegeta() vegeta.Target {
	return vegeta.Target{Method: t.Method, URL: t.URL, Header: t.Header, Body: t.Body}
}
