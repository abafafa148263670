package postgres

import (
	"context"

	"changebot/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// engine is the name the PostgreSQL implementation gives its handles.
const engine = "postgres"

// querier is what the PostgreSQL implementation runs statements on:
// *pgxpool.Pool and pgx.Tx satisfy it (and so does dbsqlc.DBTX).
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// poolHandle is the store's own handle (Store.DB): statements run on the
// pool.
type poolHandle struct{ pool *pgxpool.Pool }

// Engine implements DBTX.
func (poolHandle) Engine() string { return engine }

// txHandle is a transaction handed out by InTx.
type txHandle struct{ tx pgx.Tx }

// Engine implements DBTX.
func (txHandle) Engine() string { return engine }

// Transaction implements Tx.
func (txHandle) Transaction() {}

// TxOf returns tx, a transaction begun on this store's pool outside InTx
// (tests, the wiring), as a store transaction, so it can be handed to store
// methods and to the callers of Tx. The caller still commits or rolls it
// back.
func TxOf(tx pgx.Tx) store.Tx { return txHandle{tx} }

// PgxTx returns the pgx transaction behind tx, and false when tx is not a
// transaction of this implementation (for tests that read the session, such
// as its backend pid).
func PgxTx(tx store.Tx) (pgx.Tx, bool) {
	h, ok := tx.(txHandle)
	return h.tx, ok
}
