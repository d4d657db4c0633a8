package symbolize

import (
	"bufio"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/wallprof/wallprof/internal/profile"
	"golang.org/x/sys/unix"
)

// startChild starts a test binary in mode and waits for it to print
// "ready". The process is killed at the end of the test.
func startChild(t *testing.T, bin, mode string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, mode)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "ready" {
		t.Fatalf("%s %s: got %q, %v", bin, mode, line, err)
	}
	return cmd
}

// runtimeAddr returns where ELF virtual address va of file is mapped in p.
func runtimeAddr(t *testing.T, p *Process, file string, va uint64) uint64 {
	t.Helper()
	f, err := elf.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var off uint64
	found := false
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_LOAD && va >= prog.Vaddr && va < prog.Vaddr+prog.Filesz {
			off, found = va-prog.Vaddr+prog.Off, true
		}
	}
	if !found {
		t.Fatalf("%#x is in no PT_LOAD of %s", va, file)
	}
	for _, m := range p.Mappings() {
		if m.File == file && off >= m.Offset && off < m.Offset+(m.Limit-m.Start) {
			return m.Start + off - m.Offset
		}
	}
	t.Fatalf("file offset %#x of %s is not mapped executable", off, file)
	return 0
}

func outermost(fr []profile.Frame) string { return fr[len(fr)-1].Function }

func TestLiveProcess(t *testing.T) {
	dir := binaries(t)
	for _, bin := range []string{"cprog-pie", "cprog-nopie"} {
		t.Run(bin, func(t *testing.T) {
			path := filepath.Join(dir, bin)
			cmd := startChild(t, path, "sleep")
			cache := NewCache()
			defer cache.Close()
			p, err := cache.NewProcess(cmd.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			checkMappings(t, p, path)
			lib := filepath.Join(dir, "libshared.so")
			want := map[string]uint64{}
			for _, name := range []string{"read_pipe", "do_sleep", "wait_cond", "static_outer"} {
				want[name] = runtimeAddr(t, p, path, funcSymbols(t, path)[name].Value+1)
			}
			want["shared_helper"] = runtimeAddr(t, p, lib, funcSymbols(t, lib)["shared_helper"].Value+1)

			// Symbolization must keep working after the process is gone.
			cmd.Process.Kill()
			cmd.Wait()
			for name, addr := range want {
				m, fr := p.Resolve(addr)
				if m == nil || len(fr) == 0 || outermost(fr) != name {
					t.Errorf("Resolve(%#x) = %v %+v, want %s", addr, m, fr, name)
				}
			}
			if _, fr := p.Resolve(1); len(fr) != 1 || fr[0].Function != "[unknown]+0x1" {
				t.Errorf("Resolve(1) = %+v, want [unknown]+0x1", fr)
			}
			// A second process of the same binary shares the parsed file.
			cmd2 := startChild(t, path, "sleep")
			p2, err := cache.NewProcess(cmd2.Process.Pid)
			if err != nil {
				t.Fatal(err)
			}
			if a, b := objectOf(p, path), objectOf(p2, path); a == nil || a != b {
				t.Errorf("processes do not share the parsed %s", bin)
			}
		})
	}
}

func objectOf(p *Process, file string) *object {
	for _, r := range p.maps {
		if r.m.File == file {
			return r.obj
		}
	}
	return nil
}

func checkMappings(t *testing.T, p *Process, path string) {
	t.Helper()
	ms := p.Mappings()
	seen := map[string]bool{}
	for i, m := range ms {
		if m.ID == 0 || m.Limit <= m.Start {
			t.Errorf("bad mapping %+v", m)
		}
		if i > 0 && ms[i-1].Start >= m.Start {
			t.Errorf("mappings not sorted")
		}
		base := filepath.Base(m.File)
		seen[base] = true
		if strings.HasPrefix(m.File, "/") && m.BuildID == "" {
			t.Errorf("mapping %s has no build ID", m.File)
		}
	}
	for _, want := range []string{filepath.Base(path), "libshared.so", "libc.so.6", "[vdso]"} {
		if !seen[want] {
			t.Errorf("no executable mapping of %s in %+v", want, ms)
		}
	}
	// Refresh keeps mappings (and their IDs).
	before := map[uint64]*profile.Mapping{}
	for _, m := range ms {
		before[m.ID] = m
	}
	if err := p.Refresh(); err != nil {
		t.Fatal(err)
	}
	for _, m := range p.Mappings() {
		if before[m.ID] != m {
			t.Errorf("Refresh changed mapping %d (%s)", m.ID, m.File)
		}
	}
	// The vDSO is read from the process's memory and symbolized.
	for _, m := range ms {
		if m.File != "[vdso]" {
			continue
		}
		named := false
		for a := m.Start; a < m.Limit; a += 4 {
			if _, fr := p.Resolve(a); strings.Contains(outermost(fr), "clock_gettime") {
				named = true
				break
			}
		}
		if !named && os.Geteuid() == 0 {
			t.Errorf("no address of the vDSO resolves to clock_gettime")
		}
	}
}

// TestTrimStackRefresh: a pc or a return address in code mapped after the
// process was read (exec, dlopen, a JIT) is kept, found by re-reading the
// mappings; they are not re-read again for the next miss of a return
// address within refreshEvery.
func TestTrimStackRefresh(t *testing.T) {
	p, err := NewProcess(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	jit := uint64(uintptr(unsafe.Pointer(&mem[0]))) + 0x10
	leaf := p.Mappings()[0].Start
	const ascii = 0x6565547055776f71
	// The pc itself in code mapped since: the mappings are re-read (at
	// most every leafRefreshEvery).
	time.Sleep(2 * leafRefreshEvery)
	if got := p.TrimStack([]uint64{jit, jit + 0x10, ascii}); len(got) != 2 {
		t.Errorf("TrimStack cut a stack whose pc is in code mapped after NewProcess: got %x, want [%x %x]", got, jit, jit+0x10)
	}
	mem2, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem2)
	jit2 := uint64(uintptr(unsafe.Pointer(&mem2[0]))) + 0x10
	time.Sleep(refreshEvery) // the mappings are due for a refresh
	if got := p.TrimStack([]uint64{leaf, jit2, ascii}); len(got) != 2 {
		t.Errorf("TrimStack cut code mapped after the mappings were read: got %x, want [%x %x]", got, leaf, jit2)
	}
	const heap = 0x10000 // user space, mapped by no one
	p.TrimStack([]uint64{leaf, heap})
	p.mu.RLock()
	look := p.lastLook
	p.mu.RUnlock()
	if got := p.TrimStack([]uint64{leaf, heap}); len(got) != 1 {
		t.Errorf("TrimStack kept an unmapped return address: %x", got)
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if !p.lastLook.Equal(look) {
		t.Errorf("mappings re-read %v after the previous read, less than %v", p.lastLook.Sub(look), refreshEvery)
	}
}
