package symbolize

import (
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
