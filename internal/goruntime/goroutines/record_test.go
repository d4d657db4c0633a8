package goroutines

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/goruntime/rtlayout"
	"github.com/wallprof/wallprof/internal/symbolize/gopclntab"
)

// This file records the goroutine tables that recorded_test.go replays:
//
//	go test ./internal/goruntime/goroutines -run TestRecordSnapshots -record   (as root)
//
// writes, for goparked built stripped by the local toolchain (plain and
// PIE) and by go1.22.12 (if it is in the module cache), two files to
// testdata/: NAME.json.gz (the recording: every range of target memory the
// Reader read, what Open learned, what the live Snapshot returned) and
// NAME.exe.gz (the executable, with the sections the Reader does not read
// zeroed: see reduceExe). See recorded_test.go.

var recordFlag = flag.Bool("record", false, "TestRecordSnapshots: record goparked's goroutine tables into testdata/ (needs root)")

// recording is the content of a testdata/NAME.json.gz file.
type recording struct {
	Build     string // how goparked was built ("go1.26.8-pie-stripped")
	GoVersion string // as Open found it
	AllgsHow  string // Reader.AllgsSource
	Allgs     uint64 // runtime address of runtime.allgs
	LoadBias  uint64
	Exe       string // the gzip'd executable, in testdata/
	ExeSHA256 string // of the executable (not gzip'd)
	Ranges    []memRange
	Snapshot  recordedSnapshot // what the live Snapshot returned
}

// memRange is target memory at Addr; ranges are sorted, disjoint and not
// adjacent.
type memRange struct {
	Addr uint64
	Data []byte
}

type recordedSnapshot struct {
	AllGs      int
	Goroutines []recordedG // sorted by ID
}

// recordedG is a Goroutine with its PCs named (with the Reader's Table).
type recordedG struct {
	ID, ParentID  uint64
	Status        Status
	State         string // Status as text, for whoever reads the file
	WaitReason    string
	GoPC, StartPC uint64
	Creator       string // function of GoPC-1
	Start         string // function at StartPC
	TID           int
	Stack         []uint64
	Frames        []string // the stack's functions, inlined ones included
	Truncated     bool
	System        bool
	Labels        []Label
	Addr          uint64
}

func toRecorded(r *Reader, snap Snapshot) recordedSnapshot {
	rs := recordedSnapshot{AllGs: snap.AllGs, Goroutines: []recordedG{}}
	for _, g := range snap.Goroutines {
		rs.Goroutines = append(rs.Goroutines, recordedG{
			ID: g.ID, ParentID: g.ParentID, Status: g.Status, State: g.Status.String(), WaitReason: g.WaitReason,
			GoPC: g.GoPC, StartPC: g.StartPC, Creator: funcName(r, g.GoPC-1), Start: funcName(r, g.StartPC),
			TID: g.TID, Stack: g.Stack, Frames: frames(r, g), Truncated: g.Truncated, System: g.System,
			Labels: g.Labels, Addr: g.Addr,
		})
	}
	slices.SortFunc(rs.Goroutines, func(a, b recordedG) int { return cmp.Compare(a.ID, b.ID) })
	return rs
}

// recordingMem is a memory that remembers every range read successfully
// through it, in order.
type recordingMem struct {
	inner memory
	reads []memRange
}

func (m *recordingMem) syscalls() int { return m.inner.syscalls() }
func (m *recordingMem) close() error  { return m.inner.close() }

func (m *recordingMem) readAll(rs []read) {
	m.inner.readAll(rs)
	for _, r := range rs {
		if r.ok && len(r.buf) > 0 {
			m.reads = append(m.reads, memRange{Addr: r.addr, Data: bytes.Clone(r.buf)})
		}
	}
}

// ranges returns the union of the ranges read, overlapping and adjacent
// ones merged, holding the bytes read last.
func (m *recordingMem) ranges() []memRange {
	sorted := slices.Clone(m.reads)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Addr < sorted[j].Addr })
	var out []memRange
	for _, r := range sorted {
		end := r.Addr + uint64(len(r.Data))
		if n := len(out); n > 0 && r.Addr <= out[n-1].Addr+uint64(len(out[n-1].Data)) {
			last := &out[n-1]
			if lend := last.Addr + uint64(len(last.Data)); end > lend {
				last.Data = append(last.Data, make([]byte, end-lend)...)
			}
			continue
		}
		out = append(out, memRange{Addr: r.Addr, Data: make([]byte, len(r.Data))})
	}
	for _, r := range m.reads { // in order: later reads win
		i := sort.Search(len(out), func(i int) bool { return out[i].Addr > r.Addr }) - 1
		copy(out[i].Data[r.Addr-out[i].Addr:], r.Data)
	}
	return out
}

// recordBuild is one build of goparked to record.
type recordBuild struct {
	build
	file string // base name in testdata
}

func recordBuilds(t *testing.T) []recordBuild {
	local := strings.TrimSpace(string(goOutput(t, "env", "GOVERSION")))
	bs := []recordBuild{
		{build{"local-stripped", "", true, false}, local + "-stripped"},
		{build{"local-pie-stripped", "", true, true}, local + "-pie-stripped"},
	}
	cache := strings.TrimSpace(string(goOutput(t, "env", "GOMODCACHE")))
	const old = "go1.22.12"
	if _, err := os.Stat(filepath.Join(cache, "golang.org", "toolchain@v0.0.1-"+old+".linux-amd64")); err != nil {
		t.Logf("%s not in the module cache: not recorded", old)
	} else {
		bs = append(bs, recordBuild{build{old + "-stripped", old, true, false}, old + "-stripped"})
	}
	return bs
}

// TestRecordSnapshots records testdata/*.json.gz and *.exe.gz (with
// -record, as root).
func TestRecordSnapshots(t *testing.T) {
	if !*recordFlag {
		t.Skip("records testdata/ again only with -record (as root)")
	}
	requireRoot(t)
	for _, b := range recordBuilds(t) {
		t.Run(b.name, func(t *testing.T) { recordOne(t, b) })
	}
}

// recordOne runs goparked, waits until every goroutine it starts is
// parked, then records one Snapshot of a fresh Reader (empty caches, so
// every stack and label set is read) and keeps it if it read every
// goroutine at the first try and replays to the same result.
func recordOne(t *testing.T, b recordBuild) {
	bin := b.binary(t)
	w := startWorkload(t, bin)
	pid := w.cmd.Process.Pid
	r0, err := Open(pid)
	if err != nil {
		t.Fatal(err)
	}
	snapshotUntilFound(t, r0)
	r0.Close()
	full, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	exe := reduceExe(t, full)
	sum := sha256.Sum256(exe)
	for attempt := 0; attempt < 20; attempt++ {
		rec := &recordingMem{}
		r, err := open(pid, func(m memory) memory { rec.inner = m; return rec })
		if err != nil {
			t.Fatal(err)
		}
		snap, err := r.Snapshot()
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		missing := 0
		for _, e := range expected {
			if len(withFrame(r, snap, e.fn)) != 1 {
				missing++
			}
		}
		if snap.Dropped > 0 || snap.Retried > 0 || snap.LabelErrors > 0 || missing > 0 {
			t.Logf("attempt %d: %d dropped, %d retried, %d label errors, %d expected goroutines missing: again",
				attempt, snap.Dropped, snap.Retried, snap.LabelErrors, missing)
			time.Sleep(20 * time.Millisecond)
			continue
		}
		out := recording{
			Build: b.file, GoVersion: r.GoVersion(), AllgsHow: r.AllgsSource(), Allgs: r.allgs,
			LoadBias: r.LoadBias(), Exe: b.file + ".exe.gz", ExeSHA256: hex.EncodeToString(sum[:]),
			Ranges: rec.ranges(), Snapshot: toRecorded(r, snap),
		}
		// The recording must replay to what the live Reader saw (a
		// goroutine that changed between reads leaves bytes of two moments).
		rr, mem := replay(t, &out, exe)
		again, err := rr.Snapshot()
		if got := toRecorded(rr, again); err != nil || again.Dropped+again.Retried+again.LabelErrors > 0 || !reflect.DeepEqual(got, out.Snapshot) {
			t.Logf("attempt %d: the recording does not replay to the live snapshot (%v, %d dropped, %d retried, %d label errors): again",
				attempt, err, again.Dropped, again.Retried, again.LabelErrors)
			for i := range min(len(got.Goroutines), len(out.Snapshot.Goroutines)) {
				if g, w := got.Goroutines[i], out.Snapshot.Goroutines[i]; !reflect.DeepEqual(g, w) {
					t.Logf("replayed %+v\n    live %+v", g, w)
					break
				}
			}
			continue
		}
		js, err := json.Marshal(out)
		if err != nil {
			t.Fatal(err)
		}
		writeGzip(t, filepath.Join("testdata", b.file+".json.gz"), js)
		writeGzip(t, filepath.Join("testdata", out.Exe), exe)
		size := 0
		for _, rg := range out.Ranges {
			size += len(rg.Data)
		}
		t.Logf("%s: %d goroutines, %d memory ranges (%d bytes, %d reads)", b.file, len(out.Snapshot.Goroutines), len(out.Ranges), size, mem.calls)
		return
	}
	t.Fatal("no consistent recording in 20 attempts")
}

// reduceExe returns a copy of the executable exe with the contents of the
// sections the Reader does not read zeroed (they compress to nothing):
// .text but for runtime.forEachG (decoded to find runtime.allgs), .data,
// type links. Kept: the ELF and program headers, the section headers,
// .gopclntab (the function table), .rodata (where the inlining trees of
// the function table are), .noptrdata (runtime.firstmoduledata, which says
// where), .go.buildinfo (the version). The recording is checked to replay the same with it.
func reduceExe(t *testing.T, exe []byte) []byte {
	f, err := elf.NewFile(bytes.NewReader(exe))
	if err != nil {
		t.Fatal(err)
	}
	tab, err := gopclntab.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	keepLo, keepHi, ok := rtlayout.FindFunc(tab, "runtime.forEachG")
	if !ok {
		t.Fatal("no runtime.forEachG")
	}
	out := bytes.Clone(exe)
	for _, name := range []string{".text", ".typelink", ".itablink", ".data"} {
		sec := f.Section(name)
		if sec == nil || sec.Type == elf.SHT_NOBITS {
			continue
		}
		for a := sec.Addr; a < sec.Addr+sec.Size; a++ {
			if name == ".text" && a >= keepLo && a < keepHi {
				continue
			}
			out[sec.Offset+(a-sec.Addr)] = 0
		}
	}
	return out
}

func writeGzip(t *testing.T, path string, data []byte) {
	t.Helper()
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(data)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func goOutput(t *testing.T, args ...string) []byte {
	t.Helper()
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go %s: %v", strings.Join(args, " "), err)
	}
	return out
}
