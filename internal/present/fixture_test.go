package present

import (
	"time"

	"github.com/wallprof/wallprof/internal/profile"
)

// longCxx is a real-world-length C++ template name: reports must not cut it.
const longCxx = "std::vector<std::pair<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, int>, " +
	"std::allocator<std::pair<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, int> > >" +
	"::_M_realloc_insert<std::pair<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, int> >" +
	"(__gnu_cxx::__normal_iterator<std::pair<std::__cxx11::basic_string<char>, int>*, std::vector<std::pair<std::__cxx11::basic_string<char>, int> > >, " +
	"std::pair<std::__cxx11::basic_string<char>, int>&&)"

// testProfile builds a profile exercising every part of the model: several
// threads and states, inlined frames, recursion, a kernel mapping, an
// unsymbolized address, lost events, cost and notes.
func testProfile() *profile.Profile {
	ms := []*profile.Mapping{
		{ID: 1, Start: 0x400000, Limit: 0x800000, File: "/usr/bin/server", BuildID: "5f1c0ffee0123456789abcdef"},
		{ID: 2, Start: 0x7f0000000000, Limit: 0x7f0000200000, Offset: 0x28000, File: "/lib/x86_64-linux-gnu/libc.so.6", BuildID: "b1d2c3"},
		{ID: 3, Start: 0xffffffff81000000, Limit: 0xffffffff83000000, File: "[kernel.kallsyms]", BuildID: "6b65726e656c", Kernel: true},
		{ID: 4, Start: 0xffffffffc0000000, Limit: 0xffffffffc0100000, File: "/lib/modules/6.8.0/ext4.ko", Kernel: true},
	}
	loc := func(id uint64, m *profile.Mapping, addr uint64, frames ...profile.Frame) *profile.Location {
		return &profile.Location{ID: id, Mapping: m, Address: addr, Frames: frames}
	}
	ls := []*profile.Location{
		loc(1, ms[0], 0x401000, profile.Frame{Function: "main.main", File: "/src/server/main.go", Line: 10}),
		// main.handle inlined into main.serve: innermost first.
		loc(2, ms[0], 0x401100,
			profile.Frame{Function: "main.handle", File: "/src/server/handler.go", Line: 42},
			profile.Frame{Function: "main.serve", File: "/src/server/server.go", Line: 88}),
		loc(3, ms[0], 0x401200, profile.Frame{Function: "main.fib", File: "/src/server/main.go", Line: 20}),
		loc(4, ms[1], 0x7f0000010000, profile.Frame{Function: "__libc_read", File: "../sysdeps/unix/sysv/linux/read.c", Line: 26}),
		loc(5, ms[2], 0xffffffff81a00000, profile.Frame{Function: "do_syscall_64", File: "arch/x86/entry/common.c", Line: 50}),
		loc(6, ms[2], 0xffffffff81b00000, profile.Frame{Function: "schedule", File: "kernel/sched/core.c", Line: 6500}),
		loc(7, ms[1], 0x7f0000001234), // no symbol
		loc(8, ms[0], 0x401300, profile.Frame{Function: longCxx, File: "/usr/include/c++/13/bits/vector.tcc", Line: 445}),
		loc(9, ms[3], 0xffffffffc0001000, profile.Frame{Function: "ext4_file_read_iter", File: "fs/ext4/file.c", Line: 131}),
		loc(10, ms[0], 0x401400, profile.Frame{Function: "pkg.Map[go;shape]", File: "/src/pkg/map.go", Line: 7}),
	}
	st := func(ids ...int) []*profile.Location {
		var s []*profile.Location
		for _, id := range ids {
			s = append(s, ls[id-1])
		}
		return s
	}
	const ms1 = int64(time.Millisecond)
	smp := []*profile.Sample{
		{Stack: st(3, 3, 3, 1), PID: 100, TID: 100, Thread: "server", State: profile.OnCPU, Value: 30 * ms1},
		{Stack: st(6, 5, 4, 2, 1), PID: 100, TID: 100, Thread: "server", State: profile.Sleeping, Value: 200 * ms1,
			Labels: map[string]string{"goroutine": "17", "wait reason": "chan receive"}},
		{Stack: st(2, 1), PID: 100, TID: 101, Thread: "worker pool 1", State: profile.Runnable, Value: 50 * ms1},
		{Stack: st(9, 5, 4, 2, 1), PID: 100, TID: 101, Thread: "worker pool 1", State: profile.Disk, Value: 120 * ms1},
		{Stack: st(8, 2, 1), PID: 100, TID: 101, Thread: "worker pool 1", State: profile.OnCPU, Value: 40 * ms1},
		{Stack: st(7, 1), PID: 100, TID: 102, Thread: "gc", State: profile.Other, Value: 10 * ms1},
		{Stack: st(3, 3, 3, 1), PID: 100, TID: 100, Thread: "server", State: profile.OnCPU, Value: 20 * ms1},
		{Stack: st(10, 1), PID: 100, TID: 102, Thread: "gc", State: profile.OnCPU, Value: 5 * ms1},
	}
	d := time.Millisecond
	threads := []*profile.Thread{
		{PID: 100, TID: 100, Name: "server", End: 1000 * d, Time: [profile.NumStates]time.Duration{55 * d, 5 * d, 940 * d, 0, 0}, Samples: 3},
		{PID: 100, TID: 101, Name: "worker pool 1", End: 1000 * d, Time: [profile.NumStates]time.Duration{41 * d, 49 * d, 780 * d, 122 * d, 8 * d}, Samples: 3},
		{PID: 100, TID: 102, Name: "gc", Start: 100 * d, End: 400 * d, Exited: true, Time: [profile.NumStates]time.Duration{6 * d, 1 * d, 283 * d, 0, 10 * d}, Samples: 2},
	}
	return &profile.Profile{
		Start:    time.Unix(1767225600, 123456789).UTC(),
		Duration: time.Second,
		Period:   int64(time.Second) / 99,
		Command:  `./server -addr ":8080"`,
		Mappings: ms,
		Locs:     ls,
		Samples:  smp,
		Threads:  threads,
		Lost:     map[string]uint64{"ringbuf-full": 3, "stack-read-failed": 1, "odd cause=x": 2},
		Cost:     &profile.Cost{ProfilerCPU: 12 * d, StartupCPU: 48 * d, BPFRunTime: 3 * d, BPFRunCount: 12345, TargetCPU: 1200 * d},
		Notes:    []string{"target exited with status 0", "a note\nover two lines"},
	}
}
