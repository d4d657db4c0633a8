package main

import (
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"strconv"
	"strings"
)

const (
	defaultLimit = 10
	maxLimit     = 100
	maxTerms     = 16
)

// Server serves searches over one Index.
type Server struct {
	ix *Index
}

// Handler returns the server's routes, with net/http/pprof under /debug/pprof/.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /search", s.search)
	mux.HandleFunc("POST /api/v1/evaluate", s.evaluate)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// SearchResult is one document in a /search response.
type SearchResult struct {
	ID      int    `json:"id"`
	Title   string `json:"title"`
	Snippet string `json:"snippet"`
	Score   int    `json:"score"`
}

// SearchResponse is the body of a /search response.
type SearchResponse struct {
	Term    string         `json:"term"`
	Matched int            `json:"matched"`
	Results []SearchResult `json:"results"`
}

func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	term := strings.ToLower(strings.TrimSpace(q.Get("term")))
	if term == "" {
		httpError(w, http.StatusBadRequest, "missing term")
		return
	}
	limit := defaultLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			httpError(w, http.StatusBadRequest, "limit must be a positive integer")
			return
		}
		limit = min(n, maxLimit)
	}
	writeJSON(w, s.doSearch(term, limit))
}

func (s *Server) doSearch(term string, limit int) SearchResponse {
	hits, matched := s.ix.Score([]string{term}, limit)
	resp := SearchResponse{Term: term, Matched: matched, Results: make([]SearchResult, len(hits))}
	for i, h := range hits {
		resp.Results[i] = SearchResult{ID: h.Doc.ID, Title: h.Doc.Title, Snippet: Snippet(h.Doc, h.First), Score: h.Score}
	}
	return resp
}

// EvaluateRequest is the body of a POST /api/v1/evaluate request.
type EvaluateRequest struct {
	Terms []string `json:"terms"`
	Limit int      `json:"limit"`
}

// EvaluateScore is one document in an evaluate response.
type EvaluateScore struct {
	ID    int            `json:"id"`
	Score int            `json:"score"`
	Terms map[string]int `json:"terms"`
}

// EvaluateResponse is the body of an evaluate response.
type EvaluateResponse struct {
	Matched int             `json:"matched"`
	Scores  []EvaluateScore `json:"scores"`
}

func (s *Server) evaluate(w http.ResponseWriter, r *http.Request) {
	var req EvaluateRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	if err := dec.Decode(&req); err != nil {
		httpError(w, http.StatusBadRequest, "bad JSON body: "+err.Error())
		return
	}
	resp, msg := s.doEvaluate(req)
	if msg != "" {
		httpError(w, http.StatusBadRequest, msg)
		return
	}
	writeJSON(w, resp)
}

func (s *Server) doEvaluate(req EvaluateRequest) (EvaluateResponse, string) {
	if len(req.Terms) == 0 || len(req.Terms) > maxTerms {
		return EvaluateResponse{}, "terms must hold 1 to " + strconv.Itoa(maxTerms) + " words"
	}
	terms := make([]string, 0, len(req.Terms))
	for _, t := range req.Terms {
		t = strings.ToLower(strings.TrimSpace(t))
		if t == "" {
			return EvaluateResponse{}, "empty term"
		}
		terms = append(terms, t)
	}
	limit := req.Limit
	switch {
	case limit < 0:
		return EvaluateResponse{}, "limit must not be negative"
	case limit == 0:
		limit = defaultLimit
	}
	limit = min(limit, maxLimit)
	hits, matched := s.ix.Score(terms, limit)
	resp := EvaluateResponse{Matched: matched, Scores: make([]EvaluateScore, len(hits))}
	for i, h := range hits {
		per := make(map[string]int, len(terms))
		for j, t := range terms {
			per[t] += h.Counts[j]
		}
		resp.Scores[i] = EvaluateScore{ID: h.Doc.ID, Score: h.Score, Terms: per}
	}
	return resp, ""
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}
