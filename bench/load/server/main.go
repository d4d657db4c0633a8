// Command server is the target of the load-generator benchmark: a tiny HTTP
// server answering every request with a fixed 64-byte body after an optional
// delay, so the load generators, not the server, are what differs.
package main

import (
	"flag"
	"log"
	"net/http"
	"strings"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18080", "listen address")
	delay := flag.Duration("delay", 0, "sleep this long before answering")
	flag.Parse()
	body := []byte(strings.Repeat("x", 63) + "\n")
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if *delay > 0 {
			time.Sleep(*delay)
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Write(body)
	})
	log.Fatal(http.ListenAndServe(*addr, nil))
}
