package exectrace

import (
	"bytes"
	"errors"
	"runtime"
	rtrace "runtime/trace"
	"testing"
	"time"
)

// TestReasonTable checks the interning of wait reasons: "" (waiting since
// before the trace) is reason 0 in category "unknown", the same reason is
// the same index whether the string is the parser's or a copy, and each
// reason has its category.
func TestReasonTable(t *testing.T) {
	rs := newReasonTable()
	if rs.names[0] != "" || rs.cats[rs.cat[0]] != "unknown" {
		t.Fatalf("reason 0 is %q in %q, want \"\" in unknown", rs.names[0], rs.cats[rs.cat[0]])
	}
	if id := rs.id(""); id != 0 {
		t.Fatalf(`id("") = %d, want 0`, id)
	}
	for _, r := range []string{"sleep", "chan receive", "sleep", "chan send", "select"} {
		id := rs.id(r)
		if rs.names[id] != r || rs.id(string([]byte(r))) != id {
			t.Fatalf("id(%q) = %d, which names %q", r, id, rs.names[id])
		}
		if got, want := rs.cats[rs.cat[id]], blockCategory(r); got != want {
			t.Errorf("category of %q = %q, want %q", r, got, want)
		}
	}
	if rs.cats[rs.syscallC] != "syscall" {
		t.Errorf("syscall category is %q", rs.cats[rs.syscallC])
	}
}

// pingPongTrace records a trace of two goroutines passing a value n times
// (about 4 events per pass).
func pingPongTrace(t *testing.T, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := rtrace.Start(&buf); err != nil {
		t.Skipf("tracing: %v", err)
	}
	ping, pong := make(chan int), make(chan int)
	go func() {
		for v := range ping {
			pong <- v
		}
		close(pong)
	}()
	for i := 0; i < n; i++ {
		ping <- i
		<-pong
	}
	close(ping)
	<-pong
	rtrace.Stop()
	return buf.Bytes()
}

// TestTraceStop checks that Options.Stop ends the reading, with its error,
// and that the parsing goroutine goes away.
func TestTraceStop(t *testing.T) {
	data := pingPongTrace(t, 50000)
	before := runtime.NumGoroutine()
	stop := errors.New("stop")
	calls := 0
	_, err := Analyze(bytes.NewReader(data), Options{Stop: func() error { calls++; return stop }})
	if calls == 0 {
		t.Skip("the trace was too small to be stopped")
	}
	if !errors.Is(err, stop) {
		t.Fatalf("err = %v, want the Stop error", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after a stopped analysis, %d before", n, before)
	}
	s, err := Analyze(bytes.NewReader(data), Options{})
	if err != nil || s.Events < 1<<16 {
		t.Fatalf("events %v, err %v", s, err)
	}
}
