package bench

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the CGO-free SQLite driver
)

// Store keeps runs: in SQLite or Postgres (Open).
type Store interface {
	// Save stores run and sets run.ID. It is one transaction: a failed
	// Save stores nothing.
	Save(ctx context.Context, run *Run) error
	// Runs returns every run with its results, oldest first.
	Runs(ctx context.Context) ([]*Run, error)
	// RunsOf returns every run, oldest first, with only the results of
	// the benchmark name (matched as Histories matches it, with or
	// without its Benchmark prefix and -GOMAXPROCS suffix) and only their
	// values in unit (every unit when ""). It reads only those samples.
	RunsOf(ctx context.Context, name, unit string) ([]*Run, error)
	Close() error
}

// ErrNewerSchema is wrapped by Open when the database was written by a
// newer wallprof.
var ErrNewerSchema = errors.New("newer schema")

// migrations are the schema's versions: migrations[i] takes a database
// from version i to i+1 (PRAGMA user_version).
var migrations = []string{
	`CREATE TABLE runs (
		id INTEGER PRIMARY KEY,
		commit_hash TEXT NOT NULL,
		dirty INTEGER NOT NULL,
		time TEXT NOT NULL,
		machine TEXT NOT NULL,
		toolchain TEXT NOT NULL,
		label TEXT NOT NULL
	);
	CREATE TABLE benchmarks (
		id INTEGER PRIMARY KEY,
		pkg TEXT NOT NULL,
		name TEXT NOT NULL,
		UNIQUE (pkg, name)
	);
	CREATE TABLE results (
		id INTEGER PRIMARY KEY,
		run_id INTEGER NOT NULL REFERENCES runs(id),
		benchmark_id INTEGER NOT NULL REFERENCES benchmarks(id),
		iters INTEGER NOT NULL,
		config TEXT NOT NULL
	);
	CREATE TABLE samples (
		result_id INTEGER NOT NULL REFERENCES results(id),
		unit TEXT NOT NULL,
		value REAL NOT NULL
	);
	CREATE INDEX results_run ON results(run_id);
	CREATE INDEX samples_result ON samples(result_id);`,
	// 2: a benchmark's history reads its results without scanning all.
	`CREATE INDEX results_benchmark ON results(benchmark_id);`,
	// 3: a run cut short (Ctrl-C) keeps its rounds, marked incomplete.
	migrationIncomplete,
}

// migrationIncomplete is version 3, the same in both databases.
const migrationIncomplete = `ALTER TABLE runs ADD COLUMN incomplete INTEGER NOT NULL DEFAULT 0;`

// pgMigrations are migrations for Postgres: the same schema.
var pgMigrations = []string{
	`CREATE TABLE runs (
		id BIGSERIAL PRIMARY KEY,
		commit_hash TEXT NOT NULL,
		dirty INTEGER NOT NULL,
		time TEXT NOT NULL,
		machine TEXT NOT NULL,
		toolchain TEXT NOT NULL,
		label TEXT NOT NULL
	);
	CREATE TABLE benchmarks (
		id BIGSERIAL PRIMARY KEY,
		pkg TEXT NOT NULL,
		name TEXT NOT NULL,
		UNIQUE (pkg, name)
	);
	CREATE TABLE results (
		id BIGSERIAL PRIMARY KEY,
		run_id BIGINT NOT NULL REFERENCES runs(id),
		benchmark_id BIGINT NOT NULL REFERENCES benchmarks(id),
		iters BIGINT NOT NULL,
		config TEXT NOT NULL
	);
	CREATE TABLE samples (
		id BIGSERIAL PRIMARY KEY,
		result_id BIGINT NOT NULL REFERENCES results(id),
		unit TEXT NOT NULL,
		value DOUBLE PRECISION NOT NULL
	);
	CREATE INDEX results_run ON results(run_id);
	CREATE INDEX samples_result ON samples(result_id);`,
	`CREATE INDEX results_benchmark ON results(benchmark_id);`,
	migrationIncomplete,
}

// timeLayout is how runs' times are stored: UTC, fixed width, so that the
// text sorts in time order.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

// SchemaVersion is the schema version this code writes.
var SchemaVersion = len(migrations)

// dialect is what differs between the SQL databases.
type dialect struct {
	postgres    bool
	migrations  []string
	sampleOrder string // the order of a result's samples
}

var sqliteDialect = dialect{migrations: migrations, sampleOrder: "s.rowid"}
var postgresDialect = dialect{postgres: true, migrations: pgMigrations, sampleOrder: "s.id"}

// q rewrites the ? placeholders of query for the dialect.
func (d dialect) q(query string) string {
	if !d.postgres {
		return query
	}
	var b strings.Builder
	n := 0
	for _, c := range query {
		if c == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// sqlStore is the Store of both databases.
type sqlStore struct {
	db *sql.DB
	d  dialect
}

// Open opens (creating it and its directory if needed) the SQLite database
// at path, in WAL mode, and migrates it to SchemaVersion; or, when path is
// a postgres:// URL, that Postgres database. A SQLite database locked by
// another writer for more than busy gives an error, not a wait.
func Open(ctx context.Context, path string, busy time.Duration) (Store, error) {
	if strings.HasPrefix(path, "postgres://") || strings.HasPrefix(path, "postgresql://") {
		return openPostgres(ctx, path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	// Every transaction begins IMMEDIATE: it takes the write lock at
	// BEGIN, waiting for it up to busy, rather than failing at once when a
	// read in it must become a write after another process wrote.
	dsn := fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_txlock=immediate", path, busy.Milliseconds())
	// SQLite does not always wait for a lock: when waiting could deadlock
	// (two connections that read want to write), or while another process
	// turns a new database to WAL, it fails at once with "database is
	// locked". Opening is tried again until busy has passed.
	deadline := time.Now().Add(busy)
	for try := 1; ; try++ {
		s, err := openSQLite(ctx, path, dsn)
		if !IsLocked(err) || time.Now().After(deadline) || ctx.Err() != nil {
			return s, err
		}
		time.Sleep(time.Duration(try) * 10 * time.Millisecond)
	}
}

func openSQLite(ctx context.Context, path, dsn string) (Store, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	s := &sqlStore{db, sqliteDialect}
	if err := s.migrate(ctx, path); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *sqlStore) version(ctx context.Context, q querier) (int, error) {
	var v int
	if !s.d.postgres {
		err := q.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
		return v, err
	}
	if _, err := q.ExecContext(ctx, "CREATE TABLE IF NOT EXISTS wallprof_schema (version INTEGER NOT NULL)"); err != nil {
		return 0, err
	}
	err := q.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM wallprof_schema").Scan(&v)
	return v, err
}

func (s *sqlStore) setVersion(v int) string {
	if !s.d.postgres {
		return fmt.Sprintf(";PRAGMA user_version = %d", v)
	}
	return fmt.Sprintf(";DELETE FROM wallprof_schema; INSERT INTO wallprof_schema VALUES (%d)", v)
}

// pgMigrationLock is the Postgres advisory lock that migrations hold.
const pgMigrationLock = 0x77616c6c // "wall"

// migrate takes the database to SchemaVersion. Two processes that open a
// new database at once (two CI jobs) both find it at version 0: each
// migration step therefore runs in a transaction that holds the write lock
// (SQLite's BEGIN IMMEDIATE, the DSN's _txlock; an advisory lock in
// Postgres) and reads the version again under it, so that the second
// process finds the first one's work done.
func (s *sqlStore) migrate(ctx context.Context, path string) error {
	v, err := s.version(ctx, s.db)
	if err != nil && s.d.postgres {
		// Concurrent CREATE TABLE IF NOT EXISTS can fail in Postgres; the
		// locked transaction below creates it again.
		v, err = 0, nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	if v > SchemaVersion {
		return newerSchema(path, v)
	}
	for v < SchemaVersion {
		if err := s.migrateStep(ctx, &v); err != nil {
			return fmt.Errorf("migrate %s to version %d: %w", path, v+1, err)
		}
		if v > SchemaVersion {
			return newerSchema(path, v)
		}
	}
	return nil
}

func newerSchema(path string, v int) error {
	return fmt.Errorf("%s has benchmark schema version %d, newer than the %d this wallprof knows; use a newer wallprof: %w", path, v, SchemaVersion, ErrNewerSchema)
}

// migrateStep reads the version *v under the write lock and, if it is
// below SchemaVersion, runs its migration; *v is the version after it.
func (s *sqlStore) migrateStep(ctx context.Context, v *int) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if s.d.postgres {
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", pgMigrationLock)); err != nil {
			return err
		}
	}
	if *v, err = s.version(ctx, tx); err != nil || *v >= SchemaVersion {
		return err
	}
	if _, err := tx.ExecContext(ctx, s.d.migrations[*v]+s.setVersion(*v+1)); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	*v++
	return nil
}

func (s *sqlStore) Close() error { return s.db.Close() }

// saveTries is how many times Save tries a transaction that failed on a
// locked database (each waits up to the busy timeout).
const saveTries = 3

func (s *sqlStore) Save(ctx context.Context, run *Run) error {
	var err error
	for try := 1; ; try++ {
		err = s.save(ctx, run)
		if !IsLocked(err) || try == saveTries || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Duration(try) * 50 * time.Millisecond)
	}
}

func (s *sqlStore) save(ctx context.Context, run *Run) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var id int64
	if err := tx.QueryRowContext(ctx, s.d.q(`INSERT INTO runs (commit_hash, dirty, time, machine, toolchain, label, incomplete) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id`),
		run.Commit, boolInt(run.Dirty), run.Time.UTC().Format(timeLayout), run.Machine, run.Toolchain, run.Label, boolInt(run.Incomplete)).Scan(&id); err != nil {
		return err
	}
	bids := map[[2]string]int64{}
	for _, r := range run.Results {
		k := [2]string{r.Pkg, r.Name}
		bid, ok := bids[k]
		if !ok {
			if _, err := tx.ExecContext(ctx, s.d.q(`INSERT INTO benchmarks (pkg, name) VALUES (?, ?) ON CONFLICT DO NOTHING`), r.Pkg, r.Name); err != nil {
				return err
			}
			if err := tx.QueryRowContext(ctx, s.d.q(`SELECT id FROM benchmarks WHERE pkg = ? AND name = ?`), r.Pkg, r.Name).Scan(&bid); err != nil {
				return err
			}
			bids[k] = bid
		}
		cfg, _ := json.Marshal(r.Config)
		var rid int64
		if err := tx.QueryRowContext(ctx, s.d.q(`INSERT INTO results (run_id, benchmark_id, iters, config) VALUES (?, ?, ?, ?) RETURNING id`),
			id, bid, r.Iters, string(cfg)).Scan(&rid); err != nil {
			return err
		}
		for _, v := range r.Values {
			if _, err := tx.ExecContext(ctx, s.d.q(`INSERT INTO samples (result_id, unit, value) VALUES (?, ?, ?)`), rid, v.Unit, v.Value); err != nil {
				return err
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	run.ID = id
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (s *sqlStore) Runs(ctx context.Context) ([]*Run, error) {
	return s.runs(ctx, "", nil)
}

func (s *sqlStore) RunsOf(ctx context.Context, name, unit string) ([]*Run, error) {
	like := func(n string) string {
		return strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(n) + "-%"
	}
	where := `WHERE (b.name = ? OR b.name LIKE ? ESCAPE '\' OR b.name LIKE ? ESCAPE '\')`
	args := []any{name, like(name), like(strings.TrimPrefix(name, "Benchmark"))}
	if unit != "" {
		where += " AND s.unit = ?"
		args = append(args, unit)
	}
	return s.runs(ctx, where, args)
}

// runs returns every run, with the results and samples that where (a
// condition on b, r and s) selects.
func (s *sqlStore) runs(ctx context.Context, where string, args []any) ([]*Run, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, commit_hash, dirty, time, machine, toolchain, label, incomplete FROM runs ORDER BY time, id`)
	if err != nil {
		return nil, err
	}
	var runs []*Run
	byID := map[int64]*Run{}
	for rows.Next() {
		r := &Run{}
		var t string
		if err := rows.Scan(&r.ID, &r.Commit, &r.Dirty, &t, &r.Machine, &r.Toolchain, &r.Label, &r.Incomplete); err != nil {
			rows.Close()
			return nil, err
		}
		r.Time, _ = time.Parse(timeLayout, t)
		runs = append(runs, r)
		byID[r.ID] = r
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = s.db.QueryContext(ctx, s.d.q(`SELECT r.id, r.run_id, b.pkg, b.name, r.iters, r.config, s.unit, s.value
		FROM results r JOIN benchmarks b ON b.id = r.benchmark_id JOIN samples s ON s.result_id = r.id
		`+where+` ORDER BY r.id, `+s.d.sampleOrder), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	last := int64(-1)
	for rows.Next() {
		var rid, runID int64
		var res Result
		var cfg string
		var v Value
		if err := rows.Scan(&rid, &runID, &res.Pkg, &res.Name, &res.Iters, &cfg, &v.Unit, &v.Value); err != nil {
			return nil, err
		}
		run := byID[runID]
		if run == nil {
			continue
		}
		if rid != last {
			json.Unmarshal([]byte(cfg), &res.Config)
			run.Results = append(run.Results, res)
			last = rid
		}
		p := &run.Results[len(run.Results)-1]
		p.Values = append(p.Values, v)
	}
	return runs, rows.Err()
}

// IsLocked reports whether err says the database was locked by another
// process.
func IsLocked(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "database is locked") || strings.Contains(err.Error(), "SQLITE_BUSY"))
}
