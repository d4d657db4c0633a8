package bench

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// testStore is the conformance suite every Store passes: runs come back in
// time order with every result, configuration and sample.
func testStore(t *testing.T, open func(t *testing.T) Store) {
	ctx := context.Background()
	st := open(t)
	defer st.Close()
	// c1 is the earlier by 0.5 s; in RFC 3339 text "…:40Z" sorts after "…:40.5Z".
	for i, commit := range []string{"c2", "c1"} {
		r := &Run{Commit: commit, Time: time.Unix(100, int64(500_000_000*(1-i))), Label: "run",
			Results: []Result{
				{Pkg: "p", Name: "A-2", Iters: 7, Config: map[string]string{"goos": "linux", "pkg": "p"}, Values: []Value{{1, "sec/op"}, {3, "B/op"}, {2.5, "widgets/op"}}},
				{Pkg: "p", Name: "A-2", Iters: 8, Config: map[string]string{"goos": "linux", "pkg": "p"}, Values: []Value{{1.5, "sec/op"}}},
			}}
		if err := st.Save(ctx, r); err != nil || r.ID == 0 {
			t.Fatalf("save: %v (id %d)", err, r.ID)
		}
	}
	runs, err := st.Runs(ctx)
	if err != nil || len(runs) != 2 {
		t.Fatalf("%d runs: %v", len(runs), err)
	}
	if runs[0].Commit != "c1" || runs[1].Commit != "c2" {
		t.Errorf("runs not in time order: %s, %s", runs[0].Commit, runs[1].Commit)
	}
	got := runs[0].Samples()
	if v := got[Series{"p", "A-2", "sec/op"}]; len(v) != 2 || v[0] != 1 || v[1] != 1.5 {
		t.Errorf("sec/op samples %v", v)
	}
	if v := got[Series{"p", "A-2", "widgets/op"}]; len(v) != 1 || v[0] != 2.5 {
		t.Errorf("custom unit samples %v", v)
	}
	if r := runs[0].Results[1]; r.Iters != 8 || r.Config["goos"] != "linux" {
		t.Errorf("second result %+v", r)
	}
}

func TestBenchStoreSQLiteConformance(t *testing.T) {
	testStore(t, func(t *testing.T) Store {
		st, err := Open(context.Background(), filepath.Join(t.TempDir(), "b.db"), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
}
