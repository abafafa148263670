// Package postgres is the PostgreSQL driver (pgx v5) of the store
// (store.Driver): the schema and its numbered, reversible, embedded
// migrations (migrations/, golang-migrate, then River's own), the queries
// of every store method, River job inserts in the caller's transaction
// (riverpgxv5, river.Client[pgx.Tx].InsertManyTx), settings announcements
// by LISTEN/NOTIFY (SettingsChannel) and the commit gate's rows. Store is
// the contract's rules (store.DriverStore) over that driver; the rules
// live in package store, not here: this package runs queries and decides
// nothing. Its handles (store.DBTX, store.Tx) wrap a *pgxpool.Pool and a
// pgx.Tx; TxOf and PgxTx convert for the wiring and tests. Only this
// package, the wiring in bot and tests import pgx.
//
// What is PostgreSQL's own stays here: row locks (SELECT … FOR UPDATE, FOR
// UPDATE SKIP LOCKED), the settings advisory lock, LOCK TABLE of a copy,
// sequences, COPY, jsonb and arrays (unnest, ANY).
//
// The SQL lives in internal/dbsqlc/*.sql; sqlc generates the Go code
// beside it (sqlc.yaml, make sqlc). Statements it cannot express stay in
// this package, each with a comment saying why: those over River's tables
// (river_job, river_leader), the count built per status at run time, the
// advisory lock, NOTIFY and LISTEN of settings changes, and those of an
// installation copy (generic over store.CopyTables).
package postgres
