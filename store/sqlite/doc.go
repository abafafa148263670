// Package sqlite is the SQLite driver of the store (store.Driver), for one
// replica and the demo: no database server, one file. It uses
// modernc.org/sqlite (pure Go, no cgo, so the static image stays), the
// driver River's riversqlite is run with and golang-migrate's sqlite driver
// is built on, through database/sql. River jobs are inserted in the
// caller's transaction with riversqlite (river.Client[*sql.Tx]). Store is
// the contract's rules (store.DriverStore) over that driver; the rules
// live in package store, not here: this package runs queries and decides
// nothing.
//
// What PostgreSQL gives that SQLite does not is handled here: writers are
// serialised (every transaction is BEGIN IMMEDIATE, in WAL mode with a busy
// timeout) instead of row and advisory locks (locks.go), commit-claim
// tokens come from an AUTOINCREMENT table instead of a sequence, and
// settings announcements are delivered in-process after the commit (one
// process owns the file) instead of by LISTEN/NOTIFY. Times are stored as
// fixed-width UTC text so that text order is time order.
//
// The SQL lives in internal/dbsqlc/*.sql; sqlc generates the Go code
// beside it (sqlc.yaml, make sqlc). Statements it cannot express stay in
// this package, each with a comment saying why: those over River's tables
// (river_job, river_leader), the list API's optional filters (OperationList),
// the lists sqlc numbers wrongly, the batch insert of deliveries, the call
// budget's UPDATE, the status note claim (an upsert whose WHERE takes a
// parameter, which sqlc's SQLite engine leaves unbound) and those of an
// installation copy (generic over store.CopyTables).
package sqlite
