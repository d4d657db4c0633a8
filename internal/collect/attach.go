package collect

// Accounting selects how a recording closes each thread's off-CPU
// intervals (Plan.Accounting).
type Accounting int

const (
	// AccountAuto walks the threads (AccountWalk) where the kernel allows
	// it and the plan is neither system-wide nor read in live windows,
	// else accounts at each thread's resumption where the kernel allows it
	// (sched_exit_tp and schedstat), else at sched_switch.
	AccountAuto Accounting = iota
	// AccountResume accounts at each thread's resumption where the kernel
	// allows it, and fails rather than fall back when its programs will
	// not attach.
	AccountResume
	// AccountSwitch accounts at sched_switch, as kernels without
	// sched_exit_tp or schedstat do (to compare).
	AccountSwitch
	// AccountWalk runs no program at a switch: four times a sampling
	// period task iterators read each target thread's counters and take
	// the stacks of those off CPU (walk_states, walk_stacks). Needs what
	// resume mode needs; without it, as AccountAuto would without it.
	AccountWalk
)

// Features are what the running kernel offers that the choice of programs
// depends on; a Session probes them (Session.features).
type Features struct {
	// ExitTP: the programs on sched_exit_tp (Linux 6.16+) loaded: on_resume,
	// on_task_exit and on_sched_exit.
	ExitTP bool
	// Schedstat: the kernel keeps schedstat's run-queue wait
	// (CONFIG_SCHED_INFO).
	Schedstat bool
	// Kprobes: kprobes can be attached (these VMs have none).
	Kprobes bool
}

// The BPF programs a recording may attach, by their C names.
const (
	progSwitch     = "on_switch"     // tp_btf/sched_switch: switch-time accounting
	progWakeup     = "on_wakeup"     // tp_btf/sched_wakeup: the end of a block, without schedstat
	progWakeupNew  = "on_wakeup_new" // tp_btf/sched_wakeup_new: new threads
	progFork       = "on_fork"       // tp_btf/sched_process_fork: new processes
	progSchedExit  = "on_sched_exit" // tp_btf/sched_exit_tp, switch-time mode: user stacks, unreported switch-ins
	progSysExit    = "on_sys_exit"   // tp_btf/sys_exit: the same without sched_exit_tp
	progResume     = "on_resume"     // tp_btf/sched_exit_tp, resume mode: the whole accounting
	progTaskExit   = "on_task_exit"  // tp_btf/sched_process_exit, resume mode: a thread's last interval
	progTaskFree   = "on_task_free"  // tp_btf/sched_process_free, with on_task_exit: the CPU time of the exit path after it
	progSwitchIn   = "on_switch_in"  // kprobe/finish_task_switch: user stacks right at a switch-in
	progExec       = "on_exec"       // tp_btf/sched_process_exec, following forks: a process's new image
	progDumpOffCPU = "dump_offcpu"   // iter.s/task, at the end (not walking): the stacks of threads still off CPU
	progWalkStates = "walk_states"   // iter.s/task, walk mode: the threads' times and states
	progWalkStacks = "walk_stacks"   // iter.s/task, walk mode: the stacks of those off CPU
	// syscall, walk mode where the kernel runs them: the first pass from a BPF timer
	progWalkTimerStart = "walk_timer_start"
	progWalkTimerStop  = "walk_timer_stop"
)

// Attachment is what a session attaches and how the program is set up:
// Plan.Attachment's answer for a kernel's Features. The on-CPU timer is
// attached in every case.
type Attachment struct {
	// Resume: accounting at each thread's resumption (the program's
	// resume_mode), one program run per context switch.
	Resume bool
	// Walk: accounting by walking the threads every sampling period (the
	// program's walk_mode): no program runs at a switch.
	Walk bool
	// UseRunDelay: an off-CPU interval's runnable part comes from schedstat
	// at the switch-in (the program's use_rd), and sched_wakeup is not
	// probed.
	UseRunDelay bool
	// Tracing are the tp_btf programs to attach, in this order; each must
	// attach.
	Tracing []string
	// KprobeSwitchIn: also try on_switch_in on finish_task_switch; it is
	// optional (a kernel may refuse it).
	KprobeSwitchIn bool
	// Fallback is attached instead when one of Tracing does not attach (a
	// program the kernel loaded but will not attach): nil when nothing else
	// may be tried.
	Fallback *Attachment
}

// mayWalk says whether the plan walks the threads where the kernel allows
// it (AccountWalk, or AccountAuto neither system-wide nor live).
func (p Plan) mayWalk() bool {
	return p.Accounting == AccountWalk || (p.Accounting == AccountAuto && !p.All && !p.Live)
}

// autoFallback gives a, under AccountAuto, the fallback of the plan that
// change makes of p (what to attach when a's programs will not).
func (p Plan) autoFallback(f Features, a Attachment, change func(*Plan)) Attachment {
	if p.Accounting == AccountAuto {
		q := p
		change(&q)
		fb := q.Attachment(f)
		a.Fallback = &fb
	}
	return a
}

// Attachment decides what to attach on a kernel with features f. It is a
// pure function: Session.attach carries it out.
func (p Plan) Attachment(f Features) Attachment {
	if p.NoExitTP {
		f.ExitTP = false // not even loaded; kept here so that the table says so
	}
	if p.mayWalk() && f.ExitTP && f.Schedstat {
		// A kernel that will not run the walker's iterators: resume mode.
		return p.autoFallback(f, Attachment{Walk: true, Tracing: []string{progWakeupNew, progFork, progTaskExit, progTaskFree}},
			func(q *Plan) { q.Live = true })
	}
	if p.Accounting != AccountSwitch && f.ExitTP && f.Schedstat {
		return p.autoFallback(f, Attachment{Resume: true, UseRunDelay: true,
			Tracing: []string{progWakeupNew, progFork, progTaskExit, progTaskFree, progResume}},
			func(q *Plan) { q.Accounting = AccountSwitch })
	}
	// Switch-time accounting (also when AccountResume was asked for on a
	// kernel without sched_exit_tp or schedstat: it only forbids falling
	// back from a resume-mode attach that fails). With sched_exit_tp and schedstat, the
	// runnable part of an off-CPU interval comes from schedstat at the
	// switch-in and sched_wakeup is not probed (unless the plan asks to,
	// to compare).
	rd := f.ExitTP && f.Schedstat && !p.NoRunDelay
	a := Attachment{UseRunDelay: rd, Tracing: []string{progSwitch, progWakeupNew, progFork}}
	if !rd {
		a.Tracing = append(a.Tracing, progWakeup)
	}
	if f.ExitTP {
		// User stacks of blocked threads in their own context at their
		// switch-in; if it will not attach, the way of older kernels.
		a.Tracing = append(a.Tracing, progSchedExit)
		older := f
		older.ExitTP = false
		fb := p.Attachment(older)
		a.Fallback = &fb
		return a
	}
	// Without it: as they leave their syscall (every syscall of the
	// machine runs it) and, where the kernel has kprobes, right at the
	// switch-in.
	a.Tracing = append(a.Tracing, progSysExit)
	a.KprobeSwitchIn = f.Kprobes
	return a
}
