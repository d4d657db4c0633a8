package flame

import (
	"time"

	"github.com/wallprof/wallprof/internal/profile"
)

// testProfile builds a small profile with every state, two threads,
// inlined frames, recursion, an unsymbolized address and a name that needs
// escaping in HTML.
func testProfile() *profile.Profile {
	exe := &profile.Mapping{ID: 1, Start: 0x400000, Limit: 0x800000, File: "/usr/bin/server"}
	kern := &profile.Mapping{ID: 2, Start: 0xffffffff81000000, Limit: 0xffffffff83000000, File: "[kernel.kallsyms]", Kernel: true}
	loc := func(id uint64, m *profile.Mapping, addr uint64, fns ...string) *profile.Location {
		l := &profile.Location{ID: id, Mapping: m, Address: addr}
		for _, f := range fns {
			l.Frames = append(l.Frames, profile.Frame{Function: f})
		}
		return l
	}
	ls := []*profile.Location{
		loc(1, exe, 0x401000, "main"),
		loc(2, exe, 0x401100, "handle", "serve"), // handle inlined into serve
		loc(3, exe, 0x401200, "fib"),
		loc(4, exe, 0x401300, "read"),
		loc(5, kern, 0xffffffff81a00000, "do_syscall_64"),
		loc(6, kern, 0xffffffff81b00000, "schedule"),
		loc(7, exe, 0x401400),
		loc(8, exe, 0x401500, "std::vector<int>::push_back<&&>()"),
		loc(9, kern, 0xffffffff81c00000, "io_schedule"),
	}
	st := func(ids ...int) []*profile.Location {
		var s []*profile.Location
		for _, id := range ids {
			s = append(s, ls[id-1])
		}
		return s
	}
	ms := int64(time.Millisecond)
	smp := []*profile.Sample{
		{Stack: st(3, 3, 3, 1), PID: 10, TID: 10, Thread: "server", State: profile.OnCPU, Value: 300 * ms},
		{Stack: st(3, 3, 1), PID: 10, TID: 10, Thread: "server", State: profile.Runnable, Value: 100 * ms},
		{Stack: st(6, 5, 4, 2, 1), PID: 10, TID: 10, Thread: "server", State: profile.Sleeping, Value: 400 * ms},
		{Stack: st(9, 5, 4, 2, 1), PID: 10, TID: 11, Thread: "io worker", State: profile.Disk, Value: 250 * ms},
		{Stack: st(8, 2, 1), PID: 10, TID: 11, Thread: "io worker", State: profile.OnCPU, Value: 150 * ms},
		{Stack: st(2, 1), PID: 10, TID: 11, Thread: "io worker", State: profile.Runnable, Value: 200 * ms},
		{Stack: st(7, 1), PID: 10, TID: 11, Thread: "io worker", State: profile.Other, Value: 50 * ms},
		{Stack: st(6, 5, 4, 2, 1), PID: 10, TID: 11, Thread: "io worker", State: profile.Sleeping, Value: 350 * ms},
		{Stack: st(3, 1), PID: 10, TID: 10, Thread: "server", State: profile.OnCPU, Value: 200 * ms},
	}
	return &profile.Profile{Duration: time.Second, Period: int64(time.Second) / 99, Command: "./server", Locs: ls,
		Mappings: []*profile.Mapping{exe, kern}, Samples: smp}
}
