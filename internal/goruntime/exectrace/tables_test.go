package exectrace

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	rtrace "runtime/trace"
	"testing"
	"time"
	"unsafe"
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

// TestGenSplitter reads a made-up Go 1.26 trace of two generations
// through genSplitter the way the parser does (golang.org/x/exp/trace's
// readBatch: a byte and four uvarints, then io.CopyN into a bytes.Buffer
// grown to the batch's size), and checks that each generation ends with
// io.EOF, that the data is intact, and that a batch longer than the
// parser's buffer is not copied into a buffer twice its size.
func TestGenSplitter(t *testing.T) {
	header := []byte("go 1.26 trace\x00\x00\x00")
	var in bytes.Buffer
	in.Write(header)
	payload := func(gen, size int) []byte {
		b := make([]byte, size)
		for i := range b {
			b[i] = byte(gen*7 + i)
		}
		return b
	}
	sizes := [][]int{{10000, 100, 65000}, {5000}}
	for g, batches := range sizes {
		for _, size := range batches {
			in.WriteByte(evEventBatch)
			for _, v := range []uint64{uint64(g + 1), 3, 12345, uint64(size)} {
				in.Write(binary.AppendUvarint(nil, v))
			}
			in.Write(payload(g+1, size))
		}
		in.WriteByte(evEndOfGeneration)
	}
	ge, err := newGenEvents(bufio.NewReaderSize(&in, 1<<16), 26)
	if err != nil {
		t.Fatal(err)
	}
	_ = ge.tr // the first generation's Reader has not read anything yet
	for g, batches := range sizes {
		s := ge.s
		s.gen, s.end = 0, false
		s.pre, s.bufLo, s.bufHi = ge.header, 0, 0
		pbr := bufio.NewReaderSize(s, 4096)
		h, err := pbr.Peek(16)
		if err != nil || !bytes.Equal(h, header) {
			t.Fatalf("generation %d: header %q, %v", g+1, h, err)
		}
		s.bufLo = uintptr(unsafe.Pointer(unsafe.SliceData(h)))
		s.bufHi = s.bufLo + uintptr(cap(h))
		pbr.Discard(16)
		for _, size := range batches {
			if b, err := pbr.ReadByte(); err != nil || b != evEventBatch {
				t.Fatalf("generation %d: batch byte %d, %v", g+1, b, err)
			}
			var v [4]uint64
			for i := range v {
				if v[i], err = binary.ReadUvarint(pbr); err != nil {
					t.Fatal(err)
				}
			}
			if v[0] != uint64(g+1) || v[3] != uint64(size) {
				t.Fatalf("generation %d: batch header %v", g+1, v)
			}
			var data bytes.Buffer
			data.Grow(size)
			if n, err := io.CopyN(&data, pbr, int64(size)); n != int64(size) || err != nil {
				t.Fatalf("generation %d: copied %d of %d bytes, %v", g+1, n, size, err)
			}
			if !bytes.Equal(data.Bytes(), payload(g+1, size)) {
				t.Fatalf("generation %d: a batch of %d bytes came out different", g+1, size)
			}
			if size > 4096 && data.Cap() > size*3/2 {
				t.Errorf("generation %d: a batch of %d bytes was copied into a buffer of %d", g+1, size, data.Cap())
			}
		}
		if b, err := pbr.ReadByte(); err != nil || b != evEndOfGeneration {
			t.Fatalf("generation %d: end byte %d, %v", g+1, b, err)
		}
		if b, err := pbr.ReadByte(); err != io.EOF {
			t.Fatalf("generation %d: after its end, %d, %v; want io.EOF", g+1, b, err)
		}
	}
	if _, err := ge.s.br.Peek(1); err != io.EOF {
		t.Errorf("input left after the last generation: %v", err)
	}
}
