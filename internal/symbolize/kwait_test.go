package symbolize

import "testing"

func TestKernelWaitFunctions(t *testing.T) {
	for _, c := range []struct {
		fn                    string
		block, sched, waiting bool
	}{
		{"do_nanosleep", true, false, true},
		{"futex_do_wait", true, false, true},
		{"finish_task_switch.isra.0", false, true, true},
		{"irqentry_exit_to_user_mode", false, false, true},
		{"_raw_spin_unlock_irqrestore", false, false, false},
		{"burn_for", false, false, false},
	} {
		if got := IsKernelBlock(c.fn); got != c.block {
			t.Errorf("IsKernelBlock(%q) = %v", c.fn, got)
		}
		if got := IsKernelScheduler(c.fn); got != c.sched {
			t.Errorf("IsKernelScheduler(%q) = %v", c.fn, got)
		}
		if got := IsKernelWait(c.fn); got != c.waiting {
			t.Errorf("IsKernelWait(%q) = %v", c.fn, got)
		}
	}
}
