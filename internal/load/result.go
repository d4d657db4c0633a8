package load

import (
	"context"
	"errors"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Format is the schema name of Result's JSON form.
const Format = "wallprof.load/v1"

// Result is what a load measured. It serialises to JSON (schema Format);
// durations are in nanoseconds.
type Result struct {
	Format      string        `json:"format"`
	Mode        string        `json:"mode"` // "rate" or "concurrency"
	Targets     []string      `json:"targets"`
	Rate        float64       `json:"rate,omitempty"`        // requested arrival rate, per second
	Concurrency int           `json:"concurrency,omitempty"` // workers, or the in-flight cap with Rate
	Planned     Planned       `json:"planned"`
	Started     time.Time     `json:"started"`
	Sending     time.Duration `json:"sending_ns"`  // first request sent to last request sent
	Wall        time.Duration `json:"duration_ns"` // first request sent to last response
	Interrupted bool          `json:"interrupted"` // stopped early by the caller (Ctrl-C)
	// Stopped says why the load stopped early by itself (nothing listens).
	Stopped string `json:"stopped,omitempty"`

	Requests     uint64  `json:"requests"`      // completed, including errors
	Successes    uint64  `json:"successes"`     // 2xx and 3xx responses
	SuccessRatio float64 `json:"success_ratio"` // Successes / Requests
	SentRate     float64 `json:"sent_rate"`     // Requests / Sending: the achieved arrival rate
	Throughput   float64 `json:"throughput"`    // Successes / Wall
	BytesIn      uint64  `json:"bytes_in"`
	BytesOut     uint64  `json:"bytes_out"`

	Latency     Latency          `json:"latency"`
	StatusCodes map[string]int64 `json:"status_codes"` // by HTTP status code; requests without a response are in Errors
	Errors      []ErrorKind      `json:"errors"`       // requests without a response, by kind, most frequent first
}

// Planned is the requested bound of the load.
type Planned struct {
	Duration time.Duration `json:"duration_ns,omitempty"`
	Requests uint64        `json:"requests,omitempty"`
}

// Latency summarises every completed request's latency (including errors),
// from an HDR histogram with 3 significant digits and microsecond resolution;
// Min, Max and Mean are exact.
type Latency struct {
	Min  time.Duration `json:"min_ns"`
	Mean time.Duration `json:"mean_ns"`
	P50  time.Duration `json:"p50_ns"`
	P90  time.Duration `json:"p90_ns"`
	P99  time.Duration `json:"p99_ns"`
	P999 time.Duration `json:"p999_ns"`
	Max  time.Duration `json:"max_ns"`
}

// ErrorKind counts the requests that failed in one way.
type ErrorKind struct {
	Kind    string `json:"kind"`
	Count   int64  `json:"count"`
	Example string `json:"example"` // one full error message
}

// Error kinds with their own name; other errors are grouped by a short
// message (the innermost part of the error text).
const (
	KindRefused     = "connection refused"
	KindTimeout     = "timeout"
	KindTooManyOpen = "too many open files"
	KindReset       = "connection reset"
	KindInterrupted = "interrupted"
)

// outcome is one completed request.
type outcome struct {
	latency  time.Duration
	code     int    // 0: no response
	err      error  // closed model
	errText  string // open model (vegeta gives text only)
	bytesIn  uint64
	bytesOut uint64
}

// recorder accumulates outcomes; it is used from one goroutine.
type recorder struct {
	hist      *hdrhistogram.Histogram
	min, max  time.Duration
	sum       time.Duration
	n, ok     uint64
	bytesIn   uint64
	bytesOut  uint64
	codes     map[int]int64
	errs      map[string]*ErrorKind
	histLimit time.Duration
}

func newRecorder() *recorder {
	const limit = time.Hour
	return &recorder{
		hist:      hdrhistogram.New(1, limit.Microseconds(), 3),
		codes:     map[int]int64{},
		errs:      map[string]*ErrorKind{},
		histLimit: limit,
	}
}

func (r *recorder) add(o outcome) {
	if r.n == 0 || o.latency < r.min {
		r.min = o.latency
	}
	r.max = max(r.max, o.latency)
	r.sum += o.latency
	r.n++
	us := max(o.latency.Microseconds(), 1)
	_ = r.hist.RecordValue(min(us, r.histLimit.Microseconds())) // in range by construction
	r.bytesIn += o.bytesIn
	r.bytesOut += o.bytesOut
	if o.code != 0 {
		r.codes[o.code]++
		if o.code >= 200 && o.code < 400 {
			r.ok++
		}
		return
	}
	msg := o.errText
	if o.err != nil {
		msg = o.err.Error()
	}
	kind := classify(o.err, msg)
	e := r.errs[kind]
	if e == nil {
		e = &ErrorKind{Kind: kind, Example: msg}
		r.errs[kind] = e
	}
	e.Count++
}

// classify names the kind of a request error. err may be nil when only the
// text is known.
func classify(err error, msg string) string {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(msg, "connection refused"):
		return KindRefused
	case errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || strings.Contains(msg, "too many open files"):
		return KindTooManyOpen
	case errors.Is(err, context.Canceled) || strings.Contains(msg, context.Canceled.Error()):
		return KindInterrupted
	case errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) ||
		strings.Contains(msg, "Client.Timeout") || strings.Contains(msg, "timeout") ||
		strings.Contains(msg, "deadline exceeded"):
		return KindTimeout
	case errors.Is(err, syscall.ECONNRESET) || strings.Contains(msg, "connection reset"):
		return KindReset
	}
	return shortMessage(msg)
}

// shortMessage keeps the innermost part of a wrapped error message:
// `Get "http://x/": dial tcp: lookup x: no such host` → "no such host".
func shortMessage(msg string) string {
	if i := strings.LastIndex(msg, ": "); i >= 0 && i+2 < len(msg) {
		msg = msg[i+2:]
	}
	if msg == "" {
		return "unknown error"
	}
	return msg
}

// result builds the Result; the caller fills in the plan and times.
func (r *recorder) result() *Result {
	res := &Result{Format: Format, Requests: r.n, Successes: r.ok, BytesIn: r.bytesIn, BytesOut: r.bytesOut,
		StatusCodes: map[string]int64{}, Errors: []ErrorKind{}}
	for c, n := range r.codes {
		res.StatusCodes[strconv.Itoa(c)] = n
	}
	for _, e := range r.errs {
		res.Errors = append(res.Errors, *e)
	}
	sort.Slice(res.Errors, func(i, j int) bool {
		a, b := res.Errors[i], res.Errors[j]
		return a.Count > b.Count || a.Count == b.Count && a.Kind < b.Kind
	})
	if r.n > 0 {
		res.SuccessRatio = float64(r.ok) / float64(r.n)
		q := func(p float64) time.Duration {
			v := time.Duration(r.hist.ValueAtQuantile(p)) * time.Microsecond
			return min(max(v, r.min), r.max) // the bucket's upper bound can pass the exact extremes
		}
		res.Latency = Latency{Min: r.min, Max: r.max, Mean: r.sum / time.Duration(r.n),
			P50: q(50), P90: q(90), P99: q(99), P999: q(99.9)}
	}
	return res
}
