package load

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// counters are shared with the progress reporter.
type counters struct {
	began    time.Time
	sent     atomic.Uint64
	done     atomic.Uint64
	errors   atomic.Uint64
	lastSent atomic.Int64 // nanoseconds since began
	stopping atomic.Bool
}

func (c *counters) markSent() {
	c.sent.Add(1)
	c.lastSent.Store(int64(time.Since(c.began)))
}

// refusedStop is how many refused connections, before any answer, stop a
// load early.
const refusedStop = 50

// Run applies the load described by o and returns what it measured. When ctx
// is cancelled it stops sending, lets in-flight requests finish for
// o.Grace, aborts the rest, and returns the partial Result with Interrupted
// set. Errors are only returned for invalid options.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	abort, cancelAbort := context.WithCancel(context.Background())
	defer cancelAbort()
	client := newClient(&o, abort)
	c := &counters{began: time.Now()}
	outcomes := make(chan outcome, 1024)
	finished := make(chan struct{})
	defer close(finished)
	stop := make(chan struct{}) // closed when ctx is cancelled, or nothing listens
	refused := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			c.stopping.Store(true)
		case <-refused:
		case <-finished:
			return
		}
		close(stop)
		select {
		case <-time.After(o.Grace):
			cancelAbort()
		case <-finished:
		}
	}()
	if o.Rate > 0 {
		go runOpen(&o, client, c, stop, outcomes)
	} else {
		go runClosed(&o, client, c, stop, outcomes)
	}
	var progressWG sync.WaitGroup
	received := make(chan struct{})
	if o.Progress != nil {
		progressWG.Add(1)
		go func() { defer progressWG.Done(); reportProgress(&o, c, received) }()
	}
	rec := newRecorder()
	var answered, refusals uint64
	stopped := ""
	for oc := range outcomes {
		rec.add(oc)
		c.done.Add(1)
		if oc.code < 200 || oc.code >= 400 {
			c.errors.Add(1)
		}
		// Nothing listens: every request so far was refused. Stop, rather
		// than send the whole load to a closed port.
		if oc.code != 0 {
			answered++
		} else if answered == 0 && stopped == "" && classify(oc.err, oc.errText) == KindRefused {
			if refusals++; refusals == refusedStop {
				stopped = fmt.Sprintf("the first %d requests were refused: nothing listens at %s", refusedStop, o.Targets[0].URL)
				close(refused)
			}
		}
	}
	wall := time.Since(c.began)
	close(received)
	progressWG.Wait()
	res := rec.result()
	res.Mode, res.Rate, res.Concurrency = o.Mode(), o.Rate, o.Concurrency
	res.Planned = Planned{Duration: o.Duration, Requests: o.Requests}
	for _, t := range o.Targets {
		res.Targets = append(res.Targets, t.String())
	}
	res.Started, res.Wall = c.began, wall
	res.Sending = time.Duration(c.lastSent.Load())
	res.Interrupted = c.stopping.Load()
	res.Stopped = stopped
	if res.Sending > 0 {
		res.SentRate = float64(res.Requests) / res.Sending.Seconds()
	}
	if wall > 0 {
		res.Throughput = float64(res.Successes) / wall.Seconds()
	}
	return res, nil
}

// reportProgress calls o.Progress every interval until finished is closed,
// then once more.
func reportProgress(o *Options, c *counters, finished <-chan struct{}) {
	t := time.NewTicker(o.ProgressInterval)
	defer t.Stop()
	var lastDone uint64
	last := c.began
	snap := func(now time.Time) Progress {
		done := c.done.Load()
		p := Progress{Elapsed: now.Sub(c.began), Duration: o.Duration, Requests: o.Requests,
			Sent: c.sent.Load(), Done: done, Errors: c.errors.Load(), Stopping: c.stopping.Load()}
		if p.Sent > done {
			p.InFlight = p.Sent - done
		}
		if dt := now.Sub(last).Seconds(); dt > 0 {
			p.Rate = float64(done-lastDone) / dt
		}
		lastDone, last = done, now
		return p
	}
	for {
		select {
		case now := <-t.C:
			o.Progress(snap(now))
		case <-finished:
			o.Progress(snap(time.Now()))
			return
		}
	}
}

// newClient returns the HTTP client both models use: vegeta's default
// transport settings (dial timeout, 30s TCP keep-alive, up to 10,000 idle
// connections per host, proxy from the environment), HTTP/1.1, the request
// timeout covering the whole exchange, and every request aborted when abort
// is cancelled.
func newClient(o *Options, abort context.Context) *http.Client {
	dialer := &net.Dialer{Timeout: o.Timeout, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         dialer.DialContext,
		TLSClientConfig:     &tls.Config{},
		MaxIdleConnsPerHost: max(vegeta.DefaultConnections, o.Concurrency),
		DisableKeepAlives:   o.DisableKeepAlive,
	}
	return &http.Client{Timeout: o.Timeout, Transport: &abortable{base: tr, abort: abort}}
}

// abortable ties each request to the abort context as well as its own.
type abortable struct {
	base  http.RoundTripper
	abort context.Context
}

func (a *abortable) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(a.abort, cancel)
	release := func() { stop(); cancel() }
	resp, err := a.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		release()
		return nil, err
	}
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: release}
	return resp, nil
}

type releasingBody struct {
	io.ReadCloser
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}

// runOpen sends at a constant rate with vegeta's attacker until the duration
// or request count is reached or stop is closed, then closes out.
func runOpen(o *Options, client *http.Client, c *counters, stop <-chan struct{}, out chan<- outcome) {
	defer close(out)
	opts := []func(*vegeta.Attacker){vegeta.Client(client)}
	if o.Concurrency > 0 {
		opts = append(opts, vegeta.Workers(uint64(min(o.Concurrency, vegeta.DefaultWorkers))),
			vegeta.MaxWorkers(uint64(o.Concurrency)))
	}
	atk := vegeta.NewAttacker(opts...)
	tgts := make([]vegeta.Target, len(o.Targets))
	for i, t := range o.Targets {
		tgts[i] = t.vegeta()
	}
	static := vegeta.NewStaticTargeter(tgts...)
	targeter := func(t *vegeta.Target) error {
		c.markSent()
		return static(t)
	}
	pacer := vegeta.ConstantPacer{Freq: 1, Per: time.Duration(float64(time.Second) / o.Rate)}
	if o.Rate > 1e9 {
		pacer = vegeta.ConstantPacer{Freq: int(o.Rate), Per: time.Second}
	}
	var paced vegeta.Pacer = pacer
	if o.Requests > 0 {
		paced = countPacer{ConstantPacer: pacer, n: o.Requests}
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-stop:
			atk.Stop()
		case <-done:
		}
	}()
	for r := range atk.Attack(targeter, paced, o.Duration, "") {
		oc := outcome{latency: r.Latency, code: int(r.Code), bytesIn: r.BytesIn, bytesOut: r.BytesOut}
		if r.Code == 0 {
			oc.errText = r.Error
			if oc.errText == "" {
				oc.errText = "no response"
			}
		}
		out <- oc
	}
}

// countPacer is a constant pacer that stops after n hits.
type countPacer struct {
	vegeta.ConstantPacer
	n uint64
}

func (p countPacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if hits >= p.n {
		return 0, true
	}
	return p.ConstantPacer.Pace(elapsed, hits)
}

// runClosed runs o.Concurrency workers, each sending its next request when
// the previous one completes, until the request count or duration is reached
// or stop is closed, then closes out.
func runClosed(o *Options, client *http.Client, c *counters, stop <-chan struct{}, out chan<- outcome) {
	defer close(out)
	var deadline <-chan time.Time
	if o.Duration > 0 {
		t := time.NewTimer(o.Duration)
		defer t.Stop()
		deadline = t.C
	}
	var quit atomic.Bool
	go func() {
		select {
		case <-stop:
		case <-deadline:
		}
		quit.Store(true)
	}()
	var issued atomic.Uint64
	var wg sync.WaitGroup
	for range o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !quit.Load() {
				n := issued.Add(1)
				if o.Requests > 0 && n > o.Requests {
					return
				}
				t := &o.Targets[(n-1)%uint64(len(o.Targets))]
				c.markSent()
				out <- send(client, t)
			}
		}()
	}
	wg.Wait()
}

// send sends one request and reads the whole response.
func send(client *http.Client, t *Target) outcome {
	vt := t.vegeta()
	req, err := vt.Request()
	start := time.Now()
	if err != nil {
		return outcome{err: err, latency: time.Since(start)}
	}
	resp, err := client.Do(req)
	if err != nil {
		return outcome{err: err, latency: time.Since(start)}
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	oc := outcome{latency: time.Since(start), code: resp.StatusCode, bytesIn: uint64(n), bytesOut: uint64(len(t.Body))}
	if err != nil {
		oc.code, oc.err = 0, err
	}
	return oc
}
