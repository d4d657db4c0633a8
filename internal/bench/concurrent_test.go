package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Concurrent writers: two CI jobs storing into one database at once.
const (
	writerRuns    = 30 // runs each writer saves
	writerResults = 20 // results per run, 3 values each
)

// writeRuns saves writerRuns runs of writer w into the store at dsn,
// opened the way the command opens it (a 2 s busy timeout), starting at
// start. It opens the store itself, so that a new database is created and
// migrated by both writers at once.
func writeRuns(dsn string, w int, start time.Time) error {
	time.Sleep(time.Until(start))
	ctx := context.Background()
	st, err := Open(ctx, dsn, 2*time.Second)
	if err != nil {
		return fmt.Errorf("writer %d: open: %w", w, err)
	}
	defer st.Close()
	for i := range writerRuns {
		run := &Run{Commit: fmt.Sprintf("w%d-%03d", w, i), Time: time.Now(), Machine: fmt.Sprint("job", w), Label: "run"}
		for k := range writerResults {
			run.Results = append(run.Results, Result{Pkg: "example.com/p", Name: fmt.Sprintf("B%02d-2", k), Iters: 1000 + i,
				Config: map[string]string{"pkg": "example.com/p"},
				Values: []Value{{float64(w*1e6 + i*100 + k), "sec/op"}, {float64(k), "B/op"}, {1, "allocs/op"}}})
		}
		if err := st.Save(ctx, run); err != nil {
			return fmt.Errorf("writer %d: save run %d: %w", w, i, err)
		}
	}
	return nil
}

// checkWriters checks that every run of both writers is stored whole.
func checkWriters(t *testing.T, dsn string) {
	t.Helper()
	st, err := Open(context.Background(), dsn, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.Runs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range runs {
		var w, i int
		if _, err := fmt.Sscanf(r.Commit, "w%d-%d", &w, &i); err != nil || seen[r.Commit] {
			t.Errorf("run %q: %v (seen %v)", r.Commit, err, seen[r.Commit])
			continue
		}
		seen[r.Commit] = true
		if len(r.Results) != writerResults {
			t.Errorf("run %s has %d results; want %d", r.Commit, len(r.Results), writerResults)
			continue
		}
		for k, res := range r.Results {
			if res.Name != fmt.Sprintf("B%02d-2", k) || res.Iters != 1000+i || len(res.Values) != 3 || res.Values[0].Value != float64(w*1e6+i*100+k) {
				t.Errorf("run %s result %d: %+v", r.Commit, k, res)
			}
		}
	}
	if len(seen) != 2*writerRuns {
		t.Errorf("%d runs stored; want %d", len(seen), 2*writerRuns)
	}
}

// TestBenchStoreWriterProcess is the writer process of
// TestBenchStoreConcurrentWriters; it does nothing in a normal test run.
func TestBenchStoreWriterProcess(t *testing.T) {
	dsn := os.Getenv("WALLPROF_BENCH_WRITER_DSN")
	if dsn == "" {
		t.Skip("a helper process of TestBenchStoreConcurrentWriters")
	}
	w, _ := strconv.Atoi(os.Getenv("WALLPROF_BENCH_WRITER"))
	ns, _ := strconv.ParseInt(os.Getenv("WALLPROF_BENCH_WRITER_START"), 10, 64)
	if err := writeRuns(dsn, w, time.Unix(0, ns)); err != nil {
		t.Fatal(err)
	}
}

// Two processes, like two CI jobs, create one new SQLite database and
// store 30 runs each into it at the same time: every run lands whole, and
// neither sees an error ("database is locked" included). The race to
// create the database is the rarer failure (about 1 in 30 before Open
// retried), hence several new databases per case.
func TestBenchStoreConcurrentWriters(t *testing.T) {
	for _, tc := range []struct {
		name, kind string
		dbs        int
	}{{"processes", "sqlite", 4}, {"handles", "sqlite", 2}, {"handles", "postgres", 1}} {
		t.Run(tc.kind+"-"+tc.name, func(t *testing.T) {
			for range tc.dbs {
				dsn := filepath.Join(t.TempDir(), "bench.db")
				if tc.kind == "postgres" {
					if testing.Short() {
						t.Skip("starts Postgres")
					}
					dsn = startPostgres(t)
				}
				concurrentWriters(t, dsn, tc.name == "processes")
			}
		})
	}
}

func concurrentWriters(t *testing.T, dsn string, processes bool) {
	start := time.Now().Add(300 * time.Millisecond)
	errs := make([]error, 2)
	outs := make([][]byte, 2)
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !processes {
				errs[w] = writeRuns(dsn, w, start)
				return
			}
			cmd := exec.Command(os.Args[0], "-test.run", "^TestBenchStoreWriterProcess$", "-test.v")
			cmd.Env = append(os.Environ(), "WALLPROF_BENCH_WRITER_DSN="+dsn, fmt.Sprint("WALLPROF_BENCH_WRITER=", w),
				fmt.Sprint("WALLPROF_BENCH_WRITER_START=", start.UnixNano()))
			outs[w], errs[w] = cmd.CombinedOutput()
		}()
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil || strings.Contains(string(outs[w]), "locked") {
			t.Errorf("%v (writer %d)\n%s", err, w, outs[w])
		}
	}
	t.Logf("both writers done in %v", time.Since(start))
	checkWriters(t, dsn)
}
