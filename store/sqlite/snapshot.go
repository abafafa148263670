package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"changebot/store"
)

// Export reads the installation (store.CopyTables and the unfinished jobs)
// in one transaction, which holds the write lock (BEGIN IMMEDIATE): no
// writer moves anything while it reads. A table whose columns are not the
// ones store.CopyTables lists is refused (*store.SchemaMismatchError), and
// so is a table the copy does not know (*store.UnknownTableError). The
// statements are built from store.CopyTables (one per table, generic over
// its columns), so they are not sqlc's.
func (s *Store) Export(ctx context.Context) (*store.Snapshot, error) {
	snap := &store.Snapshot{Rows: map[string][][]any{}}
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if err := checkTables(ctx, tx); err != nil {
			return err
		}
		for _, t := range store.CopyTables {
			rows, err := exportTable(ctx, tx, t)
			if err != nil {
				return err
			}
			snap.Rows[t.Name] = rows
		}
		var err error
		snap.Jobs, err = store.ListCopyJobs(ctx, s.jobs, tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("exporting from SQLite: %w", err)
	}
	return snap, nil
}

// checkTables refuses a database holding a table the copy does not know
// (store.CheckTables).
func checkTables(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table'`)
	if err != nil {
		return fmt.Errorf("listing the tables: %w", err)
	}
	defer rows.Close()
	var have []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return fmt.Errorf("listing the tables: %w", err)
		}
		have = append(have, n)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("listing the tables: %w", err)
	}
	return store.CheckTables(have)
}

func exportTable(ctx context.Context, tx *sql.Tx, t store.Table) ([][]any, error) {
	cr, err := tx.QueryContext(ctx, `SELECT name FROM pragma_table_info(?)`, t.Name)
	if err != nil {
		return nil, fmt.Errorf("reading the columns of %s: %w", t.Name, err)
	}
	var have []string
	for cr.Next() {
		var n string
		if err := cr.Scan(&n); err != nil {
			cr.Close()
			return nil, fmt.Errorf("reading the columns of %s: %w", t.Name, err)
		}
		have = append(have, n)
	}
	cr.Close()
	if err := cr.Err(); err != nil {
		return nil, fmt.Errorf("reading the columns of %s: %w", t.Name, err)
	}
	if err := store.CheckColumns(t, have); err != nil {
		return nil, err
	}
	// Names come from store.CopyTables, never from input.
	rows, err := tx.QueryContext(ctx, `SELECT `+t.ColumnNames()+` FROM `+t.Name+` ORDER BY `+strings.Join(t.Key, ", ")) //nolint:gosec // names from store.CopyTables
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", t.Name, err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		dest := make([]any, len(t.Columns))
		vals := make([]any, len(t.Columns))
		for i, c := range t.Columns {
			dest[i], vals[i] = scanDest(c.Kind)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("reading a row of %s: %w", t.Name, err)
		}
		row := make([]any, len(dest))
		for i, c := range t.Columns {
			row[i] = scannedValue(c.Kind, vals[i])
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", t.Name, err)
	}
	return out, nil
}

// scanDest returns where a column of kind k scans to (the scanner) and the
// variable that holds the value.
func scanDest(k store.ColumnKind) (any, any) {
	switch k {
	case store.KindText:
		v := new(string)
		return v, v
	case store.KindNullText:
		v := new(sql.NullString)
		return v, v
	case store.KindInt:
		v := new(int64)
		return v, v
	case store.KindBool:
		v := new(bool)
		return v, v
	case store.KindFloat:
		v := new(float64)
		return v, v
	case store.KindTime:
		v := new(time.Time)
		return tm{v}, v
	case store.KindNullTime:
		v := new(*time.Time)
		return ntm{v}, v
	default: // JSON, NullJSON, Bytes
		v := new([]byte)
		return v, v
	}
}

// scannedValue is the Snapshot value (store.ColumnKind) held by v.
func scannedValue(k store.ColumnKind, v any) any {
	switch d := v.(type) {
	case *string:
		return *d
	case *sql.NullString:
		if !d.Valid {
			return nil
		}
		return d.String
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
		if *d == nil && k == store.KindNullJSON {
			return nil
		}
		if *d == nil {
			return []byte{}
		}
		return *d
	}
	panic(fmt.Sprintf("sqlite: no snapshot value for %T", v))
}

// storedValue is the value SQLite stores for v of kind k: times as text
// (ts), JSON as TEXT (JSON functions refuse a BLOB), bytes as a BLOB.
func storedValue(k store.ColumnKind, v any) any {
	if v == nil {
		return nil
	}
	switch k {
	case store.KindTime, store.KindNullTime:
		return ts(v.(time.Time))
	case store.KindJSON, store.KindNullJSON:
		return string(v.([]byte))
	}
	return v
}

// Import writes snap into this database in one transaction (it holds the
// write lock throughout): nothing is written unless all is. The database
// must be migrated and empty: a table of store.CopyTables,
// store.IgnoredTables or River's jobs holding a row refuses it
// (*store.NotEmptyError). Jobs go through River's InsertMany
// (store.InsertCopyJobs). Delivery and audit ids are kept (AUTOINCREMENT
// moves past them); the commit claim token counter is moved past the
// copied tokens.
func (s *Store) Import(ctx context.Context, snap *store.Snapshot) error {
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		names := []string{store.JobsTable}
		names = append(names, store.IgnoredTables...)
		for _, t := range store.CopyTables {
			names = append(names, t.Name)
		}
		full := map[string]int{}
		for _, n := range names {
			var c int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM `+n).Scan(&c); err != nil {
				return fmt.Errorf("counting the rows of %s: %w", n, err)
			}
			if c > 0 {
				full[n] = c
			}
		}
		if len(full) > 0 {
			return &store.NotEmptyError{Rows: full}
		}
		var maxToken int64
		for _, t := range store.CopyTables {
			rows := snap.Rows[t.Name]
			if len(rows) == 0 {
				continue
			}
			ph := strings.TrimSuffix(strings.Repeat("?,", len(t.Columns)), ",")
			stmt, err := tx.PrepareContext(ctx, `INSERT INTO `+t.Name+` (`+t.ColumnNames()+`) VALUES (`+ph+`)`) //nolint:gosec // names from store.CopyTables
			if err != nil {
				return fmt.Errorf("preparing the rows of %s: %w", t.Name, err)
			}
			for _, row := range rows {
				args := make([]any, len(row))
				for i, c := range t.Columns {
					args[i] = storedValue(c.Kind, row[i])
					if t.Name == "commit_claims" && c.Name == "token" {
						maxToken = max(maxToken, row[i].(int64))
					}
				}
				if _, err := stmt.ExecContext(ctx, args...); err != nil {
					stmt.Close()
					return fmt.Errorf("writing a row of %s: %w", t.Name, err)
				}
			}
			stmt.Close()
		}
		if maxToken > 0 {
			if _, err := tx.ExecContext(ctx, `INSERT INTO commit_claim_tokens (token)
				SELECT ? WHERE ? > (SELECT coalesce(max(token), 0) FROM commit_claim_tokens)`, maxToken, maxToken); err != nil {
				return fmt.Errorf("moving the commit claim tokens past the copied ones: %w", err)
			}
		}
		return store.InsertCopyJobs(ctx, s.jobs, tx, snap.Jobs)
	})
	if err != nil {
		return fmt.Errorf("importing into SQLite: %w", err)
	}
	return nil
}
