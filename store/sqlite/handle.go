package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"changebot/store"
	"changebot/store/sqlite/internal/dbsqlc"
)

// engine is the name this implementation gives its handles.
const engine = "sqlite"

// dbHandle is the store's own handle (Store.DB).
type dbHandle struct{ db *sql.DB }

// Engine implements store.DBTX.
func (dbHandle) Engine() string { return engine }

// txHandle is a transaction handed out by InTx.
type txHandle struct{ tx *sql.Tx }

// Engine implements store.DBTX.
func (txHandle) Engine() string { return engine }

// Transaction implements store.Tx.
func (txHandle) Transaction() {}

// TxOf returns tx, begun on this store's database outside InTx (the
// wiring, tests), as a store transaction.
func TxOf(tx *sql.Tx) store.Tx { return txHandle{tx} }

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

// conn runs statements on a handle, converting arguments to their stored
// form (times as text, see ts); err, when set, fails every statement (a
// handle of another implementation).
type conn struct {
	ex  execer
	err error
}

// q unwraps db.
func q(db store.DBTX) conn {
	switch h := db.(type) {
	case dbHandle:
		return conn{ex: h.db}
	case txHandle:
		return conn{ex: h.tx}
	case nil:
		return conn{err: fmt.Errorf("no database handle given to the %s store", engine)}
	default:
		return conn{err: fmt.Errorf("a %s database handle given to the %s store", h.Engine(), engine)}
	}
}

// gen returns what the generated queries (internal/dbsqlc) run on, or the
// handle's error. They take times as dbtime.Time, so no conversion is due.
func (c conn) gen() (dbsqlc.DBTX, error) {
	if c.err != nil {
		return nil, c.err
	}
	return c.ex, nil
}

func (c conn) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if c.err != nil {
		return nil, c.err
	}
	return c.ex.ExecContext(ctx, query, conv(args)...)
}

func (c conn) Query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if c.err != nil {
		return nil, c.err
	}
	return c.ex.QueryContext(ctx, query, conv(args)...)
}

// row is what QueryRow returns: a *sql.Row or an error.
type row interface{ Scan(dest ...any) error }

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

func (c conn) QueryRow(ctx context.Context, query string, args ...any) row {
	if c.err != nil {
		return errRow{c.err}
	}
	return c.ex.QueryRowContext(ctx, query, conv(args)...)
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

// tm scans a stored time (text) into *t; NULL leaves the zero time.
type tm struct{ t *time.Time }

// Scan implements sql.Scanner.
func (d tm) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*d.t = time.Time{}
		return nil
	case time.Time:
		*d.t = v.UTC()
		return nil
	case string:
		return d.parse(v)
	case []byte:
		return d.parse(string(v))
	}
	return fmt.Errorf("scanning a time from %T", src)
}

func (d tm) parse(s string) error {
	for _, f := range []string{tsFormat, "2006-01-02 15:04:05.000", "2006-01-02 15:04:05", time.RFC3339Nano} {
		if t, err := time.Parse(f, s); err == nil {
			*d.t = t.UTC()
			return nil
		}
	}
	return fmt.Errorf("scanning a time from %q", s)
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
