package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

const testDocs = 500

func newServers() (slow, fast *Server) {
	return &Server{ix: NewIndex(NewCorpus(testDocs, corpusSeed), false)},
		&Server{ix: NewIndex(NewCorpus(testDocs, corpusSeed), true)}
}

func TestCorpusDeterministic(t *testing.T) {
	a, b := NewCorpus(50, corpusSeed), NewCorpus(50, corpusSeed)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed gave different corpora")
	}
	for _, d := range a {
		if n := len(strings.Fields(d.Body)); n < 100 || n > 300 {
			t.Fatalf("doc %d has %d words, want 100..300", d.ID, n)
		}
	}
}

func TestFixedGivesSameResults(t *testing.T) {
	slow, fast := newServers()
	for _, term := range []string{"topic", "Linux", "the", "heap", "go", "nosuchword"} {
		for _, limit := range []int{1, 10, 100} {
			term := strings.ToLower(term)
			a, b := slow.doSearch(term, limit), fast.doSearch(term, limit)
			if !reflect.DeepEqual(a, b) {
				t.Errorf("search %q limit %d: unfixed and fixed differ:\n%+v\n%+v", term, limit, a, b)
			}
			if term != "nosuchword" && len(a.Results) == 0 {
				t.Errorf("search %q: no results", term)
			}
		}
	}
	for _, terms := range [][]string{{"topic"}, {"Go", "kubernetes", "latency"}, {"the", "a", "The"}} {
		req := EvaluateRequest{Terms: terms, Limit: 20}
		a, _ := slow.doEvaluate(req)
		b, _ := fast.doEvaluate(req)
		if !reflect.DeepEqual(a, b) {
			t.Errorf("evaluate %q: unfixed and fixed differ:\n%+v\n%+v", terms, a, b)
		}
		if len(a.Scores) == 0 {
			t.Errorf("evaluate %q: no scores", terms)
		}
	}
}

func TestCaseInsensitive(t *testing.T) {
	_, fast := newServers()
	h := fast.Handler()
	var lower, upper SearchResponse
	getJSON(t, h, "/search?term=linux", &lower)
	getJSON(t, h, "/search?term=LINUX", &upper)
	if lower.Matched == 0 || !reflect.DeepEqual(lower, upper) {
		t.Fatalf("linux and LINUX differ or match nothing: %d vs %d", lower.Matched, upper.Matched)
	}
}

// TestFixAllocations checks the point of the example: the unfixed handler
// allocates in its inner loop, the fixed one does not.
func TestFixAllocations(t *testing.T) {
	slow, fast := newServers()
	run := func(s *Server) float64 {
		h := s.Handler()
		return testing.AllocsPerRun(20, func() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/search?term=topic&limit=10", nil))
			if w.Code != http.StatusOK {
				t.Fatalf("status %d", w.Code)
			}
		})
	}
	before, after := run(slow), run(fast)
	t.Logf("allocations per /search request over %d docs: unfixed %.0f, fixed %.0f (%.0fx fewer)",
		testDocs, before, after, before/after)
	if after*5 > before {
		t.Errorf("fixed handler allocates %.0f objects per request, unfixed %.0f: want at least 5x fewer", after, before)
	}
}

func TestEndToEnd(t *testing.T) {
	for _, fixed := range []bool{false, true} {
		s := &Server{ix: NewIndex(NewCorpus(testDocs, corpusSeed), fixed)}
		ts := httptest.NewServer(s.Handler())

		resp, err := http.Get(ts.URL + "/healthz")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("healthz: %v %v", err, resp)
		}
		resp.Body.Close()

		var sr SearchResponse
		resp, err = http.Get(ts.URL + "/search?term=Topic&limit=3")
		if err != nil {
			t.Fatal(err)
		}
		decode(t, resp, http.StatusOK, &sr)
		if sr.Term != "topic" || len(sr.Results) != 3 || sr.Matched < 3 {
			t.Fatalf("fixed=%t search: %+v", fixed, sr)
		}
		for i, r := range sr.Results {
			if r.ID == 0 || r.Title == "" || r.Score <= 0 || r.Snippet == "" {
				t.Errorf("fixed=%t result %d incomplete: %+v", fixed, i, r)
			}
			if i > 0 && r.Score > sr.Results[i-1].Score {
				t.Errorf("fixed=%t results not ordered by score", fixed)
			}
		}
		if !strings.Contains(strings.ToLower(sr.Results[0].Snippet+sr.Results[0].Title), "topic") {
			t.Errorf("fixed=%t top result shows no match: %+v", fixed, sr.Results[0])
		}

		var er EvaluateResponse
		resp, err = http.Post(ts.URL+"/api/v1/evaluate", "application/json",
			strings.NewReader(`{"terms": ["latency", "Heap"], "limit": 5}`))
		if err != nil {
			t.Fatal(err)
		}
		decode(t, resp, http.StatusOK, &er)
		if len(er.Scores) != 5 || er.Matched < 5 {
			t.Fatalf("fixed=%t evaluate: %+v", fixed, er)
		}
		for _, sc := range er.Scores {
			if sc.Score != sc.Terms["latency"]+sc.Terms["heap"] {
				t.Errorf("fixed=%t evaluate score %d != sum of %v", fixed, sc.Score, sc.Terms)
			}
		}

		for _, bad := range []string{`{"terms": []}`, `not json`, `{"terms": ["x"], "limit": -1}`} {
			resp, err = http.Post(ts.URL+"/api/v1/evaluate", "application/json", strings.NewReader(bad))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("evaluate %s: status %d, want 400", bad, resp.StatusCode)
			}
		}
		resp, err = http.Get(ts.URL + "/search")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("search without term: status %d, want 400", resp.StatusCode)
		}

		resp, err = http.Get(ts.URL + "/debug/pprof/allocs?debug=1")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("pprof allocs: %v %v", err, resp)
		}
		resp.Body.Close()
		ts.Close()
	}
}

func getJSON(t *testing.T, h http.Handler, url string, v any) {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", url, nil))
	decode(t, w.Result(), http.StatusOK, v)
}

func decode(t *testing.T, resp *http.Response, code int, v any) {
	t.Helper()
	defer resp.Body.Close()
	if resp.StatusCode != code {
		t.Fatalf("status %d, want %d", resp.StatusCode, code)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkSearch measures one /search request over the default 2,000
// documents, before and after the fix: go test -bench . -benchmem
func BenchmarkSearch(b *testing.B) {
	for _, fixed := range []bool{false, true} {
		name := map[bool]string{false: "unfixed", true: "fixed"}[fixed]
		b.Run(name, func(b *testing.B) {
			h := (&Server{ix: NewIndex(NewCorpus(2000, corpusSeed), fixed)}).Handler()
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, httptest.NewRequest("GET", "/search?term=topic", nil))
			}
		})
	}
}
