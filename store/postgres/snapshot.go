package postgres

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"changebot/store"
)

// The statements of an installation copy are built from store.CopyTables
// (one per table, generic over its columns), so they are not sqlc's.

// CopyTableNames implements store.CopyQueries: the base tables of the
// current schema.
func (x executor) CopyTableNames(ctx context.Context) ([]string, error) {
	rows, err := x.q.Query(ctx, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// CopyTableColumns implements store.CopyQueries.
func (x executor) CopyTableColumns(ctx context.Context, table string) ([]string, error) {
	rows, err := x.q.Query(ctx, `SELECT column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = $1`, table)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// CopyTableRead implements store.CopyQueries; pgx scans every kind into its
// store.CopyScanTarget.
func (x executor) CopyTableRead(ctx context.Context, t store.Table) ([][]any, error) {
	rows, err := x.q.Query(ctx, `SELECT `+t.ColumnNames()+` FROM `+t.Name+` ORDER BY `+strings.Join(t.Key, ", "))
	if err != nil {
		return nil, err
	}
	targets := make([]any, len(t.Columns))
	for i, c := range t.Columns {
		targets[i] = store.CopyScanTarget(c.Kind)
	}
	var out [][]any
	_, err = pgx.ForEachRow(rows, targets, func() error {
		row := make([]any, len(targets))
		for i, c := range t.Columns {
			row[i] = store.CopyValue(c.Kind, targets[i])
		}
		out = append(out, row)
		return nil
	})
	return out, err
}

// CopyTableCount implements store.CopyQueries.
func (x executor) CopyTableCount(ctx context.Context, table string) (int, error) {
	var n int
	err := x.q.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{table}.Sanitize()).Scan(&n)
	return n, err
}

// CopyTablesLock implements store.CopyQueries: LOCK TABLE … IN EXCLUSIVE
// MODE, which lets readers in and keeps every writer out.
func (x executor) CopyTablesLock(ctx context.Context, tables []string) error {
	_, err := x.q.Exec(ctx, `LOCK TABLE `+strings.Join(tables, ", ")+` IN EXCLUSIVE MODE`)
	return err
}

// CopyTableWrite implements store.CopyQueries with COPY (in a transaction
// only).
func (x executor) CopyTableWrite(ctx context.Context, t store.Table, rows [][]any) error {
	if x.tx == nil {
		return errNoTx
	}
	names := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		names[i] = c.Name
	}
	n, err := x.tx.CopyFrom(ctx, pgx.Identifier{t.Name}, names, pgx.CopyFromRows(rows))
	if err != nil {
		return err
	}
	if int(n) != len(rows) {
		return fmt.Errorf("%d of %d rows written", n, len(rows))
	}
	return nil
}

// CopyCountersReset implements store.CopyQueries: the sequences of webhook
// deliveries, settings audit rows and commit claim tokens move past the
// rows' values.
func (x executor) CopyCountersReset(ctx context.Context) error {
	for _, seq := range []string{
		`SELECT setval(pg_get_serial_sequence('webhook_deliveries', 'id'), coalesce(max(id), 0) + 1, false) FROM webhook_deliveries`,
		`SELECT setval(pg_get_serial_sequence('settings_audit', 'id'), coalesce(max(id), 0) + 1, false) FROM settings_audit`,
		`SELECT setval('commit_claim_tokens', coalesce(max(token), 0) + 1, false) FROM commit_claims`,
	} {
		if _, err := x.q.Exec(ctx, seq); err != nil {
			return err
		}
	}
	return nil
}
