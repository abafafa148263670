// Package sqlite is the SQLite implementation of the store contract
// (store.Store), for one replica and the demo: no database server, one
// file. It uses modernc.org/sqlite (pure Go, no cgo, so the static image
// stays), the driver River's riversqlite is run with and golang-migrate's
// sqlite driver is built on, through database/sql. River jobs are inserted
// in the caller's transaction with riversqlite (river.Client[*sql.Tx]).
//
// What PostgreSQL gives that SQLite does not is handled here: writers are
// serialised (every transaction is BEGIN IMMEDIATE, in WAL mode with a busy
// timeout) instead of row and advisory locks, commit-claim tokens come from
// an AUTOINCREMENT table instead of a sequence, and settings announcements
// are delivered in-process (one process owns the file) instead of by
// LISTEN/NOTIFY. Times are stored as fixed-width UTC text so that text order
// is time order.
//
// The SQL lives in internal/dbsqlc/*.sql; sqlc generates the Go code
// beside it (sqlc.yaml, make sqlc). Statements it cannot express stay in
// this package, each with a comment saying why: those over River's tables
// (river_job, river_leader), the list API's optional filters (ListChanges)
// and the status note claim (an upsert whose
// WHERE takes a parameter, which sqlc's SQLite engine leaves unbound).
package sqlite
