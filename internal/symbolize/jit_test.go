package symbolize

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// jitProcess is a synthetic process with anonymous executable memory at
// 0x7f0000000000-0x7f0000100000 whose root directory is a temporary
// folder, as a container's would be, and whose PID in its namespace is 7.
func jitProcess(t *testing.T) (*Process, string) {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	p := syntheticProcess("7f0000000000-7f0000100000 r-xp 00000000 00:00 0 \n" +
		"400000-401000 r-xp 00000000 08:01 7 /nonexistent/app\n")
	p.root = root
	p.jit = newJITSymbols(root, 7)
	t.Cleanup(func() { p.jit.Close() })
	return p, dir
}

func resolveName(p *Process, addr uint64) string {
	_, fr := p.Resolve(addr)
	return fr[0].Function
}

func TestPerfMap(t *testing.T) {
	p, dir := jitProcess(t)
	mapPath := filepath.Join(dir, "tmp", "perf-7.map")
	// No perf map yet: the address stays unnamed.
	if got := resolveName(p, 0x7f0000000010); got != "[anon]+0x7f0000000010" {
		t.Errorf("without a perf map: %s", got)
	}
	if err := os.WriteFile(mapPath, []byte(
		"7f0000000000 40 py::burn_cpu_python_marker:/app/burn.py\n"+
			"0x7f0000000100 0x20 LazyCompile:*spin /app/x.js:3:14\n"+
			"garbage line\n"+
			"7f0000000200 0 zero sized\n"+
			"7f0000000300 10 partial line wi"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.jit.last = time.Time{} // as if jitRereadEvery had passed
	for addr, want := range map[uint64]string{
		0x7f0000000010: "py::burn_cpu_python_marker:/app/burn.py",
		0x7f000000003f: "py::burn_cpu_python_marker:/app/burn.py",
		0x7f0000000040: "[anon]+0x7f0000000040",
		0x7f0000000110: "LazyCompile:*spin /app/x.js:3:14",
		0x7f0000000200: "[anon]+0x7f0000000200",
		0x7f0000000300: "[anon]+0x7f0000000300", // its line is not complete yet
		0x400010:       "app+0x10",              // not anonymous memory: perf maps do not apply
	} {
		if got := resolveName(p, addr); got != want {
			t.Errorf("Resolve(%#x) = %s, want %s", addr, got, want)
		}
	}

	// The map grows: the rest of the partial line, and code reused in
	// place (a later line wins).
	f, err := os.OpenFile(mapPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("th spaces\n7f0000000000 20 py::reused:/app/burn.py\n")
	f.Close()
	// Within jitRereadEvery of the last read, a miss does not read again.
	if got := resolveName(p, 0x7f0000000300); got != "[anon]+0x7f0000000300" {
		t.Errorf("re-read within %v: %s", jitRereadEvery, got)
	}
	p.jit.last = time.Now().Add(-jitRereadEvery)
	// Only a miss reads again: the first lookup, of the address the new
	// line names, does.
	for _, tc := range []struct {
		addr uint64
		want string
	}{
		{0x7f0000000300, "partial line with spaces"},
		{0x7f0000000010, "py::reused:/app/burn.py"},
		{0x7f0000000030, "py::burn_cpu_python_marker:/app/burn.py"},
	} {
		if got := resolveName(p, tc.addr); got != tc.want {
			t.Errorf("after growth: Resolve(%#x) = %s, want %s", tc.addr, got, tc.want)
		}
	}
	if src, nspid := p.JITSources(); len(src) != 1 || src[0] != "/tmp/perf-7.map" || nspid != 7 {
		t.Errorf("JITSources = %v, %d", src, nspid)
	}
}

// The perf map is opened while the process lives (Refresh): once it has
// exited, its file may be gone from every path (a container's /tmp goes with
// its mount namespace), and the samples are named from the open file.
func TestPerfMapOpenedWhileAlive(t *testing.T) {
	p, dir := jitProcess(t)
	mapPath := filepath.Join(dir, "tmp", "perf-7.map")
	if err := os.WriteFile(mapPath, []byte("7f0000000000 40 JS:*burn /app/x.js:1:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p.jit.openPerfMap() // what Refresh does
	if err := os.Remove(mapPath); err != nil {
		t.Fatal(err)
	}
	if got := resolveName(p, 0x7f0000000010); got != "JS:*burn /app/x.js:1:1" {
		t.Errorf("the map removed after it was opened: %s", got)
	}
}

func TestParseNSpid(t *testing.T) {
	for status, want := range map[string]int{
		"Name:\tnode\nPid:\t4242\nNSpid:\t4242\t1\nNSpgid:\t4242\t1\n": 1,
		"NSpid:\t4242\n": 4242,
		"Pid:\t4242\n":   99, // an old kernel without NSpid: the PID itself
	} {
		if got := parseNSpid([]byte(status), 99); got != want {
			t.Errorf("parseNSpid(%q) = %d, want %d", status, got, want)
		}
	}
}

// jitdumpWriter builds a jitdump file as a runtime writes it.
type jitdumpWriter struct {
	buf   bytes.Buffer
	order binary.ByteOrder
	index uint64
}

func newJitdump(order binary.ByteOrder) *jitdumpWriter {
	w := &jitdumpWriter{order: order}
	w.put(uint32(jitdumpMagic), uint32(1), uint32(40), uint32(62), uint32(0), uint32(7), uint64(1), uint64(0))
	return w
}

func (w *jitdumpWriter) put(vs ...any) {
	for _, v := range vs {
		binary.Write(&w.buf, w.order, v)
	}
}

func (w *jitdumpWriter) record(typ uint32, ts uint64, body []byte) {
	w.put(typ, uint32(16+len(body)), ts)
	w.buf.Write(body)
}

func (w *jitdumpWriter) body(vs ...any) []byte {
	var b bytes.Buffer
	for _, v := range vs {
		if s, ok := v.(string); ok {
			b.WriteString(s)
			b.WriteByte(0)
			continue
		}
		binary.Write(&b, w.order, v)
	}
	return b.Bytes()
}

func (w *jitdumpWriter) load(ts, addr, size uint64, name string) {
	w.index++
	code := make([]byte, size)
	w.record(jitCodeLoad, ts, append(w.body(uint32(7), uint32(7), addr, addr, size, w.index, name), code...))
}

func TestJitdump(t *testing.T) {
	for _, order := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
		p, dir := jitProcess(t)
		w := newJitdump(order)
		w.record(jitCodeDebugInfo, 100, w.body(uint64(0x7f0000001000), uint64(2),
			uint64(0x7f0000001000), uint32(10), uint32(0), "/app/Burn.java",
			uint64(0x7f0000001008), uint32(12), uint32(0), "/app/Burn.java"))
		w.load(100, 0x7f0000001000, 0x40, "Burn::burnCpuJavaMarker")       // index 1
		w.load(200, 0x7f0000002000, 0x40, "Burn::other")                   // index 2
		w.record(jitCodeMove, 300, w.body(uint32(7), uint32(7), uint64(0), // Burn::other moves
			uint64(0x7f0000002000), uint64(0x7f0000003000), uint64(0x40), uint64(2)))
		w.load(400, 0x7f0000001000, 0x20, "Burn::replacement") // reuses the start of index 1's code
		full := w.buf.Bytes()
		path := filepath.Join(dir, "jit-7.dump")
		// The runtime is still writing: the last record is cut short.
		if err := os.WriteFile(path, full[:len(full)-10], 0o644); err != nil {
			t.Fatal(err)
		}
		p.jit.addDump("/jit-7.dump", func() (*os.File, error) { return os.Open(path) })

		check := func(addr, at uint64, want string, line int) {
			t.Helper()
			_, fr := p.ResolveAt(addr, at)
			if fr[0].Function != want || fr[0].Line != line {
				t.Errorf("%v: ResolveAt(%#x, %d) = %+v, want %s line %d", order, addr, at, fr[0], want, line)
			}
		}
		check(0x7f0000001004, 0, "Burn::burnCpuJavaMarker", 10)
		check(0x7f000000100c, 0, "Burn::burnCpuJavaMarker", 12)
		check(0x7f0000002010, 0, "Burn::other", 0)
		check(0x7f0000003010, 250, "[anon]+0x7f0000003010", 0) // before the move
		check(0x7f0000003010, 0, "Burn::other", 0)
		if err := os.WriteFile(path, full, 0o644); err != nil {
			t.Fatal(err)
		}
		p.jit.last = time.Time{}
		check(0x7f0000004000, 0, "[anon]+0x7f0000004000", 0)    // a miss reads the file again
		check(0x7f0000001030, 0, "Burn::burnCpuJavaMarker", 12) // past the replacement's end
		check(0x7f0000001004, 0, "Burn::replacement", 0)        // no time: the latest load
		check(0x7f0000001004, 399, "Burn::burnCpuJavaMarker", 10)
		check(0x7f0000001004, 400, "Burn::replacement", 0)
		if src, _ := p.JITSources(); len(src) != 1 || src[0] != "/jit-7.dump" {
			t.Errorf("JITSources = %v (no perf map was written)", src)
		}
	}
}

func TestJitdumpMalformed(t *testing.T) {
	d := &jitdumpDecoder{codeIndex: map[uint64]string{}, debug: map[uint64][]jitLine{}}
	if _, _, err := d.decode(bytes.Repeat([]byte{0xff}, 64)); err == nil {
		t.Error("bad magic accepted")
	}
	w := newJitdump(binary.LittleEndian)
	w.load(1, 0x1000, 8, "ok")
	w.put(uint32(jitCodeLoad), uint32(3), uint64(2)) // a record shorter than its header
	d = &jitdumpDecoder{codeIndex: map[uint64]string{}, debug: map[uint64][]jitLine{}}
	es, _, err := d.decode(w.buf.Bytes())
	if err == nil || len(es) != 1 || es[0].name != "ok" {
		t.Errorf("decode = %+v, %v; want the first load and an error", es, err)
	}
}

func FuzzJitdump(f *testing.F) {
	w := newJitdump(binary.LittleEndian)
	w.load(1, 0x1000, 8, "f")
	f.Add(w.buf.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		d := &jitdumpDecoder{codeIndex: map[uint64]string{}, debug: map[uint64][]jitLine{}}
		_, n, _ := d.decode(data)
		if n > len(data) {
			t.Fatalf("consumed %d of %d bytes", n, len(data))
		}
	})
}

func FuzzPerfMap(f *testing.F) {
	f.Add([]byte("7f0000000000 40 a b c\nzz\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var line uint64
		es, n := parsePerfMap(data, &line)
		if n > len(data) {
			t.Fatalf("consumed %d of %d bytes", n, len(data))
		}
		for _, e := range es {
			if e.end <= e.start {
				t.Fatalf("entry %+v", e)
			}
		}
	})
}
