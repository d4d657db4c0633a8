package goroutines

// Recorded tests: the Reader on memory recorded from live goparked
// processes, without privileges and without a process.
//
// testdata/NAME.json.gz holds a recording (see record_test.go, which makes
// them: go test ./internal/goruntime/goroutines -run TestRecordSnapshots
// -record, as root): goparked built stripped by the local toolchain (plain
// and PIE) and by go1.22.12; for each, every range of target memory a
// fresh Reader read during Open and one Snapshot (overlapping and adjacent
// ranges merged, the last bytes read kept), the load bias, the Go version
// and the runtime.allgs address Open found, and what that live Snapshot
// returned (goroutine ids, states, wait reasons, creation sites, start
// functions, stacks as PCs and as function names, labels, thread ids).
// testdata/NAME.exe.gz is the executable that was read, gzip'd, with the
// contents of the sections the Reader does not read zeroed (record_test.go
// reduceExe; the recording is kept only if it replays to the live result
// with it); its SHA-256 is in the recording.
//
// The tests build a Reader with openRecorded over the executable, the
// recorded load bias and a memory that serves the recorded ranges (a read
// outside them fails), so Open's executable analysis (version, layout
// tables, allgs found in the code of a stripped binary, runtime.goexit,
// the layout check on goroutine 1) and all of Snapshot (allgs, both reads
// of every g, stacks, frame checks against .gopclntab, m.procid, label
// sets in the Go 1.22 map and Go 1.24+ slice forms, the stack and label
// caches) run as in a live read:
//
//   - TestRecordedSnapshots: the Reader finds the recorded version, allgs
//     address and bias; a Snapshot equals the recorded one goroutine for
//     goroutine (names through Table().Lookup(pc-1-LoadBias()) included);
//     every goroutine goparked parks (chan receive, chan send, select,
//     sleep, sync.Mutex.Lock, sync.WaitGroup.Wait/semacquire, IO wait,
//     deep stacks, labels) checks as in TestReadGoparked (checkExpected);
//     a second Snapshot is the same, its stacks from the cache.
//   - TestRecordedTorn: the recorded memory changed as it is read, as a
//     running target does: a g whose goid or state differs between its two
//     reads once (read again: Retried, same result), always (dropped and
//     counted), a g with an impossible state, an unreadable stack, a frame
//     chain going down the stack (dropped), a return address outside Go
//     code (kept up to that frame, Truncated), an unreadable label set
//     (LabelErrors), allgs changing between its reads (read again), allgs
//     unreadable (an error); no other goroutine may change.
//   - TestRecordedWrongLayout: the layout of another Go version does not
//     pass Open's check (ErrLayoutMismatch), nor a first g that is not
//     goroutine 1.
//   - TestRecordedBadExecutable: Open's errors about the executable (not
//     amd64, no build info, no function table, no code to find allgs in).
//   - TestRecordingRanges: how the recorder merges what it read.

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/wallprof/wallprof/internal/goruntime/rtlayout"
)

// replayMem serves recorded memory. hook, when set, sees every read that
// succeeded and may change its bytes or fail it (return false).
type replayMem struct {
	ranges []memRange
	hook   func(addr uint64, buf []byte) bool
	calls  int
}

func (m *replayMem) syscalls() int { return m.calls }
func (m *replayMem) close() error  { return nil }

func (m *replayMem) readAll(rs []read) {
	m.calls++
	for i := range rs {
		rs[i].ok = m.peek(rs[i].addr, rs[i].buf)
		if rs[i].ok && len(rs[i].buf) > 0 && m.hook != nil {
			rs[i].ok = m.hook(rs[i].addr, rs[i].buf)
		}
	}
}

// peek copies the recorded bytes at addr into buf, if recorded.
func (m *replayMem) peek(addr uint64, buf []byte) bool {
	if len(buf) == 0 {
		return true
	}
	i := sort.Search(len(m.ranges), func(i int) bool { return m.ranges[i].Addr > addr }) - 1
	if i < 0 {
		return false
	}
	rg := m.ranges[i]
	if addr+uint64(len(buf)) > rg.Addr+uint64(len(rg.Data)) {
		return false
	}
	copy(buf, rg.Data[addr-rg.Addr:])
	return true
}

// replay returns a Reader over a recording and the executable exe.
func replay(t *testing.T, rec *recording, exe []byte) (*Reader, *replayMem) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(exe))
	if err != nil {
		t.Fatal(err)
	}
	mem := &replayMem{ranges: rec.Ranges}
	r, err := openRecorded(f, bytes.NewReader(exe), rec.LoadBias, mem)
	if err != nil {
		t.Fatalf("openRecorded(%s): %v", rec.Build, err)
	}
	return r, mem
}

type loadedRecording struct {
	rec *recording
	exe []byte
}

// recordings loads every testdata/*.json.gz; there must be some.
func recordings(t *testing.T) []loadedRecording {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "*.json.gz"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recordings in testdata/ (%v): record them with -run TestRecordSnapshots -record", err)
	}
	var out []loadedRecording
	for _, p := range paths {
		var rec recording
		if err := json.Unmarshal(readGzip(t, p), &rec); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		exe := readGzip(t, filepath.Join("testdata", rec.Exe))
		if sum := sha256.Sum256(exe); hex.EncodeToString(sum[:]) != rec.ExeSHA256 {
			t.Fatalf("%s: %s is not the executable that was recorded", p, rec.Exe)
		}
		out = append(out, loadedRecording{&rec, exe})
	}
	return out
}

func readGzip(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return b
}

// checkSame compares a snapshot with the expected one, goroutine by
// goroutine (by id).
func checkSame(t *testing.T, r *Reader, snap Snapshot, want recordedSnapshot) {
	t.Helper()
	got := toRecorded(r, snap)
	if got.AllGs != want.AllGs {
		t.Errorf("len(allgs) %d, want %d", got.AllGs, want.AllGs)
	}
	byID := map[uint64]recordedG{}
	for _, g := range got.Goroutines {
		if _, dup := byID[g.ID]; dup {
			t.Errorf("goroutine %d twice", g.ID)
		}
		byID[g.ID] = g
	}
	for _, w := range want.Goroutines {
		g, ok := byID[w.ID]
		if !ok {
			t.Errorf("goroutine %d (%s, %s) missing", w.ID, w.Start, w.State)
			continue
		}
		delete(byID, w.ID)
		if !reflect.DeepEqual(g, w) {
			t.Errorf("goroutine %d:\n got %+v\nwant %+v", w.ID, g, w)
		}
	}
	for id, g := range byID {
		t.Errorf("goroutine %d (%s, %s) not expected", id, g.Start, g.State)
	}
}

func TestRecordedSnapshots(t *testing.T) {
	for _, lr := range recordings(t) {
		rec := lr.rec
		t.Run(rec.Build, func(t *testing.T) {
			r, mem := replay(t, rec, lr.exe)
			if r.GoVersion() != rec.GoVersion || r.AllgsSource() != rec.AllgsHow || r.allgs != rec.Allgs || r.LoadBias() != rec.LoadBias {
				t.Errorf("reader: %s, allgs at %#x via %q, bias %#x; recorded %s, %#x via %q, %#x",
					r.GoVersion(), r.allgs, r.AllgsSource(), r.LoadBias(), rec.GoVersion, rec.Allgs, rec.AllgsHow, rec.LoadBias)
			}
			if !strings.HasPrefix(r.AllgsSource(), "code") {
				t.Errorf("stripped build: allgs found through %q", r.AllgsSource())
			}
			if pie := strings.Contains(rec.Build, "-pie"); pie == (r.LoadBias() == 0) {
				t.Errorf("load bias %#x (PIE: %v)", r.LoadBias(), pie)
			}
			snap, err := r.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if snap.Dropped != 0 || snap.Retried != 0 || snap.LabelErrors != 0 || snap.CachedStacks != 0 {
				t.Errorf("dropped %d, retried %d, label errors %d, cached %d; want none", snap.Dropped, snap.Retried, snap.LabelErrors, snap.CachedStacks)
			}
			checkSame(t, r, snap, rec.Snapshot)
			checkExpected(t, r, snap)
			reasons := map[string]bool{}
			for _, g := range snap.Goroutines {
				reasons[g.WaitReason] = true
			}
			for _, want := range []string{"chan receive", "chan send", "select", "sleep", "sync.Mutex.Lock", "IO wait"} {
				if !reasons[want] {
					t.Errorf("no goroutine waiting in %q", want)
				}
			}
			calls := mem.calls
			again, err := r.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			checkSame(t, r, again, rec.Snapshot)
			if again.CachedStacks < len(expected) {
				t.Errorf("second snapshot took %d stacks from the cache, want at least %d", again.CachedStacks, len(expected))
			}
			t.Logf("%s: %d goroutines; %d batches of reads, then %d from the caches", rec.Build, len(snap.Goroutines), calls, mem.calls-calls)

			// Through the merging wrapper Open puts around the memory:
			// the recording has none of the gaps it bridges, so merged
			// reads fail and are read again range by range.
			r, mem = replay(t, rec, lr.exe)
			r.mem = &merged{inner: mem}
			snap, err = r.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			checkSame(t, r, snap, rec.Snapshot)

			// Read a few goroutines at a time, as the goroutine view does
			// with large tables: the same snapshot, labels included, and
			// each chunk handed over once, in order.
			for _, n := range []int{1, 3, 7} {
				r, _ = replay(t, rec, lr.exe)
				var seen []uint64
				calls, lastMore := 0, true
				snap, err = r.SnapshotChunks(n, func(gs []Goroutine, more bool) {
					calls++
					if len(gs) > n || !lastMore {
						t.Errorf("chunks of %d: a chunk of %d goroutines after more=%v", n, len(gs), lastMore)
					}
					lastMore = more
					for _, g := range gs {
						seen = append(seen, g.ID)
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				checkSame(t, r, snap, rec.Snapshot)
				var ids []uint64
				for _, g := range snap.Goroutines {
					ids = append(ids, g.ID)
				}
				if !slices.Equal(seen, ids) || lastMore || calls < (snap.AllGs+n-1)/n {
					t.Errorf("chunks of %d: %d calls (last more=%v) handed over %v, snapshot has %v", n, calls, lastMore, seen, ids)
				}
			}
		})
	}
}

// target returns the recorded goroutine with fn on its stack and its g as
// read.
func target(t *testing.T, r *Reader, mem *replayMem, rec *recording, fn string) (recordedG, gview) {
	t.Helper()
	for _, g := range rec.Snapshot.Goroutines {
		if slices.Contains(g.Frames, fn) {
			buf := make([]byte, r.layout.Offsets.GSize)
			if !mem.peek(g.Addr, buf) {
				t.Fatalf("g of goroutine %d not recorded", g.ID)
			}
			return g, r.parseG(buf)
		}
	}
	t.Fatalf("no recorded goroutine in %s", fn)
	return recordedG{}, gview{}
}

// without returns the expected snapshot without goroutine id.
func without(s recordedSnapshot, id uint64) recordedSnapshot {
	s.Goroutines = slices.DeleteFunc(slices.Clone(s.Goroutines), func(g recordedG) bool { return g.ID == id })
	return s
}

func TestRecordedTorn(t *testing.T) {
	for _, lr := range recordings(t) {
		rec := lr.rec
		t.Run(rec.Build, func(t *testing.T) {
			o := func(r *Reader) rtlayout.Offsets { return r.layout.Offsets }
			var deep recordedG // the goroutine in main.deepWait
			// counter counts the reads at one address.
			type counter map[uint64]int
			type outcome struct {
				dropped, retried, labelErrors int
				want                          recordedSnapshot
			}
			cases := []struct {
				name string
				// setup installs the hook and returns what the snapshot
				// must be.
				setup func(r *Reader, mem *replayMem) outcome
				// check, if set, checks the goroutines itself.
				check func(t *testing.T, r *Reader, snap Snapshot)
			}{
				{name: "goid differs between the two reads once", setup: func(r *Reader, mem *replayMem) outcome {
					g, _ := target(t, r, mem, rec, "main.waitOnChan")
					n := counter{}
					mem.hook = func(addr uint64, buf []byte) bool {
						if addr == g.Addr {
							if n[addr]++; n[addr] == 2 {
								buf[o(r).GGoid] ^= 0x40
							}
						}
						return true
					}
					return outcome{retried: 1, want: rec.Snapshot}
				}},
				{name: "goid differs at every read", setup: func(r *Reader, mem *replayMem) outcome {
					g, _ := target(t, r, mem, rec, "main.waitOnChan")
					n := 0
					mem.hook = func(addr uint64, buf []byte) bool {
						if addr == g.Addr {
							n++
							put(buf, o(r).GGoid, word(buf, o(r).GGoid)+uint64(n))
						}
						return true
					}
					return outcome{dropped: 1, retried: 3, want: without(rec.Snapshot, g.ID)}
				}},
				{name: "state differs between the two reads once", setup: func(r *Reader, mem *replayMem) outcome {
					g, _ := target(t, r, mem, rec, "main.sendOnChan")
					n := counter{}
					mem.hook = func(addr uint64, buf []byte) bool {
						if addr == g.Addr {
							if n[addr]++; n[addr] == 2 {
								buf[o(r).GAtomicstatus] = byte(Runnable)
							}
						}
						return true
					}
					return outcome{retried: 1, want: rec.Snapshot}
				}},
				{name: "impossible state", setup: func(r *Reader, mem *replayMem) outcome {
					g, _ := target(t, r, mem, rec, "main.waitInSelect")
					mem.hook = func(addr uint64, buf []byte) bool {
						if addr == g.Addr {
							buf[o(r).GAtomicstatus] = 0x77
						}
						return true
					}
					return outcome{dropped: 1, retried: 3, want: without(rec.Snapshot, g.ID)}
				}},
				{name: "stack not readable", setup: func(r *Reader, mem *replayMem) outcome {
					g, v := target(t, r, mem, rec, "main.sleepLong")
					mem.hook = func(addr uint64, buf []byte) bool {
						return addr >= v.hi || addr+uint64(len(buf)) <= v.sp // the used stack is gone
					}
					return outcome{dropped: 1, retried: 3, want: without(rec.Snapshot, g.ID)}
				}},
				{name: "frame pointer going down the stack", setup: func(r *Reader, mem *replayMem) outcome {
					g, v := target(t, r, mem, rec, "main.deepWait")
					mem.hook = func(addr uint64, buf []byte) bool {
						if addr == v.sp {
							put(buf, int(v.bp-v.sp), v.bp-16) // the first saved frame pointer
						}
						return true
					}
					return outcome{dropped: 1, retried: 3, want: without(rec.Snapshot, g.ID)}
				}},
				{name: "return address outside Go code", setup: func(r *Reader, mem *replayMem) outcome {
					g, v := target(t, r, mem, rec, "main.deepWait")
					deep = g
					// Follow the chain 10 frames up and spoil the
					// return address saved there.
					stack := make([]byte, v.hi-v.sp)
					if !mem.peek(v.sp, stack) {
						t.Fatal("stack of main.deepWait not recorded")
					}
					bp := v.bp
					for i := 0; i < 10; i++ {
						bp = word(stack, int(bp-v.sp))
					}
					mem.hook = func(addr uint64, buf []byte) bool {
						if addr == v.sp {
							put(buf, int(bp-v.sp)+8, 0x1234)
						}
						return true
					}
					return outcome{retried: 3, want: rec.Snapshot}
				}, check: func(t *testing.T, r *Reader, snap Snapshot) {
					// Every other goroutine as recorded; this one with
					// the frames up to the bad return address.
					checkSame(t, r, Snapshot{AllGs: snap.AllGs, Goroutines: slices.DeleteFunc(slices.Clone(snap.Goroutines),
						func(g Goroutine) bool { return g.ID == deep.ID })}, without(rec.Snapshot, deep.ID))
					i := slices.IndexFunc(snap.Goroutines, func(g Goroutine) bool { return g.ID == deep.ID })
					if i < 0 {
						t.Fatalf("goroutine %d (main.deepWait) dropped", deep.ID)
					}
					g, want := snap.Goroutines[i], deep.Stack
					n := len(g.Stack)
					if !g.Truncated || n < 2 || n >= len(want) || g.Stack[n-1] != 0x1234 || !slices.Equal(g.Stack[:n-1], want[:n-1]) {
						t.Errorf("stack %#x (truncated %v), want the frames before the bad one of %#x", g.Stack, g.Truncated, want)
					}
				}},
				{name: "label set not readable", setup: func(r *Reader, mem *replayMem) outcome {
					g, v := target(t, r, mem, rec, "main.labeledWait")
					mem.hook = func(addr uint64, buf []byte) bool {
						if addr == v.labels {
							put(buf, 0, 8) // points nowhere
						}
						return true
					}
					want := rec.Snapshot
					want.Goroutines = slices.Clone(want.Goroutines)
					for i := range want.Goroutines {
						if want.Goroutines[i].ID == g.ID {
							want.Goroutines[i].Labels = nil
						}
					}
					return outcome{labelErrors: 1, want: want}
				}},
				{name: "allgs changes between its reads", setup: func(r *Reader, mem *replayMem) outcome {
					n := 0
					mem.hook = func(addr uint64, buf []byte) bool {
						if addr == r.allgs {
							if n++; n == 1 {
								put(buf, 16, word(buf, 16)*2) // cap: allgadd grew it
							}
						}
						return true
					}
					return outcome{want: rec.Snapshot}
				}},
			}
			for _, c := range cases {
				t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
					r, mem := replay(t, rec, lr.exe)
					want := c.setup(r, mem)
					snap, err := r.Snapshot()
					if err != nil {
						t.Fatal(err)
					}
					if snap.Dropped != want.dropped || snap.Retried != want.retried || snap.LabelErrors != want.labelErrors {
						t.Errorf("dropped %d, retried %d, label errors %d; want %d, %d, %d",
							snap.Dropped, snap.Retried, snap.LabelErrors, want.dropped, want.retried, want.labelErrors)
					}
					if c.check != nil {
						c.check(t, r, snap)
						return
					}
					checkSame(t, r, snap, want.want)
				})
			}
			t.Run("allgs_not_readable", func(t *testing.T) {
				r, mem := replay(t, rec, lr.exe)
				mem.hook = func(addr uint64, buf []byte) bool { return addr != r.allgs }
				if snap, err := r.Snapshot(); err == nil || len(snap.Goroutines) != 0 {
					t.Errorf("Snapshot without allgs: %d goroutines, error %v", len(snap.Goroutines), err)
				}
			})
		})
	}
}

// TestRecordedBadExecutable checks Open's errors about the executable,
// through openRecorded, on spoiled copies of a recorded one.
func TestRecordedBadExecutable(t *testing.T) {
	lr := recordings(t)[0]
	spoil := func(t *testing.T, change func(f *elf.File, b []byte)) error {
		b := bytes.Clone(lr.exe)
		f, err := elf.NewFile(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		change(f, b)
		if f, err = elf.NewFile(bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
		_, err = openRecorded(f, bytes.NewReader(b), lr.rec.LoadBias, &replayMem{ranges: lr.rec.Ranges})
		return err
	}
	zero := func(b []byte, sec *elf.Section) { clear(b[sec.Offset : sec.Offset+sec.Size]) }
	for _, c := range []struct {
		name   string
		change func(f *elf.File, b []byte)
		want   error
	}{
		{"not amd64", func(f *elf.File, b []byte) { b[18], b[19] = byte(elf.EM_AARCH64), 0 }, ErrUnsupportedArch},
		{"no build info", func(f *elf.File, b []byte) { zero(b, f.Section(".go.buildinfo")) }, ErrNotGo},
		{"no function table", func(f *elf.File, b []byte) { zero(b, f.Section(".gopclntab")) }, nil},
		{"no runtime.forEachG code", func(f *elf.File, b []byte) { zero(b, f.Section(".text")) }, rtlayout.ErrAllgsNotFound},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			err := spoil(t, c.change)
			if err == nil || (c.want != nil && !errors.Is(err, c.want)) || !strings.HasPrefix(err.Error(), "recorded target") {
				t.Errorf("openRecorded: %v, want %v", err, c.want)
			}
		})
	}
}

func TestRecordedWrongLayout(t *testing.T) {
	for _, lr := range recordings(t) {
		rec := lr.rec
		t.Run(rec.Build, func(t *testing.T) {
			r, _ := replay(t, rec, lr.exe)
			goidOff := r.layout.Offsets.GGoid
			other := "go1.20"
			if rtlayout.Minor(rec.GoVersion) <= "go1.23" {
				other = "go1.26"
			}
			var err error
			if r.layout, err = rtlayout.ForVersion(other); err != nil {
				t.Fatal(err)
			}
			if err := r.checkLayout(); !errors.Is(err, ErrLayoutMismatch) {
				t.Errorf("%s program read with the %s layout: %v", rec.GoVersion, other, err)
			}
			// Open's check itself, on the recording: the first g must
			// be goroutine 1 in runtime.main.
			f, _ := elf.NewFile(bytes.NewReader(lr.exe))
			mem := &replayMem{ranges: rec.Ranges}
			first := rec.Snapshot.Goroutines[0]
			mem.hook = func(addr uint64, buf []byte) bool {
				if addr == first.Addr {
					put(buf, goidOff, 99)
				}
				return true
			}
			if _, err := openRecorded(f, bytes.NewReader(lr.exe), rec.LoadBias, mem); !errors.Is(err, ErrLayoutMismatch) {
				t.Errorf("openRecorded with goroutine 1 reading as goid 99: %v", err)
			}
		})
	}
}

// TestRecordingRanges checks how recordingMem merges the ranges it saw:
// overlapping and adjacent ones into one, the bytes read last winning,
// failed reads left out.
func TestRecordingRanges(t *testing.T) {
	inner := &fakeMem{regions: map[uint64][]byte{
		0x1000: []byte("abcdefghijklmnop"),
		0x2000: []byte("0123456789"),
	}}
	m := &recordingMem{inner: inner}
	m.readAll([]read{
		{addr: 0x1004, buf: make([]byte, 4)}, // efgh
		{addr: 0x1000, buf: make([]byte, 4)}, // abcd: adjacent
		{addr: 0x2008, buf: make([]byte, 2)}, // 89
		{addr: 0x3000, buf: make([]byte, 2)}, // not mapped
	})
	copy(inner.regions[0x1000][6:], "XY") // the target changed
	m.readAll([]read{
		{addr: 0x1006, buf: make([]byte, 4)}, // XYij: overlaps, wins
		{addr: 0x2002, buf: make([]byte, 2)}, // 23: apart from 89
	})
	want := []memRange{{0x1000, []byte("abcdefXYij")}, {0x2002, []byte("23")}, {0x2008, []byte("89")}}
	if got := m.ranges(); !reflect.DeepEqual(got, want) {
		t.Errorf("ranges %+v, want %+v", got, want)
	}
	r := &replayMem{ranges: want}
	for _, c := range []struct {
		addr uint64
		n    int
		ok   bool
	}{{0x1000, 10, true}, {0x1009, 2, false}, {0x2002, 2, true}, {0x2003, 6, false}, {0xfff, 1, false}, {0x2008, 0, true}} {
		if ok := r.peek(c.addr, make([]byte, c.n)); ok != c.ok {
			t.Errorf("read of %d bytes at %#x: ok %v, want %v", c.n, c.addr, ok, c.ok)
		}
	}
}
