package main

import "strings"

// Index scores cached documents against query terms. With fixed set, every
// document's words are lowered once when the index is built; without it they
// are lowered again on every request, in the innermost loop (see count).
type Index struct {
	docs  []*Doc
	fixed bool
}

// NewIndex builds an index over docs. When fixed is true it also caches each
// document's lowered tokens.
func NewIndex(docs []*Doc, fixed bool) *Index {
	if fixed {
		for _, d := range docs {
			d.titleTokens = tokenize(d.Title)
			d.bodyTokens = tokenize(d.Body)
		}
	}
	return &Index{docs: docs, fixed: fixed}
}

// titleWeight is how much more a match in the title counts than one in the body.
const titleWeight = 3

// tokenize splits s into words, strips their punctuation and lowers them.
func tokenize(s string) []string {
	var toks []string
	for w := range strings.FieldsSeq(s) {
		toks = append(toks, strings.ToLower(trimPunct(w)))
	}
	return toks
}

func trimPunct(w string) string {
	return strings.Trim(w, ".,;:!?()\"'")
}

// count adds to counts[i] the weighted number of times terms[i] (lower case)
// occurs in d, and returns the position in the body of the first occurrence
// of terms[0], or -1.
func (ix *Index) count(d *Doc, terms []string, counts []int) (first int) {
	first = -1
	if ix.fixed {
		for _, tok := range d.titleTokens {
			addMatch(tok, terms, counts, titleWeight)
		}
		for pos, tok := range d.bodyTokens {
			if addMatch(tok, terms, counts, 1) == 0 && first < 0 {
				first = pos
			}
		}
		return first
	}
	for w := range strings.FieldsSeq(d.Title) {
		addMatch(strings.ToLower(trimPunct(w)), terms, counts, titleWeight)
	}
	pos := 0
	for w := range strings.FieldsSeq(d.Body) {
		tok := strings.ToLower(trimPunct(w)) // HOTSPOT: a new string per capitalised word, per document, per request
		if addMatch(tok, terms, counts, 1) == 0 && first < 0 {
			first = pos
		}
		pos++
	}
	return first
}

// addMatch adds weight to the count of every term equal to tok and returns
// the index of the first such term, or -1.
func addMatch(tok string, terms []string, counts []int, weight int) int {
	hit := -1
	for i, t := range terms {
		if tok == t {
			counts[i] += weight
			if hit < 0 {
				hit = i
			}
		}
	}
	return hit
}

// Hit is one scored document.
type Hit struct {
	Doc    *Doc
	Score  int   // weighted matches, all terms together
	Counts []int // weighted matches per term
	First  int   // body position of the first match of terms[0], or -1
}

// Score scores every document against terms and returns the best limit hits
// (score descending, then id ascending) and the number of documents matched.
// Terms must already be lower case.
func (ix *Index) Score(terms []string, limit int) (hits []Hit, matched int) {
	counts := make([]int, len(terms))
	for _, d := range ix.docs {
		clear(counts)
		first := ix.count(d, terms, counts)
		score := 0
		for _, c := range counts {
			score += c
		}
		if score == 0 {
			continue
		}
		matched++
		h := Hit{Doc: d, Score: score, First: first}
		if len(hits) < limit {
			hits = append(hits, h)
		} else if better(h, hits[len(hits)-1]) {
			hits[len(hits)-1] = h
		} else {
			continue
		}
		// Keep hits sorted; limit is small, so an insertion step is enough.
		for i := len(hits) - 1; i > 0 && better(hits[i], hits[i-1]); i-- {
			hits[i], hits[i-1] = hits[i-1], hits[i]
		}
	}
	// Recount per-term matches for the few hits that are returned.
	for i := range hits {
		hits[i].Counts = make([]int, len(terms))
		ix.count(hits[i].Doc, terms, hits[i].Counts)
	}
	return hits, matched
}

func better(a, b Hit) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return a.Doc.ID < b.Doc.ID
}

// snippetWords is how many words of context a snippet shows.
const snippetWords = 16

// Snippet returns about snippetWords words of d's body starting a few words
// before position pos (the start of the body when pos < 0).
func Snippet(d *Doc, pos int) string {
	start := max(pos-4, 0)
	var b strings.Builder
	i, n := 0, 0
	for w := range strings.FieldsSeq(d.Body) {
		if i >= start {
			if n == snippetWords {
				b.WriteString(" …")
				break
			}
			if n > 0 {
				b.WriteByte(' ')
			} else if start > 0 {
				b.WriteString("… ")
			}
			b.WriteString(w)
			n++
		}
		i++
	}
	return b.String()
}
