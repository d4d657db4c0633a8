package symbolize

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// threadSnapshot is what a stack sampler sees: registers, a copy of the
// stack from SP, and the kernel's frame-pointer walk.
type threadSnapshot struct {
	regs  Regs
	stack []byte
	chain []uint64
}

// waitSyscall waits until thread tid of pid is blocked in syscall nr
// (per /proc/PID/task/TID/syscall).
func waitSyscall(t *testing.T, pid, tid int, nrs ...int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/syscall", pid, tid))
		if f := strings.Fields(string(data)); len(f) > 0 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				for _, nr := range nrs {
					if n == nr {
						return
					}
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("thread %d never blocked in syscalls %v", tid, nrs)
}

// snapshot stops thread tid with ptrace to read its registers (the ground
// truth a BPF sampler would get), copies stackSize bytes of its stack and
// walks its frame pointers through /proc/PID/mem like the kernel does.
func snapshot(t *testing.T, pid, tid, stackSize int) threadSnapshot {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.PtraceAttach(tid); err != nil {
		requires(t, false, fmt.Sprintf("ptrace is not permitted (%v): run as root", err))
	}
	defer unix.PtraceDetach(tid)
	var ws unix.WaitStatus
	if _, err := unix.Wait4(tid, &ws, unix.WALL, nil); err != nil {
		t.Fatalf("wait for thread %d: %v", tid, err)
	}
	var r unix.PtraceRegs
	if err := unix.PtraceGetRegs(tid, &r); err != nil {
		t.Fatalf("get registers of thread %d: %v", tid, err)
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		requires(t, false, fmt.Sprintf("cannot read process memory: %v", err))
	}
	defer mem.Close()
	s := threadSnapshot{regs: Regs{IP: r.Rip, SP: r.Rsp, BP: r.Rbp}, stack: make([]byte, stackSize)}
	if _, err := mem.ReadAt(s.stack, int64(r.Rsp)); err != nil {
		t.Fatalf("read stack: %v", err)
	}
	s.chain = []uint64{r.Rip}
	word := func(addr uint64) (uint64, bool) {
		var b [8]byte
		if _, err := mem.ReadAt(b[:], int64(addr)); err != nil {
			return 0, false
		}
		return binary.LittleEndian.Uint64(b[:]), true
	}
	for bp := r.Rbp; bp != 0 && len(s.chain) < 64; {
		ra, ok1 := word(bp + 8)
		next, ok2 := word(bp)
		if !ok1 || !ok2 || ra == 0 {
			break
		}
		s.chain = append(s.chain, ra)
		if next <= bp {
			break
		}
		bp = next
	}
	return s
}

// symbolizeStack names each pc (return addresses looked up at pc-1) by its
// outermost frame and mapping base name.
func symbolizeStack(p *Process, pcs []uint64) (names, modules []string) {
	for i, pc := range pcs {
		if i > 0 {
			pc--
		}
		m, fr := p.Resolve(pc)
		names = append(names, outermost(fr))
		mod := ""
		if m != nil {
			mod = filepath.Base(m.File)
		}
		modules = append(modules, mod)
	}
	return names, modules
}

func TestFixLeafLive(t *testing.T) {
	requires(t, os.Geteuid() == 0, "ptrace of a child for ground-truth registers needs root here")
	bin := filepath.Join(binaries(t), "cprog-fp")
	for _, tc := range []struct {
		mode, caller string
		syscalls     []int
		thread       bool // the blocked thread is not the main thread
	}{
		{"pipe", "read_pipe", []int{unix.SYS_READ}, false},
		{"tpipe", "read_pipe", []int{unix.SYS_READ}, true},
		{"sleep", "do_sleep", []int{unix.SYS_NANOSLEEP, unix.SYS_CLOCK_NANOSLEEP}, false},
		{"cond", "wait_cond", []int{unix.SYS_FUTEX}, true},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			cmd := startChild(t, bin, tc.mode)
			pid := cmd.Process.Pid
			tid := pid
			if tc.thread {
				tid = otherThread(t, pid)
			}
			waitSyscall(t, pid, tid, tc.syscalls...)
			p, err := NewProcess(pid)
			if err != nil {
				t.Fatal(err)
			}
			s := snapshot(t, pid, tid, 512)
			chainNames, _ := symbolizeStack(p, s.chain)
			for _, n := range chainNames {
				if n == tc.caller {
					t.Fatalf("the frame-pointer chain already has %s (%v): this test proves nothing", tc.caller, chainNames)
				}
			}
			fixed := p.FixLeaf(s.regs, s.stack, s.chain)
			names, mods := symbolizeStack(p, fixed)
			t.Logf("chain %v\nfixed %v", chainNames, names)
			if mods[0] != "libc.so.6" {
				t.Fatalf("leaf is in %s, not libc: %v", mods[0], names)
			}
			i := 0
			for i < len(mods) && mods[i] == "libc.so.6" {
				i++
			}
			if i == len(names) || names[i] != tc.caller {
				t.Errorf("after the libc frames comes %v, want %s; fixed stack %v", names[i:], tc.caller, names)
			}
			if !contains(names, "main") && !contains(names, "start_thread") && !contains(names, "cond_thread") {
				t.Errorf("fixed stack lost the outer frames: %v", names)
			}
			// cprog has no recursion: no function twice in a row, inline
			// frames included (glibc's read() was, from DWARF's record of
			// its partial inlining, with libc6-dbg installed).
			if all := allFrames(p, fixed); hasAdjacentRepeat(all) {
				t.Errorf("a function appears twice in a row: %v", all)
			}
		})
	}
}

// allFrames names every frame of pcs, inline frames included, outermost
// last (return addresses looked up at pc-1).
func allFrames(p *Process, pcs []uint64) []string {
	var out []string
	for i, pc := range pcs {
		if i > 0 {
			pc--
		}
		_, fr := p.Resolve(pc)
		for _, f := range fr {
			out = append(out, f.Function)
		}
	}
	return out
}

func hasAdjacentRepeat(names []string) bool {
	for i := 1; i < len(names); i++ {
		if names[i] == names[i-1] {
			return true
		}
	}
	return false
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func otherThread(t *testing.T, pid int) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		for _, e := range ents {
			if tid, err := strconv.Atoi(e.Name()); err == nil && tid != pid {
				return tid
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("process %d has no second thread", pid)
	return 0
}
