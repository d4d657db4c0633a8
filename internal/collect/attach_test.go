package collect

import (
	"fmt"
	"reflect"
	"testing"
)

// The table of programs for each kind of kernel and plan, without root.
func TestPlanAttachment(t *testing.T) {
	modern := Features{ExitTP: true, Schedstat: true}
	switchWithExitTP := Attachment{UseRunDelay: true,
		Tracing: []string{progSwitch, progWakeupNew, progFork, progSchedExit}}
	older := Attachment{Tracing: []string{progSwitch, progWakeupNew, progFork, progWakeup, progSysExit}}
	olderKprobes := older
	olderKprobes.KprobeSwitchIn = true
	switchWithExitTP.Fallback = &older
	resume := Attachment{Resume: true, UseRunDelay: true, Tracing: []string{progWakeupNew, progFork, progTaskExit, progTaskFree, progResume}}
	resumeAuto := resume
	resumeAuto.Fallback = &switchWithExitTP

	walk := Attachment{Walk: true, Tracing: []string{progWakeupNew, progFork, progTaskExit, progTaskFree}}
	walkAuto := walk
	walkAuto.Fallback = &resumeAuto

	noRD := Attachment{Tracing: []string{progSwitch, progWakeupNew, progFork, progWakeup, progSchedExit}, Fallback: &older}
	for _, c := range []struct {
		name string
		plan Plan
		f    Features
		want Attachment
	}{
		{"6.16+ with schedstat: no program per switch, one if the walker will not attach, switch-time if that will not", Plan{}, modern, walkAuto},
		{"read in live windows (top, the agent): one program per switch", Plan{Live: true}, modern, resumeAuto},
		{"system-wide: one program per switch", Plan{All: true}, modern, resumeAuto},
		{"WALLPROF_ACCOUNTING=walk: no fall back", Plan{Accounting: AccountWalk}, modern, walk},
		{"WALLPROF_ACCOUNTING=walk, system-wide: walked all the same", Plan{Accounting: AccountWalk, All: true}, modern, walk},
		{"WALLPROF_ACCOUNTING=walk on an older kernel: switch-time", Plan{Accounting: AccountWalk}, Features{Schedstat: true}, older},
		{"WALLPROF_RESUME=1: no fall back", Plan{Accounting: AccountResume}, modern, resume},
		{"WALLPROF_RESUME=1 on an older kernel: switch-time", Plan{Accounting: AccountResume}, Features{Schedstat: true}, older},
		{"WALLPROF_RESUME=0: switch-time with sched_exit_tp", Plan{Accounting: AccountSwitch}, modern, switchWithExitTP},
		{"no schedstat: wake-ups probed", Plan{}, Features{ExitTP: true}, noRD},
		{"WALLPROF_RUN_DELAY=0: wake-ups probed", Plan{Accounting: AccountSwitch, NoRunDelay: true}, modern, noRD},
		{"before 6.16: sys_exit", Plan{}, Features{Schedstat: true}, older},
		{"before 6.16, with kprobes: and finish_task_switch", Plan{}, Features{Schedstat: true, Kprobes: true}, olderKprobes},
		{"WALLPROF_EXIT_TP=0: as before 6.16", Plan{NoExitTP: true}, modern, older},
	} {
		if got := c.plan.Attachment(c.f); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %s\nwant %s", c.name, describe(got), describe(c.want))
		}
	}
}

// describe prints an attachment and its fallbacks.
func describe(a Attachment) string {
	s := ""
	for p := &a; p != nil; p = p.Fallback {
		if s != "" {
			s += " else "
		}
		s += fmt.Sprintf("{walk %t resume %t rd %t %v kprobe %t}", p.Walk, p.Resume, p.UseRunDelay, p.Tracing, p.KprobeSwitchIn)
	}
	return s
}
