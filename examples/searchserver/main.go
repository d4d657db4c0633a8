// Command searchserver is a small search service over generated, cached
// documents, with a deliberate allocation hotspot for wallprof to find.
// See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// corpusSeed fixes the generated documents, so runs are comparable.
const corpusSeed = 5

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	fixed := flag.Bool("fixed", false, "lower each document's words once at start instead of on every request")
	ndocs := flag.Int("docs", 2000, "number of documents to generate")
	flag.Parse()
	if *ndocs < 1 {
		log.Fatal("searchserver: --docs must be at least 1")
	}
	log.SetFlags(0)

	srv := &Server{ix: NewIndex(NewCorpus(*ndocs, corpusSeed), *fixed)}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("searchserver: %v", err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	log.Printf("searchserver: listening on http://%s (docs=%d fixed=%t)", ln.Addr(), *ndocs, *fixed)

	select {
	case err := <-errc:
		log.Fatalf("searchserver: %v", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Printf("searchserver: shutdown: %v", err)
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Printf("searchserver: %v", err)
	}
}
