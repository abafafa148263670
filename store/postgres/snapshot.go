package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"changebot/store"
)

// Export reads the installation (store.CopyTables and the unfinished jobs)
// in one read-only REPEATABLE READ transaction, so every table is of the
// same moment. A table whose columns are not the ones store.CopyTables
// lists is refused (*store.SchemaMismatchError), and so is a table the
// copy does not know (*store.UnknownTableError). The statements are built
// from store.CopyTables (one per table, generic over its columns), so they
// are not sqlc's.
func (s *Store) Export(ctx context.Context) (*store.Snapshot, error) {
	snap := &store.Snapshot{Rows: map[string][][]any{}}
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT table_name FROM information_schema.tables
			WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)
		if err != nil {
			return fmt.Errorf("listing the tables: %w", err)
		}
		tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return fmt.Errorf("listing the tables: %w", err)
		}
		if err := store.CheckTables(tables); err != nil {
			return err
		}
		for _, t := range store.CopyTables {
			rows, err := exportTable(ctx, tx, t)
			if err != nil {
				return err
			}
			snap.Rows[t.Name] = rows
		}
		snap.Jobs, err = store.ListCopyJobs(ctx, s.jobs, tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("exporting from PostgreSQL: %w", err)
	}
	return snap, nil
}

func exportTable(ctx context.Context, tx pgx.Tx, t store.Table) ([][]any, error) {
	var have []string
	rows, err := tx.Query(ctx, `SELECT column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = $1`, t.Name)
	if err != nil {
		return nil, fmt.Errorf("reading the columns of %s: %w", t.Name, err)
	}
	if have, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return nil, fmt.Errorf("reading the columns of %s: %w", t.Name, err)
	}
	if err := store.CheckColumns(t, have); err != nil {
		return nil, err
	}
	rows, err = tx.Query(ctx, `SELECT `+t.ColumnNames()+` FROM `+t.Name+` ORDER BY `+strings.Join(t.Key, ", "))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", t.Name, err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		dest := make([]any, len(t.Columns))
		for i, c := range t.Columns {
			dest[i] = scanDest(c.Kind)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("reading a row of %s: %w", t.Name, err)
		}
		row := make([]any, len(dest))
		for i, c := range t.Columns {
			row[i] = scannedValue(c.Kind, dest[i])
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", t.Name, err)
	}
	return out, nil
}

// scanDest is where a column of kind k scans to.
func scanDest(k store.ColumnKind) any {
	switch k {
	case store.KindText:
		return new(string)
	case store.KindNullText:
		return new(*string)
	case store.KindInt:
		return new(int64)
	case store.KindBool:
		return new(bool)
	case store.KindFloat:
		return new(float64)
	case store.KindTime:
		return new(time.Time)
	case store.KindNullTime:
		return new(*time.Time)
	default: // JSON, NullJSON, Bytes
		return new([]byte)
	}
}

// scannedValue is the Snapshot value (store.ColumnKind) of dest.
func scannedValue(k store.ColumnKind, dest any) any {
	switch d := dest.(type) {
	case *string:
		return *d
	case **string:
		if *d == nil {
			return nil
		}
		return **d
	case *int64:
		return *d
	case *bool:
		return *d
	case *float64:
		return *d
	case *time.Time:
		return d.UTC()
	case **time.Time:
		if *d == nil {
			return nil
		}
		return (*d).UTC()
	case *[]byte:
		if *d == nil && k != store.KindBytes && k != store.KindJSON {
			return nil
		}
		if *d == nil {
			return []byte{}
		}
		return *d
	}
	panic(fmt.Sprintf("postgres: no snapshot value for %T", dest))
}

// Import writes snap into this database in one transaction: nothing is
// written unless all is. The database must be migrated and empty: a table
// of store.CopyTables, store.IgnoredTables or River's jobs holding a row
// refuses it (*store.NotEmptyError). Jobs go through River's InsertMany
// (store.InsertCopyJobs). The sequences of webhook deliveries, settings
// audit rows and commit claim tokens are moved past the copied values.
func (s *Store) Import(ctx context.Context, snap *store.Snapshot) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// Nothing may start writing while the copy checks and fills.
		names := []string{store.JobsTable}
		names = append(names, store.IgnoredTables...)
		for _, t := range store.CopyTables {
			names = append(names, t.Name)
		}
		if _, err := tx.Exec(ctx, `LOCK TABLE `+strings.Join(names, ", ")+` IN EXCLUSIVE MODE`); err != nil {
			return fmt.Errorf("locking the tables: %w", err)
		}
		full := map[string]int{}
		for _, n := range names {
			var c int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+n).Scan(&c); err != nil {
				return fmt.Errorf("counting the rows of %s: %w", n, err)
			}
			if c > 0 {
				full[n] = c
			}
		}
		if len(full) > 0 {
			return &store.NotEmptyError{Rows: full}
		}
		for _, t := range store.CopyTables {
			if err := importTable(ctx, tx, t, snap.Rows[t.Name]); err != nil {
				return err
			}
		}
		for _, seq := range []string{
			`SELECT setval(pg_get_serial_sequence('webhook_deliveries', 'id'), coalesce(max(id), 0) + 1, false) FROM webhook_deliveries`,
			`SELECT setval(pg_get_serial_sequence('settings_audit', 'id'), coalesce(max(id), 0) + 1, false) FROM settings_audit`,
			`SELECT setval('commit_claim_tokens', coalesce(max(token), 0) + 1, false) FROM commit_claims`,
		} {
			if _, err := tx.Exec(ctx, seq); err != nil {
				return fmt.Errorf("moving a sequence past the copied rows: %w", err)
			}
		}
		return store.InsertCopyJobs(ctx, s.jobs, tx, snap.Jobs)
	})
	if err != nil {
		return fmt.Errorf("importing into PostgreSQL: %w", err)
	}
	return nil
}

// importTable inserts rows into t with COPY.
func importTable(ctx context.Context, tx pgx.Tx, t store.Table, rows [][]any) error {
	if len(rows) == 0 {
		return nil
	}
	names := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		names[i] = c.Name
	}
	n, err := tx.CopyFrom(ctx, pgx.Identifier{t.Name}, names, pgx.CopyFromRows(rows))
	if err != nil {
		return fmt.Errorf("writing %s: %w", t.Name, err)
	}
	if int(n) != len(rows) {
		return fmt.Errorf("writing %s: %d of %d rows", t.Name, n, len(rows))
	}
	return nil
}
