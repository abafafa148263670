// Package postgres is the PostgreSQL implementation (pgx v5) of the store
// contract (store.Store): the schema and its numbered, reversible, embedded
// migrations (migrations/, golang-migrate, then River's own), the SQL of
// every store method, River job inserts in the caller's transaction
// (riverpgxv5, river.Client[pgx.Tx].InsertManyTx), settings announcements
// by LISTEN/NOTIFY (SettingsChannel) and the commit gate's rows. Its
// handles (store.DBTX, store.Tx) wrap a *pgxpool.Pool and a pgx.Tx; TxOf and
// PgxTx convert for the wiring and tests. Only this package, the wiring in
// bot and tests import pgx.
//
// The SQL lives in internal/dbsqlc/*.sql; sqlc generates the Go code
// beside it (sqlc.yaml, make sqlc). Statements it cannot express stay in
// this package, each with a comment saying why: those over River's tables
// (river_job, river_leader), the count built per status at run time, the
// advisory lock, NOTIFY and LISTEN of settings changes.
package postgres
