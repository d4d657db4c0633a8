package load

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// server is a loopback test server that counts requests, connections and
// the most requests in flight at once.
type server struct {
	*httptest.Server
	requests, conns   atomic.Int64
	inFlight, maxSeen atomic.Int64
	handle            func(n int64, w http.ResponseWriter, r *http.Request) // n counts from 1
}

func newServer(t *testing.T, handle func(n int64, w http.ResponseWriter, r *http.Request)) *server {
	t.Helper()
	s := &server{handle: handle}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := s.requests.Add(1)
		cur := s.inFlight.Add(1)
		defer s.inFlight.Add(-1)
		for {
			m := s.maxSeen.Load()
			if cur <= m || s.maxSeen.CompareAndSwap(m, cur) {
				break
			}
		}
		if s.handle != nil {
			s.handle(n, w, r)
		}
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start() // httptest listens on 127.0.0.1
	t.Cleanup(s.Close)
	return s
}

func get(url string) []Target { return []Target{{Method: "GET", URL: url}} }

func mustRun(t *testing.T, ctx context.Context, o Options) *Result {
	t.Helper()
	r, err := Run(ctx, o)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return r
}

func TestRateModeAchievesRate(t *testing.T) {
	s := newServer(t, nil)
	const rate, dur = 200.0, 2 * time.Second
	r := mustRun(t, context.Background(), Options{Targets: get(s.URL), Rate: rate, Duration: dur})
	want := rate * dur.Seconds()
	if got := float64(r.Requests); got < 0.8*want || got > 1.2*want {
		t.Errorf("sent %v requests, want %v ± 20%%", got, want)
	}
	if r.Requests != uint64(s.requests.Load()) || r.Successes != r.Requests {
		t.Errorf("result says %d requests (%d ok), server saw %d", r.Requests, r.Successes, s.requests.Load())
	}
	if r.SentRate < 0.8*rate || r.SentRate > 1.2*rate {
		t.Errorf("sent rate %.1f/s, want %v ± 20%%", r.SentRate, rate)
	}
	if r.Mode != "rate" || r.Interrupted {
		t.Errorf("mode %q interrupted %v", r.Mode, r.Interrupted)
	}
}

func TestRateModeRequestBound(t *testing.T) {
	s := newServer(t, nil)
	r := mustRun(t, context.Background(), Options{Targets: get(s.URL), Rate: 500, Requests: 50})
	if r.Requests != 50 || s.requests.Load() != 50 {
		t.Errorf("result %d requests, server %d; want 50", r.Requests, s.requests.Load())
	}
}

func TestClosedModeExactCountBoundedConcurrency(t *testing.T) {
	s := newServer(t, func(int64, http.ResponseWriter, *http.Request) { time.Sleep(2 * time.Millisecond) })
	const c, n = 8, 400
	r := mustRun(t, context.Background(), Options{Targets: get(s.URL), Concurrency: c, Requests: n})
	if r.Requests != n || s.requests.Load() != n {
		t.Errorf("result %d requests, server saw %d; want exactly %d", r.Requests, s.requests.Load(), n)
	}
	if m := s.maxSeen.Load(); m > c || m < 2 {
		t.Errorf("server saw at most %d in flight, want 2..%d", m, c)
	}
	// Dials racing at the start can open a few more connections than
	// workers; without keep-alive there would be one per request.
	if got := s.conns.Load(); got > 2*c {
		t.Errorf("%d connections for %d workers and %d requests: keep-alive is not reusing them", got, c, n)
	}
	if r.StatusCodes["200"] != n || len(r.Errors) != 0 {
		t.Errorf("status %v errors %v", r.StatusCodes, r.Errors)
	}
}

func TestClosedModeDurationBound(t *testing.T) {
	s := newServer(t, func(int64, http.ResponseWriter, *http.Request) { time.Sleep(5 * time.Millisecond) })
	start := time.Now()
	r := mustRun(t, context.Background(), Options{Targets: get(s.URL), Concurrency: 2, Duration: 300 * time.Millisecond})
	if el := time.Since(start); el > 3*time.Second || r.Requests == 0 {
		t.Errorf("took %v for %d requests, want about 300ms", el, r.Requests)
	}
}

func TestPercentilesFromKnownDelays(t *testing.T) {
	for _, mode := range []string{"concurrency", "rate"} {
		t.Run(mode, func(t *testing.T) {
			s := newServer(t, func(n int64, _ http.ResponseWriter, _ *http.Request) {
				if n%10 == 0 {
					time.Sleep(50 * time.Millisecond)
				}
			})
			o := Options{Targets: get(s.URL), Concurrency: 10, Requests: 300}
			if mode == "rate" {
				o = Options{Targets: get(s.URL), Rate: 300, Requests: 300}
			}
			r := mustRun(t, context.Background(), o)
			l := r.Latency
			if !(l.P50 < 50*time.Millisecond && 50*time.Millisecond <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max) {
				t.Errorf("want p50 < 50ms <= p99 <= p99.9 <= max; got %+v", l)
			}
			if l.Min > l.P50 || l.Mean < l.Min || l.Mean > l.Max {
				t.Errorf("min/mean out of order: %+v", l)
			}
		})
	}
}

func TestStatusCodes(t *testing.T) {
	s := newServer(t, func(n int64, w http.ResponseWriter, _ *http.Request) {
		if n%4 == 0 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	r := mustRun(t, context.Background(), Options{Targets: get(s.URL), Concurrency: 1, Requests: 100})
	if r.StatusCodes["200"] != 75 || r.StatusCodes["500"] != 25 || r.Successes != 75 || r.SuccessRatio != 0.75 {
		t.Errorf("status %v successes %d ratio %v, want 75×200 and 25×500", r.StatusCodes, r.Successes, r.SuccessRatio)
	}
	if len(r.Errors) != 0 {
		t.Errorf("HTTP statuses are not errors: %v", r.Errors)
	}
}

// closedPort returns a loopback URL on which nothing listens.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/"
}

func TestErrorKinds(t *testing.T) {
	slow := newServer(t, func(int64, http.ResponseWriter, *http.Request) { time.Sleep(time.Second) })
	refused := closedPort(t)
	cases := []struct {
		name string
		o    Options
		kind string
	}{
		{"refused/closed", Options{Targets: get(refused), Concurrency: 2, Requests: 6}, KindRefused},
		{"refused/open", Options{Targets: get(refused), Rate: 100, Requests: 6}, KindRefused},
		{"timeout/closed", Options{Targets: get(slow.URL), Concurrency: 2, Requests: 2, Timeout: 100 * time.Millisecond}, KindTimeout},
		{"timeout/open", Options{Targets: get(slow.URL), Rate: 100, Requests: 2, Timeout: 100 * time.Millisecond}, KindTimeout},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := mustRun(t, context.Background(), c.o)
			if len(r.Errors) != 1 || r.Errors[0].Kind != c.kind || r.Errors[0].Count != int64(r.Requests) || r.Successes != 0 {
				t.Fatalf("errors %+v for %d requests, want all %q", r.Errors, r.Requests, c.kind)
			}
			if len(r.StatusCodes) != 0 {
				t.Errorf("status codes %v without a response", r.StatusCodes)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	for msg, want := range map[string]string{
		`Get "http://127.0.0.1:1/": dial tcp 127.0.0.1:1: connect: connection refused`:                           KindRefused,
		`Get "http://x/": dial tcp 127.0.0.1:80: socket: too many open files`:                                    KindTooManyOpen,
		`Get "http://x/": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`:            KindTimeout,
		`Get "http://x/": dial tcp 10.0.0.1:80: i/o timeout`:                                                     KindTimeout,
		`Get "http://x/": read tcp 127.0.0.1:5->127.0.0.1:6: read: connection reset by peer`:                     KindReset,
		`Get "http://x/": context canceled`:                                                                      KindInterrupted,
		`Get "http://nonexistent.invalid/": dial tcp: lookup nonexistent.invalid on 127.0.0.53:53: no such host`: "no such host",
		`Get "http://x/": EOF`: "EOF",
	} {
		if got := classify(nil, msg); got != want {
			t.Errorf("classify(%q) = %q, want %q", msg, got, want)
		}
	}
}

func TestRequestReachesServer(t *testing.T) {
	type seen struct{ method, header, body string }
	for _, mode := range []string{"concurrency", "rate"} {
		t.Run(mode, func(t *testing.T) {
			var mu sync.Mutex
			var got []seen
			s := newServer(t, func(_ int64, _ http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				got = append(got, seen{r.Method, r.Header.Get("X-Test"), string(b)})
				mu.Unlock()
			})
			tg := []Target{{Method: "PUT", URL: s.URL + "/api", Header: http.Header{"X-Test": {"yes"}}, Body: []byte(`{"a":1}`)}}
			o := Options{Targets: tg, Concurrency: 2, Requests: 4}
			if mode == "rate" {
				o = Options{Targets: tg, Rate: 100, Requests: 4}
			}
			r := mustRun(t, context.Background(), o)
			if len(got) != 4 || r.BytesOut != 4*7 {
				t.Fatalf("server saw %d requests (bytes out %d), want 4", len(got), r.BytesOut)
			}
			for _, g := range got {
				if g != (seen{"PUT", "yes", `{"a":1}`}) {
					t.Errorf("server saw %+v", g)
				}
			}
		})
	}
}

func TestTargetsInTurn(t *testing.T) {
	var a, b atomic.Int64
	s := newServer(t, func(_ int64, _ http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/a" {
			a.Add(1)
		} else {
			b.Add(1)
		}
	})
	tg := []Target{{Method: "GET", URL: s.URL + "/a"}, {Method: "GET", URL: s.URL + "/b"}}
	mustRun(t, context.Background(), Options{Targets: tg, Concurrency: 3, Requests: 10})
	if a.Load() != 5 || b.Load() != 5 {
		t.Errorf("/a %d, /b %d; want 5 each", a.Load(), b.Load())
	}
}

func TestParseTargets(t *testing.T) {
	dir := t.TempDir()
	bodyFile := filepath.Join(dir, "body.json")
	if err := os.WriteFile(bodyFile, []byte(`{"q":"x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	data := "# search first\nGET http://127.0.0.1:8080/search?term=a\nX-A: 1\n\nPOST http://127.0.0.1:8080/api\nContent-Type: application/json\n@" + bodyFile + "\n"
	ts, err := ParseTargets([]byte(data), []byte("default"), http.Header{"X-Default": {"d"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 {
		t.Fatalf("got %d targets: %+v", len(ts), ts)
	}
	if ts[0].String() != "GET http://127.0.0.1:8080/search?term=a" || ts[0].Header.Get("X-A") != "1" ||
		ts[0].Header.Get("X-Default") != "d" || string(ts[0].Body) != "default" {
		t.Errorf("first target %+v", ts[0])
	}
	if ts[1].String() != "POST http://127.0.0.1:8080/api" || string(ts[1].Body) != `{"q":"x"}` ||
		ts[1].Header.Get("Content-Type") != "application/json" {
		t.Errorf("second target %+v body %q", ts[1], ts[1].Body)
	}
	for _, bad := range []string{"", "FROB\n", "GET http://x/\nnot a header\n", "GET http://x/\n@/nonexistent/body\n"} {
		if _, err := ParseTargets([]byte(bad), nil, nil); err == nil {
			t.Errorf("ParseTargets(%q) succeeded", bad)
		}
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{"1000": 1000, "1000/s": 1000, "50/100ms": 500, "6000/1m": 100, "60/m": 1, "2.5/s": 2.5} {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-5/s", "0", "10/", "10/x", "10/0s"} {
		if _, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) succeeded", in)
		}
	}
}

func TestValidate(t *testing.T) {
	for name, o := range map[string]Options{
		"no target":  {Rate: 1, Duration: time.Second},
		"no model":   {Targets: get("http://127.0.0.1:1/"), Duration: time.Second},
		"no bound":   {Targets: get("http://127.0.0.1:1/"), Rate: 1},
		"bad scheme": {Targets: get("ftp://127.0.0.1/"), Rate: 1, Duration: time.Second},
		"negative":   {Targets: get("http://127.0.0.1:1/"), Rate: 1, Duration: -time.Second},
		"bad method": {Targets: []Target{{Method: "G T", URL: "http://127.0.0.1:1/"}}, Rate: 1, Duration: time.Second},
	} {
		if _, err := Run(context.Background(), o); !errors.Is(err, ErrOptions) {
			t.Errorf("%s: Run error %v, want ErrOptions", name, err)
		}
	}
}

func TestInterruptKeepsResult(t *testing.T) {
	var hang atomic.Bool
	s := newServer(t, func(int64, http.ResponseWriter, *http.Request) {
		if hang.Load() {
			time.Sleep(3 * time.Second)
		}
	})
	for _, mode := range []string{"concurrency", "rate"} {
		t.Run(mode, func(t *testing.T) {
			hang.Store(false)
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(300*time.Millisecond, func() { hang.Store(true) })
			time.AfterFunc(500*time.Millisecond, cancel)
			o := Options{Targets: get(s.URL), Concurrency: 4, Duration: 20 * time.Second, Grace: 200 * time.Millisecond}
			if mode == "rate" {
				o = Options{Targets: get(s.URL), Rate: 100, Duration: 20 * time.Second, Grace: 200 * time.Millisecond}
			}
			start := time.Now()
			r := mustRun(t, ctx, o)
			if el := time.Since(start); el > 2500*time.Millisecond {
				t.Errorf("took %v to stop", el)
			}
			if !r.Interrupted || r.Successes == 0 {
				t.Errorf("interrupted %v, %d successes; want a partial result", r.Interrupted, r.Successes)
			}
			var aborted int64
			for _, e := range r.Errors {
				if e.Kind == KindInterrupted {
					aborted = e.Count
				}
			}
			if aborted == 0 {
				t.Errorf("no request counted as interrupted: %+v", r.Errors)
			}
		})
	}
}

func TestProgress(t *testing.T) {
	s := newServer(t, nil)
	var mu sync.Mutex
	var ps []Progress
	o := Options{Targets: get(s.URL), Rate: 100, Duration: 300 * time.Millisecond, ProgressInterval: 50 * time.Millisecond,
		Progress: func(p Progress) { mu.Lock(); ps = append(ps, p); mu.Unlock() }}
	r := mustRun(t, context.Background(), o)
	mu.Lock()
	defer mu.Unlock()
	if len(ps) < 2 {
		t.Fatalf("%d progress calls", len(ps))
	}
	if last := ps[len(ps)-1]; last.Done != r.Requests || last.Sent != r.Requests || last.Duration != o.Duration {
		t.Errorf("last progress %+v, result %d requests", last, r.Requests)
	}
}

func TestJSONShape(t *testing.T) {
	s := newServer(t, nil)
	r := mustRun(t, context.Background(), Options{Targets: get(s.URL), Concurrency: 1, Requests: 3})
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"format", "mode", "targets", "planned", "started", "sending_ns", "duration_ns", "interrupted",
		"requests", "successes", "success_ratio", "sent_rate", "throughput", "latency", "status_codes", "errors"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, b)
		}
	}
	lat := m["latency"].(map[string]any)
	for _, k := range []string{"min_ns", "mean_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns"} {
		if v, ok := lat[k].(float64); !ok || v <= 0 {
			t.Errorf("latency.%s = %v", k, lat[k])
		}
	}
	if m["format"] != Format || m["status_codes"].(map[string]any)["200"] != 3.0 {
		t.Errorf("format %v status %v", m["format"], m["status_codes"])
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil || back.Requests != 3 || back.Latency != r.Latency {
		t.Errorf("round trip: %v %+v", err, back)
	}
}

func TestWriteText(t *testing.T) {
	r := &Result{Mode: "rate", Rate: 1000, Targets: []string{"GET http://h/"}, Planned: Planned{Duration: 30 * time.Second},
		Requests: 10, Successes: 9, SuccessRatio: 0.9, StatusCodes: map[string]int64{"200": 9},
		Errors: []ErrorKind{{Kind: KindTooManyOpen, Count: 1, Example: "socket: too many open files"}}}
	var b strings.Builder
	if err := WriteText(&b, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"open model, constant rate 1000/s, 30s", "p99.9", "200: 9", "1 too many open files", "ulimit -n"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}

func TestFileLimit(t *testing.T) {
	l, err := RaiseFileLimit(16) // below any real limit: nothing changes
	if err != nil || !l.Enough() || l.After != l.Before || l.Advice() != "" {
		t.Errorf("RaiseFileLimit(16) = %+v, %v", l, err)
	}
	short := FileLimit{Needed: 100064, Before: 1024, After: 1024, Hard: 4096}
	if a := short.Advice(); !strings.Contains(a, "ulimit -n 100064") || !strings.Contains(a, "root") || strings.Count(a, ". ") != 0 {
		t.Errorf("advice %q", a)
	}
	if n := FilesNeeded(Options{Concurrency: 100}); n != 100+filesSlack {
		t.Errorf("FilesNeeded(closed, 100) = %d", n)
	}
	if n := FilesNeeded(Options{Rate: 5000, Concurrency: 200}); n != 200+filesSlack {
		t.Errorf("FilesNeeded(rate 5000, cap 200) = %d", n)
	}
}
