package sqlite

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"changebot/store"
)

// The statements of an installation copy are built from store.CopyTables
// (one per table, generic over its columns), so they are not sqlc's. Names
// come from store.CopyTables, never from input.

// strings reads the one text column of every row of a query.
func (x executor) strings(ctx context.Context, query string, args ...any) ([]string, error) {
	rows, err := x.ex.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// CopyTableNames implements store.CopyQueries.
func (x executor) CopyTableNames(ctx context.Context) ([]string, error) {
	return x.strings(ctx, `SELECT name FROM sqlite_master WHERE type = 'table'`)
}

// CopyTableColumns implements store.CopyQueries.
func (x executor) CopyTableColumns(ctx context.Context, table string) ([]string, error) {
	return x.strings(ctx, `SELECT name FROM pragma_table_info(?)`, table)
}

// CopyTableRead implements store.CopyQueries: times are scanned from their
// text (tm), every other kind into its store.CopyScanTarget.
func (x executor) CopyTableRead(ctx context.Context, t store.Table) ([][]any, error) {
	rows, err := x.ex.QueryContext(ctx, `SELECT `+t.ColumnNames()+` FROM `+t.Name+` ORDER BY `+strings.Join(t.Key, ", ")) //nolint:gosec // names from store.CopyTables
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		targets := make([]any, len(t.Columns))
		dest := make([]any, len(t.Columns))
		for i, c := range t.Columns {
			targets[i] = store.CopyScanTarget(c.Kind)
			switch v := targets[i].(type) {
			case *time.Time:
				dest[i] = tm{v}
			case **time.Time:
				dest[i] = ntm{v}
			default:
				dest[i] = v
			}
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		row := make([]any, len(targets))
		for i, c := range t.Columns {
			row[i] = store.CopyValue(c.Kind, targets[i])
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// CopyTableCount implements store.CopyQueries.
func (x executor) CopyTableCount(ctx context.Context, table string) (int, error) {
	var n int
	err := x.ex.QueryRowContext(ctx, `SELECT count(*) FROM `+table).Scan(&n) //nolint:gosec // names from store.CopyTables
	return n, err
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

// CopyTableWrite implements store.CopyQueries with one prepared INSERT
// run per row; ids are kept (AUTOINCREMENT moves past them).
func (x executor) CopyTableWrite(ctx context.Context, t store.Table, rows [][]any) error {
	ph := strings.TrimSuffix(strings.Repeat("?,", len(t.Columns)), ",")
	stmt, err := x.ex.PrepareContext(ctx, `INSERT INTO `+t.Name+` (`+t.ColumnNames()+`) VALUES (`+ph+`)`) //nolint:gosec // names from store.CopyTables
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, row := range rows {
		args := make([]any, len(row))
		for i, c := range t.Columns {
			args[i] = storedValue(c.Kind, row[i])
		}
		if _, err := stmt.ExecContext(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

// CopyCountersReset implements store.CopyQueries: the commit claim token
// counter (an AUTOINCREMENT table) moves past the highest copied token.
// Delivery and audit ids need nothing: AUTOINCREMENT moved past them.
func (x executor) CopyCountersReset(ctx context.Context) error {
	_, err := x.ex.ExecContext(ctx, `INSERT INTO commit_claim_tokens (token)
		SELECT m FROM (SELECT coalesce(max(token), 0) AS m FROM commit_claims)
		WHERE m > (SELECT coalesce(max(token), 0) FROM commit_claim_tokens)`)
	return err
}

// ntm scans a nullable stored time into *t (nil for NULL).
type ntm struct{ t **time.Time }

// Scan implements sql.Scanner.
func (d ntm) Scan(src any) error {
	if src == nil {
		*d.t = nil
		return nil
	}
	var t time.Time
	if err := (tm{&t}).Scan(src); err != nil {
		return err
	}
	*d.t = &t
	return nil
}

var _ sql.Scanner = ntm{}
