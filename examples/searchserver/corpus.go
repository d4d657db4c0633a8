package main

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Doc is one cached document. Body keeps the original capitalisation and
// punctuation, as a document store would return it.
type Doc struct {
	ID    int
	Title string
	Body  string

	// Filled only by the fixed index: the title and body split into words,
	// stripped of punctuation and lowered, once, when the index is built.
	titleTokens []string
	bodyTokens  []string
}

// vocabulary is a fixed list of words. The capitalised entries are proper
// nouns; with the capitalised first word of every sentence they make about
// a quarter of the words in a body upper-case.
var vocabulary = strings.Fields(`
the a of and to in is for on with as by at from that this it be are was
server request latency throughput memory heap stack garbage collector pause
allocation profile sample trace goroutine scheduler thread kernel syscall
cache index search query document term score rank result snippet token
network socket connection buffer queue worker pool lock mutex channel timer
disk file page block write read flush sync batch stream pipeline stage
metric counter gauge histogram percentile budget deadline timeout retry
error failure recovery replica shard leader follower consensus log commit
fast slow small large hot cold new old simple careful steady busy idle
measure reduce improve compare explain inspect tune fix ship deploy
topic report table chart graph flame frame function line source binary
Linux Go Kubernetes Postgres Redis Nginx Envoy Prometheus Grafana Docker
Monday Tuesday Berlin Paris Tokyo Alice Bob Carol Dave
`)

// NewCorpus generates n documents deterministically from seed: the same
// arguments always give the same documents.
func NewCorpus(n int, seed uint64) []*Doc {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	docs := make([]*Doc, n)
	for i := range docs {
		docs[i] = &Doc{
			ID:    i + 1,
			Title: genTitle(r),
			Body:  genBody(r, 100+r.IntN(201)),
		}
	}
	return docs
}

func genTitle(r *rand.Rand) string {
	n := 3 + r.IntN(4)
	words := make([]string, n)
	for i := range words {
		words[i] = capitalize(vocabulary[r.IntN(len(vocabulary))])
	}
	return fmt.Sprintf("%s (part %d)", strings.Join(words, " "), 1+r.IntN(9))
}

func genBody(r *rand.Rand, words int) string {
	var b strings.Builder
	sentence := 0 // words left in the current sentence
	for i := range words {
		w := vocabulary[r.IntN(len(vocabulary))]
		if sentence == 0 {
			sentence = 6 + r.IntN(12)
			w = capitalize(w)
		}
		sentence--
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
		switch {
		case sentence == 0 || i == words-1:
			b.WriteByte('.')
		case r.IntN(10) == 0:
			b.WriteByte(',')
		}
	}
	return b.String()
}

func capitalize(w string) string {
	if w == "" || w[0] < 'a' || w[0] > 'z' {
		return w
	}
	return string(w[0]-'a'+'A') + w[1:]
}
