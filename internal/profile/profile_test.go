package profile

import "testing"

// A program run through a symlink keeps the symlink's name: its mappings
// are renamed, the others (and the kernel's) are not.
func TestNameProgram(t *testing.T) {
	exe := &Mapping{ID: 1, File: "/usr/bin/redis-check-rdb"}
	libc := &Mapping{ID: 2, File: "/usr/lib/x86_64-linux-gnu/libc.so.6"}
	kernel := &Mapping{ID: 3, File: "/usr/bin/redis-check-rdb", Kernel: true} // not a user mapping
	p := &Profile{Mappings: []*Mapping{libc, exe, kernel, nil}}
	p.NameProgram("/usr/bin/redis-server", "/usr/bin/redis-check-rdb")
	if p.Program != "/usr/bin/redis-server" {
		t.Errorf("Program = %q", p.Program)
	}
	if exe.File != "/usr/bin/redis-server" || libc.File != "/usr/lib/x86_64-linux-gnu/libc.so.6" || kernel.File != "/usr/bin/redis-check-rdb" {
		t.Errorf("mappings after NameProgram: %q, %q, %q", exe.File, libc.File, kernel.File)
	}
	if got := (&Location{Mapping: exe, Address: 0x10}).UnknownName(); got != "redis-server+0x10" {
		t.Errorf("unsymbolized frame of the program = %q", got)
	}
	// Unknown: nothing changes.
	q := &Profile{Mappings: []*Mapping{{File: "/bin/x"}}}
	q.NameProgram("", "/bin/x")
	if q.Program != "" || q.Mappings[0].File != "/bin/x" {
		t.Errorf("NameProgram with no path changed the profile: %q, %q", q.Program, q.Mappings[0].File)
	}
}
