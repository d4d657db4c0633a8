package bench

import (
	"context"
	"testing"
	"time"

	"github.com/wallprof/wallprof/internal/pgtest"
)

func startPostgres(t *testing.T) string { return pgtest.Start(t) }

func TestBenchStorePostgresConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("starts Postgres")
	}
	url := startPostgres(t)
	ctx := context.Background()
	testStore(t, func(t *testing.T) Store {
		st, err := Open(ctx, url, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return st
	})
	// Reopening migrates nothing; a newer schema is refused.
	st, err := Open(ctx, url, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := st.Runs(ctx)
	if err != nil || len(runs) != 3 {
		t.Errorf("after reopening: %d runs, %v", len(runs), err)
	}
	if _, err := st.(*sqlStore).db.Exec("UPDATE wallprof_schema SET version = 99"); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := Open(ctx, url, time.Second); err == nil {
		t.Error("a newer schema was accepted")
	}
}
