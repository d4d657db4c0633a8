package goroutines

import (
	"testing"

	"github.com/wallprof/wallprof/internal/groundtruth"
)

func TestSmoke(t *testing.T) {
	requireRoot(t)
	bin := groundtruth.BuildGo(t, groundtruth.WorkloadDir(t, "goparked"), true, "")
	w := startWorkload(t, bin)
	r, err := Open(w.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s, err := r.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s allgs via %s; %d allgs, dropped %d retried %d", r.GoVersion(), r.AllgsSource(), s.AllGs, s.Dropped, s.Retried)
	for _, g := range s.Goroutines {
		_, _, name, _ := r.Table().FuncRange(g.StartPC - r.LoadBias())
		_, _, cr, _ := r.Table().FuncRange(g.GoPC - 1 - r.LoadBias())
		t.Logf("g%d %s %q tid=%d sys=%v start=%s creator=%s depth=%d", g.ID, g.Status, g.WaitReason, g.TID, g.System, name, cr, len(g.Stack))
		for _, pc := range g.Stack {
			_, _, fn, _ := r.Table().FuncRange(pc - 1 - r.LoadBias())
			t.Logf("     %s", fn)
		}
	}
	t.Log(w.alive(t))
}
