package bench

import (
	"context"
	"database/sql"
	"fmt"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
)

// openPostgres opens the Postgres database of url and migrates it.
func openPostgres(ctx context.Context, url string) (Store, error) {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return nil, err
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to Postgres: %w", err)
	}
	s := &sqlStore{db, postgresDialect}
	if err := s.migrate(ctx, "the Postgres database"); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}
