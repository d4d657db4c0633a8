package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browser is a headless Chromium tab whose console, uncaught exceptions
// and log entries are collected, so a test can require a page without
// errors.
type browser struct {
	ctx    context.Context
	mu     sync.Mutex
	logged []string
	stop   func()
	done   chan struct{}
}

// newBrowser starts Chromium (or skips, failing under CI=true) with a
// window of the given size; everything ends with the test.
func newBrowser(t *testing.T, width, height int) *browser {
	t.Helper()
	path := chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	opts := []chromedp.ExecAllocatorOption{chromedp.ExecPath(path),
		chromedp.Flag("headless", true), chromedp.Flag("no-sandbox", true), chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(width, height)}
	actx, cancelA := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelA)
	bctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(cancelB)
	b := &browser{ctx: bctx, done: make(chan struct{})}
	cctx, stop := context.WithCancel(bctx)
	b.stop = stop
	msgs := chromedp.Console(cctx)
	go func() {
		defer close(b.done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.logged = append(b.logged, string(m.Type)+": "+m.Text)
			b.mu.Unlock()
		}
	}()
	return b
}

// checkNoErrors logs a probe message, waits until it arrives (so page
// errors cannot go unnoticed), and fails on anything else the page logged.
func (b *browser) checkNoErrors(t *testing.T) {
	t.Helper()
	const probe = "wallprof-browser-test-probe"
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[chromedp.Void](`console.error("`+probe+`")`)); err != nil {
		t.Fatalf("probe: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b.mu.Lock()
		seen := strings.Contains(strings.Join(b.logged, "\n"), probe)
		b.mu.Unlock()
		if seen || time.Now().After(deadline) {
			if !seen {
				t.Error("the console probe never arrived: page errors would go unnoticed")
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.stop()
	<-b.done
	for _, l := range b.logged {
		if !strings.Contains(l, probe) {
			t.Errorf("the page logged %q", l)
		}
	}
}
