package symbolize

import (
	"encoding/binary"
	"fmt"
	"sort"
	"testing"

	"github.com/wallprof/wallprof/internal/profile"
)

func TestParseMaps(t *testing.T) {
	text := `55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 123 /usr/bin/my prog
55d0c0a01000-55d0c0a02000 r-xp 00001000 08:01 123 /usr/bin/my prog
7f0000000000-7f0000001000 rwxp 00000000 00:00 0 
7f0000002000-7f0000003000 r-xp 00000000 00:00 0    [anon:jit]
7ffd1000-7ffd3000 r-xp 00000000 00:00 0                          [vdso]
garbage
`
	got := parseMaps([]byte(text))
	want := []profile.Mapping{
		{Start: 0x55d0c0a01000, Limit: 0x55d0c0a02000, Offset: 0x1000, File: "/usr/bin/my prog"},
		{Start: 0x7f0000000000, Limit: 0x7f0000001000, File: ""},
		{Start: 0x7f0000002000, Limit: 0x7f0000003000, File: "[anon:jit]"},
		{Start: 0x7ffd1000, Limit: 0x7ffd3000, File: "[vdso]"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("mapping %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestResolveUnknowns(t *testing.T) {
	p := &Process{cache: NewCache()}
	for i, m := range parseMaps([]byte("1000-2000 r-xp 00000000 00:00 0 \n" +
		"3000-4000 r-xp 00002000 08:01 5 /nonexistent/libgone.so\n" +
		"5000-6000 r-xp 00000000 00:00 0 [vdso]\n")) {
		r := p.open(m)
		r.m.ID = uint64(i + 1)
		r.obj = nil // as if the files could not be read
		p.maps = append(p.maps, r)
	}
	for addr, want := range map[uint64]string{
		0x1010: "[anon]+0x1010",
		0x3010: "libgone.so+0x2010",
		0x5010: "[vdso]+0x10",
		0x9000: "[unknown]+0x9000",
	} {
		_, fr := p.Resolve(addr)
		if len(fr) != 1 || fr[0].Function != want {
			t.Errorf("Resolve(%#x) = %+v, want %s", addr, fr, want)
		}
	}
	// FixLeaf on memory it knows nothing about returns the chain.
	chain := []uint64{0x1010, 0x3010}
	if got := p.FixLeaf(Regs{IP: 0x1010, SP: 0x100}, make([]byte, 64), chain); len(got) != 2 {
		t.Errorf("FixLeaf changed an unknown stack: %v", got)
	}
}

// syntheticProcess is a process with the executable mappings of maps (in
// /proc/PID/maps syntax) and no readable files; its PID (0) has no /proc
// entry, so re-reading its mappings fails and leaves them as they are.
func syntheticProcess(maps string) *Process {
	p := &Process{cache: NewCache()}
	for i, m := range parseMaps([]byte(maps)) {
		r := p.open(m)
		r.m.ID = uint64(i + 1)
		r.obj = nil
		p.maps = append(p.maps, r)
	}
	sort.Slice(p.maps, func(i, j int) bool { return p.maps[i].m.Start < p.maps[j].m.Start })
	return p
}

func TestTrimStack(t *testing.T) {
	p := syntheticProcess("400000-401000 r-xp 00000000 08:01 7 /nonexistent/app\n" +
		"600000-601000 rw-p 00000000 08:01 7 /nonexistent/app\n" + // data: not executable
		"7f0000000000-7f0000001000 r-xp 00000000 00:00 0 \n" + // JIT code
		"7f0000002000-7f0000003000 r-xp 00000000 00:00 0 [anon:jit]\n" +
		"7ffd1000-7ffd3000 r-xp 00000000 00:00 0 [vdso]\n" +
		"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]\n")
	const ascii = 0x6565547055776f71 // "qowUpTee": stack data read as a return address
	for _, tc := range []struct {
		name        string
		stack, want []uint64
	}{
		{"ASCII after the outermost frame",
			[]uint64{0x400100, 0x400200, ascii, 0x400300}, []uint64{0x400100, 0x400200}},
		{"JIT, vDSO and vsyscall are executable",
			[]uint64{0x400100, 0x7f0000000010, 0x7f0000002010, 0x7ffd1010, 0xffffffffff600400, 0x400200},
			[]uint64{0x400100, 0x7f0000000010, 0x7f0000002010, 0x7ffd1010, 0xffffffffff600400, 0x400200}},
		{"heap address",
			[]uint64{0x400100, 0xc000803977, 0x400200}, []uint64{0x400100}},
		{"data of a mapped file",
			[]uint64{0x400100, 0x600010}, []uint64{0x400100}},
		{"return address at the end of the text",
			[]uint64{0x400100, 0x401000}, []uint64{0x400100, 0x401000}},
		{"return address at the start of the text (its call would be before it)",
			[]uint64{0x400100, 0x400000}, []uint64{0x400100}},
		{"an unmapped leaf is the exact pc: kept",
			[]uint64{0x9000, 0x400200, ascii}, []uint64{0x9000, 0x400200}},
		{"leaf only", []uint64{ascii}, []uint64{ascii}},
		{"empty", nil, nil},
	} {
		if got := p.TrimStack(tc.stack); fmt.Sprintf("%x", got) != fmt.Sprintf("%x", tc.want) {
			t.Errorf("%s: TrimStack(%x) = %x, want %x", tc.name, tc.stack, got, tc.want)
		}
	}
}

// TestFPWalkGrows: the frame-pointer walk FixLeaf continues from a restored
// RBP stops where the chain does not grow, and does not start below the
// joining frame's stack pointer (that memory holds the frames already
// unwound, their return addresses included).
func TestFPWalkGrows(t *testing.T) {
	const base = 0x7ff000
	stack := make([]byte, 512)
	put := func(addr, v uint64) { binary.LittleEndian.PutUint64(stack[addr-base:], v) }
	put(0x7ff040, 0x7ff100) // a frame already unwound: saved RBP...
	put(0x7ff048, 0x400aaa) // ...and its return address
	put(0x7ff100, 0x7ff180) // frame A
	put(0x7ff108, 0x400111)
	put(0x7ff180, 0x7ff180) // frame B points to itself
	put(0x7ff188, 0x400222)
	put(0x7ff1c0, 0x7ff1c4) // frame C's next is misaligned
	put(0x7ff1c8, 0x400333)
	u := unwinder{stack: stack, base: base}
	for _, tc := range []struct {
		bp, sp uint64
		want   []uint64
	}{
		{0x7ff100, 0x7ff0f0, []uint64{0x400111, 0x400222}},
		{0x7ff040, 0x7ff0f0, nil}, // below the joining frame's SP
		{0x7ff104, 0x7ff0f0, nil}, // misaligned
		{0x7ff1c0, 0x7ff0f0, []uint64{0x400333}},
	} {
		if got := u.fpWalk(tc.bp, tc.sp); fmt.Sprintf("%x", got) != fmt.Sprintf("%x", tc.want) {
			t.Errorf("fpWalk(%#x, %#x) = %x, want %x", tc.bp, tc.sp, got, tc.want)
		}
	}
}
