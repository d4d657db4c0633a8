package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/wallprof/wallprof/internal/load"
)

func init() {
	commands["load"] = command{order: 80, run: runLoad,
		usage: "  wallprof load [flags] [METHOD] URL        apply HTTP load (constant rate, or fixed concurrency) and report latency\n"}
}

// headerFlags collects repeated -H 'Key: Value' flags.
type headerFlags []string

func (h *headerFlags) String() string     { return strings.Join(*h, ", ") }
func (h *headerFlags) Set(v string) error { *h = append(*h, v); return nil }

type loadFlags struct {
	rate, body, targets string
	concurrency         int
	requests            uint64
	duration, timeout   time.Duration
	headers             headerFlags
	asJSON, noKeepAlive bool
}

// register adds the flags that shape a load (shared by load and run).
func (f *loadFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.rate, "rate", "", "open model: send at this constant rate, e.g. 1000/s, 50/100ms (needs --duration or --requests)")
	fs.IntVar(&f.concurrency, "concurrency", 0, "closed model: this many workers send back to back (default 50 with --requests); with --rate: at most this many in flight")
	fs.IntVar(&f.concurrency, "c", 0, "short for --concurrency")
	fs.Uint64Var(&f.requests, "requests", 0, "stop after this many requests")
	fs.Uint64Var(&f.requests, "n", 0, "short for --requests")
	fs.DurationVar(&f.duration, "duration", 0, "stop sending after this long, e.g. 30s")
	fs.DurationVar(&f.timeout, "timeout", load.DefaultTimeout, "time limit of each request")
	fs.StringVar(&f.body, "body", "", "send the contents of this file as the request body")
	fs.Var(&f.headers, "H", "add a request header 'Key: Value' (repeatable)")
}

func runLoad(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var f loadFlags
	fs := newCmdFlags("load", loadUsage, stdout, stderr)
	f.register(fs.FlagSet)
	fs.StringVar(&f.targets, "targets", "", "read targets from this file, in vegeta's format ('METHOD URL' lines, header lines, '@body-file'), sent in turn")
	fs.BoolVar(&f.asJSON, "json", false, "write the result as JSON (schema "+load.Format+")")
	fs.BoolVar(&f.noKeepAlive, "no-keepalive", false, "open a new connection for every request")
	if code, done := fs.parse(args); done {
		return code
	}
	opts, err := loadOptions(&f, fs.Args())
	if err != nil {
		return fs.usageError("%v.", err)
	}
	if err := opts.Validate(); err != nil {
		return fs.usageError("%s.", strings.TrimPrefix(err.Error(), load.ErrOptions.Error()+": "))
	}
	if lim, err := load.RaiseFileLimit(load.FilesNeeded(opts)); err == nil && !lim.Enough() {
		fmt.Fprintf(stderr, "wallprof load: %s\n", lim.Advice())
	}
	var bar *progressBar
	if isTerminal(stderr) {
		bar = &progressBar{w: stderr}
		opts.Progress = bar.update
	}
	res, err := load.Run(ctx, opts)
	if bar != nil {
		bar.clear()
	}
	if err != nil {
		fmt.Fprintf(stderr, "wallprof load: %v.\n", err)
		return exitError
	}
	if f.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(res)
	} else {
		err = load.WriteText(stdout, res)
	}
	if err != nil {
		fmt.Fprintf(stderr, "wallprof load: write the result: %v.\n", err)
		return exitError
	}
	if res.Requests > 0 && res.Successes == 0 {
		fmt.Fprintln(stderr, "wallprof load: no request succeeded.")
		return exitError
	}
	return exitOK
}

const loadUsage = `Usage: wallprof load [flags] [METHOD] URL
       wallprof load [flags] --targets FILE

Applies HTTP load and reports the achieved rate, the success rate, latency
percentiles (p50, p90, p99, p99.9, max, from an HDR histogram of every
request), status codes and errors by kind.

  wallprof load --rate 1000/s --duration 30s --body req.json POST http://localhost:8080/api
      open model: a constant arrival rate whatever the server does, so slow
      responses show in the latency (no coordinated omission); vegeta's attacker
  wallprof load --concurrency 100 --requests 10000 http://localhost:5000/search?term=x
      closed model, like 'hey -c 100 -n 10000': 100 workers, each sending its
      next request when the previous one completes

Ctrl-C stops the load and still prints the report. A progress line shows on
a terminal. The open-files limit is raised when the load needs it.

Flags:
`

// loadOptions turns the flags and arguments into load options.
func loadOptions(f *loadFlags, args []string) (load.Options, error) {
	o := load.Options{Concurrency: f.concurrency, Requests: f.requests, Duration: f.duration,
		Timeout: f.timeout, DisableKeepAlive: f.noKeepAlive}
	if f.rate != "" {
		r, err := load.ParseRate(f.rate)
		if err != nil {
			return o, err
		}
		o.Rate = r
	} else if o.Concurrency == 0 && o.Requests > 0 {
		o.Concurrency = 50
	}
	if o.Rate == 0 && o.Concurrency == 0 {
		return o, errors.New("give --rate R with --duration D (open model) or --concurrency C with --requests N (closed model)")
	}
	hdr := http.Header{}
	for _, h := range f.headers {
		k, v, ok := strings.Cut(h, ":")
		if !ok || strings.TrimSpace(k) == "" {
			return o, fmt.Errorf("header %q: want 'Key: Value'", h)
		}
		hdr.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	var body []byte
	if f.body != "" {
		b, err := os.ReadFile(f.body)
		if err != nil {
			return o, fmt.Errorf("read the body: %v", err)
		}
		body = b
	}
	if f.targets != "" {
		if len(args) > 0 {
			return o, errors.New("give either --targets FILE or a URL, not both")
		}
		data, err := os.ReadFile(f.targets)
		if err != nil {
			return o, fmt.Errorf("read the targets: %v", err)
		}
		ts, err := load.ParseTargets(data, body, hdr)
		if err != nil {
			return o, fmt.Errorf("%s: %v", f.targets, err)
		}
		o.Targets = ts
		return o, nil
	}
	var t load.Target
	switch len(args) {
	case 1:
		t = load.Target{Method: http.MethodGet, URL: args[0]}
	case 2:
		t = load.Target{Method: strings.ToUpper(args[0]), URL: args[1]}
	default:
		return o, errors.New("give [METHOD] URL, e.g. 'wallprof load --rate 100/s --duration 10s http://localhost:8080/', or --targets FILE")
	}
	if len(body) > 0 && t.Method == http.MethodGet && len(args) == 1 {
		t.Method = http.MethodPost
	}
	t.Header, t.Body = hdr, body
	o.Targets = []load.Target{t}
	return o, nil
}

// progressBar draws one status line on a terminal.
type progressBar struct {
	w io.Writer
}

func (b *progressBar) update(p load.Progress) {
	const width = 24
	frac, left := 0.0, ""
	switch {
	case p.Duration > 0:
		frac = p.Elapsed.Seconds() / p.Duration.Seconds()
		left = fmt.Sprintf("%s left", max(p.Duration-p.Elapsed, 0).Round(100*time.Millisecond))
	}
	if p.Requests > 0 {
		if rf := float64(p.Sent) / float64(p.Requests); rf > frac {
			frac = rf
			left = fmt.Sprintf("%d to send", p.Requests-min(p.Sent, p.Requests))
		}
	}
	frac = min(max(frac, 0), 1)
	filled := int(frac * width)
	state := ""
	if p.Stopping {
		state = "  stopping..."
	}
	fmt.Fprintf(b.w, "\r\033[K[%s%s] %s elapsed, %s  %d requests  %.0f/s  %d in flight  %d errors%s",
		strings.Repeat("=", filled), strings.Repeat(" ", width-filled),
		p.Elapsed.Round(100*time.Millisecond), left, p.Done, p.Rate, p.InFlight, p.Errors, state)
}

func (b *progressBar) clear() { fmt.Fprint(b.w, "\r\033[K") }
