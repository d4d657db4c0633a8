package collect

import "github.com/wallprof/wallprof/internal/profile"

// StackSymbolizer turns the raw stacks of thread snapshots, and other
// addresses of the same processes (a goroutine's saved stack), into
// locations as Build does a recording's samples: user stacks repaired
// (FixLeaf) and trimmed (TrimStack) with the process's resolver, the
// scheduler's own frames cut from an off-CPU kernel stack, every address
// named (an unknown one "module+0xoffset" or "[unknown]+0xADDR"). Locations
// are shared between stacks of the same address.
type StackSymbolizer struct {
	b *builder
}

// NewStackSymbolizer returns a symbolizer that creates a resolver for each
// process the first time it sees it (newResolver may be nil: addresses
// stay unnamed), and names kernel addresses with kernel (may be nil).
func NewStackSymbolizer(newResolver func(pid int) (ProcessResolver, error), kernel KernelResolver) *StackSymbolizer {
	return &StackSymbolizer{b: &builder{p: &profile.Profile{}, a: NewAggregator(newResolver), kernel: kernel,
		locs: map[locKey]*profile.Location{}, maps: map[*profile.Mapping]*profile.Mapping{}}}
}

// Stack returns the stacks of a thread snapshot, innermost first: its kernel
// stack (without the scheduler's frames) and its user stack.
func (s *StackSymbolizer) Stack(t *ThreadSnapshot) (kernel, user []*profile.Location) {
	pid := uint32(t.PID)
	addrs := t.User
	r := s.b.a.Resolver(pid)
	if r != nil && len(addrs) > 0 {
		addrs = r.TrimStack(r.FixLeaf(t.Regs, t.Snap, addrs))
	}
	for i, addr := range t.Kernel {
		kernel = append(kernel, s.b.kernelLoc(addr, i == 0))
	}
	if t.State != Running {
		kernel = trimScheduler(kernel)
	}
	for i, addr := range addrs {
		user = append(user, s.b.userLoc(pid, r, addr, i == 0))
	}
	return kernel, user
}

// Resolver opens the resolver of process pid now, while it exists (it is
// kept for the addresses of that process); nil if it cannot be read.
func (s *StackSymbolizer) Resolver(pid int) ProcessResolver {
	return s.b.a.Resolver(uint32(pid))
}

// User returns the location of a user address of process pid: exact is
// set for a pc where execution stopped or resumes, clear for a return
// address (then the call before it is named).
func (s *StackSymbolizer) User(pid int, addr uint64, exact bool) *profile.Location {
	return s.b.userLoc(uint32(pid), s.b.a.Resolver(uint32(pid)), addr, exact)
}
