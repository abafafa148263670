// Package chaos holds the chaos run (DESIGN §6, issue 5 point 6): several
// changebot replicas in subprocesses on one PostgreSQL schema, an in-memory
// GitLab that duplicates, reorders and drops webhooks and fails some API
// calls, and one replica killed with SIGKILL every few seconds; the run
// checks that every change ends in an explicit state and that no side effect
// happened twice. It has tests only (`make chaos` runs the long version) and
// must not be imported.
package chaos
