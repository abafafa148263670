package sqlite

import (
	"context"
	"database/sql"
	"time"

	"changebot/store"
	"changebot/store/sqlite/internal/dbtime"
)

// engine is the name this implementation gives its handles.
const engine = "sqlite"

// dbHandle is the store's own handle (Store.DB).
type dbHandle struct{ db *sql.DB }

// Engine implements store.DBTX.
func (dbHandle) Engine() string { return engine }

// txHandle is a transaction handed out by InTx; after (nil for TxOf)
// collects what runs once it committed.
type txHandle struct {
	tx    *sql.Tx
	after *[]func()
}

// Engine implements store.DBTX.
func (txHandle) Engine() string { return engine }

// Transaction implements store.Tx.
func (txHandle) Transaction() {}

// TxOf returns tx, begun on this store's database outside InTx (the
// wiring, tests), as a store transaction.
func TxOf(tx *sql.Tx) store.Tx { return txHandle{tx: tx} }

// SQLTx returns the *sql.Tx behind tx, and false when tx is not a
// transaction of this implementation.
func SQLTx(tx store.Tx) (*sql.Tx, bool) {
	h, ok := tx.(txHandle)
	return h.tx, ok
}

// execer is what *sql.DB and *sql.Tx share (and what the generated
// queries run on, dbsqlc.DBTX).
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	PrepareContext(ctx context.Context, query string) (*sql.Stmt, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// exec runs a hand-written statement, its arguments in their stored form
// (conv).
func (x executor) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return x.ex.ExecContext(ctx, query, conv(args)...)
}

// query runs a hand-written query, its arguments in their stored form
// (conv).
func (x executor) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return x.ex.QueryContext(ctx, query, conv(args)...)
}

// queryRow runs a hand-written query of one row, its arguments in their
// stored form (conv).
func (x executor) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	return x.ex.QueryRowContext(ctx, query, conv(args)...)
}

// affected is the number of rows a statement changed.
func affected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// tsFormat is how times are stored: UTC, microseconds, fixed width.
const tsFormat = "2006-01-02 15:04:05.000000"

// ts is t as stored.
func ts(t time.Time) string { return t.UTC().Format(tsFormat) }

// conv converts the arguments of a statement to their stored form.
func conv(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case time.Time:
			out[i] = ts(v)
		case *time.Time:
			if v == nil {
				out[i] = nil
			} else {
				out[i] = ts(*v)
			}
		default:
			out[i] = a
		}
	}
	return out
}

// tm scans a stored time (text, as dbtime.Time reads it) into *t; NULL
// leaves the zero time.
type tm struct{ t *time.Time }

// Scan implements sql.Scanner.
func (d tm) Scan(src any) error {
	var t dbtime.Time
	if err := t.Scan(src); err != nil {
		return err
	}
	*d.t = t.Time
	return nil
}

// in returns n placeholders for an IN list and the values as arguments.
func in[T any](vals []T) (string, []any) {
	if len(vals) == 0 {
		return "NULL", nil
	}
	b := make([]byte, 0, 2*len(vals))
	args := make([]any, len(vals))
	for i, v := range vals {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '?')
		args[i] = v
	}
	return string(b), args
}
