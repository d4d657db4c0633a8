// Package latency measures how long calls of Go functions take in a running
// process, with uprobes at each function's entry and at every RET
// instruction (never uretprobes, which corrupt goroutine stacks).
//
// Contract:
//   - Resolve is pure: it reads the executable (its .gopclntab, so stripped
//     binaries work, and its machine code) and returns, per function, the
//     file offsets to probe; it refuses, with one sentence, a function that
//     does not exist, is inlined everywhere, or has no RET. Only amd64 Go
//     binaries built by Go 1.17 or later (register ABI: g in r14) are
//     supported.
//   - Start (session.go) loads the BPF programs of ./bpf, attaches the
//     probes to one process and reads the in-kernel histograms; Stop
//     detaches. Only the outermost call of a recursion is timed; calls that
//     never return (panics, exits) are counted as abandoned, not timed.
//   - Hist (hist.go) is the histogram the kernel fills: below 64 ns one
//     bucket per nanosecond, above each power of two split into 64
//     sub-buckets, so a percentile is exact to within 1/128 of its value.
package latency

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/arch/x86/x86asm"

	"github.com/wallprof/wallprof/internal/goruntime/rtlayout"
	"github.com/wallprof/wallprof/internal/symbolize/gopclntab"
)

// MaxFuncs is how many functions one session measures (the BPF maps' size).
const MaxFuncs = 8

// ErrRefused is wrapped by the errors that say a function cannot be
// measured; their text is one sentence for the user.
var ErrRefused = errors.New("cannot measure")

// Func is one function to probe.
type Func struct {
	Name       string   // full Go name, "main.(*Index).Search"
	Entry      uint64   // virtual address of the entry
	Probe      uint64   // where the entry probe goes: after the stack check (AfterStackCheck)
	Rets       []uint64 // virtual addresses of its RET instructions
	EntryOff   uint64   // file offsets of the same, for uprobes
	RetOffs    []uint64 //
	InlinedToo []string // functions holding inlined copies, which are not measured

	// Native functions (Lib != ""): a uprobe and a uretprobe on Symbol in
	// the library at Lib (a path under /proc/PID/root).
	Lib, Symbol string
}

// Binary is what Resolve learned about the executable.
type Binary struct {
	Path       string
	GoVersion  string
	GoidOff    uint32 // offset of g.goid
	StackHiOff uint32 // offset of g.stack.hi
	SeqOff     uint32 // offset of g.trackingSeq (seq.go); 0 if not known
	GMOff      uint32 // offset of g.m
	MCurgOff   uint32 // offset of m.curg
	Funcs      []Func
}

// Resolve finds the functions called names in process pid, whose
// executable is at exe (such as /proc/PID/exe): Go functions by their full
// name in the executable, native functions as "lib:symbol" (IsNative) in
// the libraries the process has mapped.
func Resolve(exe string, pid int, names []string) (*Binary, error) {
	b := &Binary{Path: exe}
	var goNames []string
	for _, n := range names {
		if !IsNative(n) {
			goNames = append(goNames, n)
		}
	}
	var gb *goBinary
	if len(goNames) > 0 {
		var err error
		if gb, err = openGo(exe); err != nil {
			return nil, err
		}
		defer gb.f.Close()
		b.GoVersion, b.GoidOff, b.StackHiOff, b.SeqOff = gb.version, gb.goidOff, gb.stackHiOff, gb.seqOff
		b.GMOff, b.MCurgOff = gb.gmOff, gb.mcurgOff
	}
	for _, name := range names {
		var fn Func
		var err error
		if IsNative(name) {
			fn, err = resolveNative(pid, name)
		} else {
			fn, err = resolveFunc(gb.ef, gb.tab, name)
		}
		if err != nil {
			return nil, err
		}
		b.Funcs = append(b.Funcs, fn)
	}
	return b, nil
}

type goBinary struct {
	f                   *os.File
	ef                  *elf.File
	tab                 *gopclntab.Table
	version             string
	goidOff, stackHiOff uint32
	seqOff              uint32
	gmOff, mcurgOff     uint32
}

func openGo(path string) (*goBinary, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	gb, err := readGo(f, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	return gb, nil
}

func readGo(f *os.File, path string) (*goBinary, error) {
	ef, err := elf.NewFile(f)
	if err != nil {
		return nil, fmt.Errorf("%s: not an ELF executable: %w", path, err)
	}
	if ef.Machine != elf.EM_X86_64 {
		return nil, fmt.Errorf("%w: %s is not an amd64 executable (only amd64 is supported)", ErrRefused, path)
	}
	tab, err := gopclntab.Open(ef)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not a Go executable (%v)", ErrRefused, path, err)
	}
	ver, err := rtlayout.GoVersion(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if m := rtlayout.Minor(ver); m == "" || minorNumber(m) < 17 {
		return nil, fmt.Errorf("%w: %s was built by %s, and only Go 1.17 and later keep g in a register", ErrRefused, path, ver)
	}
	layout, err := rtlayout.Load(ef, ver)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &goBinary{f: f, ef: ef, tab: tab, version: ver,
		goidOff: uint32(layout.Offsets.GGoid), stackHiOff: uint32(layout.Offsets.GStackHi),
		seqOff: TrackingSeqOffset(ef, ver),
		gmOff:  uint32(layout.Offsets.GM), mcurgOff: uint32(layout.Offsets.MCurg)}, nil
}

func minorNumber(m string) int {
	n := 0
	for _, c := range strings.TrimPrefix(m, "go1.") {
		n = n*10 + int(c-'0')
	}
	return n
}

func resolveFunc(ef *elf.File, tab *gopclntab.Table, name string) (Func, error) {
	entry, end, ok := tab.FuncByName(name)
	inl := tab.InlinedInto(name)
	if !ok {
		if len(inl) > 0 {
			return Func{}, fmt.Errorf("%w: %s is inlined everywhere it is called (into %s), and inlined calls cannot be measured", ErrRefused, name, list(inl))
		}
		return Func{}, fmt.Errorf("%w: no function %s in the program", ErrRefused, name)
	}
	if asm, _ := tab.IsAssembly(entry); asm {
		return Func{}, fmt.Errorf("%w: %s is written in assembly, where the goroutine is not in a register, and cannot be measured", ErrRefused, name)
	}
	code, err := readText(ef, entry, end)
	if err != nil {
		return Func{}, fmt.Errorf("%s: %w", name, err)
	}
	rets, err := FindRets(code, entry)
	if err != nil {
		return Func{}, fmt.Errorf("%w: %s: %v", ErrRefused, name, err)
	}
	if len(rets) == 0 {
		return Func{}, fmt.Errorf("%w: %s has no RET instruction (it never returns normally)", ErrRefused, name)
	}
	fn := Func{Name: name, Entry: entry, Probe: AfterStackCheck(code, entry), Rets: rets, InlinedToo: inl}
	if fn.EntryOff, err = fileOffset(ef, fn.Probe); err != nil {
		return Func{}, err
	}
	for _, r := range rets {
		off, err := fileOffset(ef, r)
		if err != nil {
			return Func{}, err
		}
		fn.RetOffs = append(fn.RetOffs, off)
	}
	return fn, nil
}

func list(names []string) string {
	if len(names) > 3 {
		return strings.Join(names[:3], ", ") + fmt.Sprintf(" and %d more", len(names)-3)
	}
	return strings.Join(names, ", ")
}

// FindRets decodes the amd64 code of one function (starting at address pc)
// and returns the addresses of its RET instructions. The Go compiler puts
// no data in functions, so a linear decode is exact; trailing INT3 padding
// ends it, and an undecodable instruction is an error.
func FindRets(code []byte, pc uint64) ([]uint64, error) {
	var rets []uint64
	for off := 0; off < len(code); {
		inst, err := x86asm.Decode(code[off:], 64)
		if err != nil || inst.Len == 0 || inst.Op == 0 {
			if allPadding(code[off:]) {
				break
			}
			return nil, fmt.Errorf("cannot decode the instruction at %#x", pc+uint64(off))
		}
		if inst.Op == x86asm.RET {
			rets = append(rets, pc+uint64(off))
		}
		off += inst.Len
	}
	return rets, nil
}

// AfterStackCheck returns where a function's entry probe goes: right after
// its prologue's stack check (CMP of the stack pointer, or of R12 computed
// from it, with g.stackguard0 at 16(R14), then a conditional jump to the
// morestack call), or the entry if it has none (NOSPLIT functions). At the
// entry itself the probe would fire again each time the function is
// re-entered after morestack, which happens when the stack grows and when
// the scheduler asks the goroutine to yield; after the check it fires once
// per call. Neither instruction moves the stack pointer, so the frame's
// distance from the stack top is the same as at the entry and at each RET.
func AfterStackCheck(code []byte, pc uint64) uint64 {
	off := 0
	for n := 0; n < 8 && off < len(code); n++ {
		inst, err := x86asm.Decode(code[off:], 64)
		if err != nil || inst.Len == 0 {
			break
		}
		off += inst.Len
		if inst.Op != x86asm.CMP || !isStackguard(inst.Args[1]) || off >= len(code) {
			continue
		}
		next, err := x86asm.Decode(code[off:], 64)
		if err == nil && isCondJump(next.Op) {
			return pc + uint64(off+next.Len)
		}
		break
	}
	return pc
}

func isStackguard(a x86asm.Arg) bool {
	m, ok := a.(x86asm.Mem)
	return ok && m.Base == x86asm.R14 && m.Index == 0 && m.Disp == 16
}

func isCondJump(op x86asm.Op) bool {
	switch op {
	case x86asm.JBE, x86asm.JB, x86asm.JA, x86asm.JAE, x86asm.JLE, x86asm.JL:
		return true
	}
	return false
}

func allPadding(b []byte) bool {
	for _, c := range b {
		if c != 0xcc && c != 0x00 {
			return false
		}
	}
	return true
}

// readText returns the bytes at [start, end) of the executable section
// holding them.
func readText(ef *elf.File, start, end uint64) ([]byte, error) {
	if end <= start || end-start > 1<<24 {
		return nil, fmt.Errorf("bad function range %#x-%#x", start, end)
	}
	for _, s := range ef.Sections {
		if s.Type == elf.SHT_PROGBITS && s.Flags&elf.SHF_EXECINSTR != 0 && start >= s.Addr && end <= s.Addr+s.Size {
			b := make([]byte, end-start)
			if _, err := s.ReadAt(b, int64(start-s.Addr)); err != nil {
				return nil, fmt.Errorf("read code at %#x: %w", start, err)
			}
			return b, nil
		}
	}
	return nil, fmt.Errorf("no executable section holds %#x-%#x", start, end)
}

// fileOffset converts a virtual address to its offset in the file, which
// is what a uprobe is attached at.
func fileOffset(ef *elf.File, addr uint64) (uint64, error) {
	for _, p := range ef.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && addr >= p.Vaddr && addr < p.Vaddr+p.Filesz {
			return addr - p.Vaddr + p.Off, nil
		}
	}
	return 0, fmt.Errorf("address %#x is in no executable segment", addr)
}
