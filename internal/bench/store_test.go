package bench

import (
	"context"
	"database/sql"
	"fmt"
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

	// RunsOf reads one benchmark, as history names it, in one unit.
	other := &Run{Commit: "c3", Time: time.Unix(200, 0), Label: "run", Incomplete: true, Results: []Result{
		{Pkg: "p", Name: "B-2", Iters: 1, Values: []Value{{9, "sec/op"}}},
		{Pkg: "p", Name: "A_x-2", Iters: 1, Values: []Value{{9, "sec/op"}}},
		{Pkg: "p", Name: "A-2", Iters: 1, Values: []Value{{4, "sec/op"}, {5, "B/op"}}},
	}}
	if err := st.Save(ctx, other); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"A", "BenchmarkA", "A-2"} {
		runs, err := st.RunsOf(ctx, name, "sec/op")
		if err != nil || len(runs) != 3 {
			t.Fatalf("RunsOf(%s): %d runs, %v", name, len(runs), err)
		}
		var got []float64
		for _, r := range runs {
			for _, res := range r.Results {
				if res.Name != "A-2" {
					t.Errorf("RunsOf(%s) read %s", name, res.Name)
				}
				for _, v := range res.Values {
					if v.Unit != "sec/op" {
						t.Errorf("RunsOf(%s) read unit %s", name, v.Unit)
					}
					got = append(got, v.Value)
				}
			}
		}
		if fmt.Sprint(got) != "[1 1.5 1 1.5 4]" {
			t.Errorf("RunsOf(%s) values %v", name, got)
		}
	}
	if runs, err := st.RunsOf(ctx, "A", ""); err != nil || len(runs[2].Results) != 1 || len(runs[2].Results[0].Values) != 2 {
		t.Errorf("RunsOf every unit: %v", err)
	}
	// An interrupted run is marked.
	if runs, err := st.Runs(ctx); err != nil || runs[0].Incomplete || runs[1].Incomplete || !runs[2].Incomplete {
		t.Errorf("incomplete runs: %v", err)
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

// openAt makes a SQLite database at path of schema version v, as that
// version's wallprof made it, with one run, and closes it.
func openAt(t *testing.T, path string, v int) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, m := range migrations[:v] {
		if _, err := db.Exec(m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Exec(fmt.Sprintf(`PRAGMA user_version = %d;
		INSERT INTO runs (id, commit_hash, dirty, time, machine, toolchain, label) VALUES (1, 'c1', 0, '1970-01-01T00:00:01.000000000Z', 'm', 'go', 'run');
		INSERT INTO benchmarks (id, pkg, name) VALUES (1, 'p', 'A-2');
		INSERT INTO results (id, run_id, benchmark_id, iters, config) VALUES (1, 1, 1, 1, '{}');
		INSERT INTO samples (result_id, unit, value) VALUES (1, 'sec/op', 1);`, v)); err != nil {
		t.Fatal(err)
	}
}

// A database of schema version 1 is migrated: it keeps its runs and gains
// the index of version 2 and the incomplete column of version 3.
func TestBenchStoreMigrateV1(t *testing.T) {
	testMigrate(t, 1)
}

// A database of schema version 2 is migrated: its runs are complete, and
// it stores incomplete ones.
func TestBenchStoreMigrateV2(t *testing.T) {
	testMigrate(t, 2)
}

func testMigrate(t *testing.T, from int) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "old.db")
	openAt(t, path, from)
	st, err := Open(ctx, path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var v, idx int
	db := st.(*sqlStore).db
	db.QueryRow("PRAGMA user_version").Scan(&v)
	db.QueryRow("SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'results_benchmark'").Scan(&idx)
	runs, err := st.RunsOf(ctx, "A", "")
	if v != SchemaVersion || idx != 1 || err != nil || len(runs) != 1 || len(runs[0].Results) != 1 || runs[0].Incomplete {
		t.Fatalf("after migrating from %d: version %d, index %d, %d runs, %v", from, v, idx, len(runs), err)
	}
	if err := st.Save(ctx, &Run{Commit: "c2", Time: time.Unix(2, 0), Incomplete: true}); err != nil {
		t.Fatal(err)
	}
	if runs, err := st.Runs(ctx); err != nil || len(runs) != 2 || runs[0].Incomplete || !runs[1].Incomplete {
		t.Errorf("after migrating from %d, an incomplete run: %v", from, err)
	}
}
