// Package symbolize turns addresses into function names, files and lines.
//
// Contract (the collector relies on it):
//   - NewProcess(pid) is called while the process is alive. It reads
//     /proc/PID/maps and opens every executable mapping's file right away
//     (through /proc/PID/map_files, falling back to /proc/PID/root/PATH) so
//     that symbolization still works after the process exits and for
//     processes in containers.
//   - Resolve looks up exactly the address it is given; callers pass
//     "return address - 1" for every frame but the leaf.
//   - Names are never truncated. An address that cannot be named resolves to
//     one frame "module+0xoffset" (module = file base name, offset = file
//     offset), or "[unknown]+0xADDR" when no mapping covers it. Never dropped.
//   - Parsed files are cached by build ID (or device+inode) and shared across
//     processes: create one Cache per run and call Cache.NewProcess for each
//     process (NewProcess alone uses a private cache).
//   - Frames come from .gopclntab for Go code, else DWARF (line table and
//     inlined calls), else .symtab/.dynsym and MiniDebugInfo
//     (.gnu_debugdata). Separate debug files are found by build ID or
//     .gnu_debuglink (with its CRC) in the process's root (/proc/PID/root,
//     held open so that it works after the process exits), then by build
//     ID in ours, then, once Cache.UseDebuginfod was called (after the
//     recording: never while the unwinder runs), from debuginfod. C++ and Rust names are
//     demangled with parameters; Rust legacy hashes are dropped. DWARF's
//     record of a function inlined into itself from its own declaration
//     line (GCC's partial inlining: the split-off tail brought back) is
//     not a call and adds no frame; inlined recursion does.
//   - The vDSO is read from the process's memory. Anonymous executable
//     memory (JIT code) is named from the process's perf map
//     (/tmp/perf-NSPID.map in its mount namespace, NSPID its PID there) and
//     the jitdump files it maps, re-read when they grew and an address is
//     not found (at most every 100 ms); else it resolves to "[anon]+0xADDR"
//     (absolute address). Resolve has no sample time: the latest code
//     loaded at an address names it (ResolveAt takes the time).
//   - User stacks end at their last plausible return address: TrimStack cuts
//     a stack before the first return address outside every executable
//     mapping of the process (anonymous executable memory and the vDSO
//     count as executable), re-reading /proc/PID/maps first in case the
//     code was mapped since: at most every 100 ms, or every 1 ms when the
//     pc itself is in no mapping (an exec). The collector applies it to
//     every user stack on arrival, after FixLeaf. Frame-pointer walks done
//     here (FixLeaf's) also stop where the chain does not grow.
//   - Kernel addresses are resolved by Kernel (LoadKernel, /proc/kallsyms).
package symbolize

import "github.com/wallprof/wallprof/internal/profile"

// Regs are the user-space registers of a thread at the moment its stack was
// taken.
type Regs struct {
	IP, SP, BP uint64
}

// Resolver is what the collector needs from a process symbolizer.
type Resolver interface {
	// Resolve returns the mapping containing addr (nil if none) and the
	// frames at addr, innermost first.
	Resolve(addr uint64) (*profile.Mapping, []profile.Frame)
	// FixLeaf repairs the innermost frames of a frame-pointer stack. chain
	// is the frame-pointer walk (chain[0] == regs.IP); stack holds user stack
	// memory starting at regs.SP. Frames that have not set up a frame
	// pointer at their pc are unwound with .eh_frame (native code) or the
	// .gopclntab SP-delta table (Go), and the caller frames the frame-pointer
	// walk skipped are spliced in. The result is leaf first.
	FixLeaf(regs Regs, stack []byte, chain []uint64) []uint64
	// TrimStack cuts a user stack (leaf first) before its first return
	// address that is in no executable mapping of the process: from there
	// on, a frame-pointer walk read data, not return addresses. The leaf is
	// kept.
	TrimStack(stack []uint64) []uint64
}
