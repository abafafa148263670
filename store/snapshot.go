package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// ColumnKind is the engine-neutral type of a copied column: what Go value
// a Snapshot holds for it (see Snapshot.Rows).
type ColumnKind int

// Column kinds and the Go value of each in a Snapshot row.
const (
	// KindText is a string.
	KindText ColumnKind = iota
	// KindNullText is a string or nil.
	KindNullText
	// KindInt is an int64.
	KindInt
	// KindBool is a bool.
	KindBool
	// KindTime is a time.Time in UTC, microsecond precision.
	KindTime
	// KindNullTime is a time.Time or nil.
	KindNullTime
	// KindJSON is a JSON document as []byte (an engine may have reformatted
	// it: PostgreSQL's jsonb does; event hashes cover the canonical form,
	// ComputeHash, so a chain verifies either way).
	KindJSON
	// KindNullJSON is a JSON document as []byte, or nil.
	KindNullJSON
	// KindBytes is raw bytes ([]byte), kept byte for byte.
	KindBytes
	// KindFloat is a float64.
	KindFloat
)

// Column is one copied column of a Table.
type Column struct {
	Name string
	Kind ColumnKind
}

// Table is one table an installation copy carries, with every column it
// has: an engine's Export refuses a table whose columns differ (a
// migration added one and CopyTables was not told), so nothing is dropped
// unnoticed.
type Table struct {
	Name string
	// Columns in the order Snapshot rows hold their values.
	Columns []Column
	// Key are the columns rows are exported in order of (ascending).
	Key []string
}

// ColumnNames returns t's column names, comma-separated, for SQL.
func (t Table) ColumnNames() string {
	names := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

func cols(spec ...any) []Column {
	out := make([]Column, 0, len(spec)/2)
	for i := 0; i < len(spec); i += 2 {
		out = append(out, Column{Name: spec[i].(string), Kind: spec[i+1].(ColumnKind)})
	}
	return out
}

// CopyTables are the tables `changebot copy` carries from one installation
// to another, in an order that inserts every referenced row before its
// references (operations before bindings, events and approvals). Left out,
// on purpose: status_note_claims (leases of the process that wrote a note,
// which is gone; the next refresh claims again), the token counter of
// commit claims (each engine's Import moves its own past the copied
// tokens) and River's tables (jobs travel through River's API:
// Snapshot.Jobs). Schema as of PostgreSQL migration 0024 and SQLite 0012.
var CopyTables = []Table{
	{Name: "operations", Key: []string{"id"}, Columns: cols(
		"id", KindText, "platform", KindText, "subject_id", KindText, "target_key", KindText, "project", KindText,
		"project_id", KindInt, "target_branch", KindText, "source_branch", KindText, "title", KindText,
		"description", KindText, "files", KindJSON, "requested_by", KindText, "approval_first", KindBool,
		"step", KindInt, "status", KindText, "version", KindInt, "ticket_id", KindText, "mr_iid", KindInt,
		"mr_web_url", KindText, "head_sha", KindText, "pipeline_id", KindInt, "pipeline_url", KindText,
		"merge_commit_sha", KindText, "rounds", KindInt, "detail", KindText, "idempotency_key", KindNullText,
		"rollout_id", KindText, "adopted", KindBool, "step_started_at", KindTime, "created_at", KindTime, "updated_at", KindTime)},
	{Name: "bindings", Key: []string{"subject_id", "target_key"}, Columns: cols(
		"subject_id", KindText, "target_key", KindText, "operation_id", KindText, "status", KindText,
		"version", KindInt, "updated_at", KindTime)},
	{Name: "change_events", Key: []string{"operation_id", "seq"}, Columns: cols(
		"operation_id", KindText, "seq", KindInt, "type", KindText, "from_step", KindInt, "to_step", KindInt,
		"from_status", KindText, "to_status", KindText, "actor", KindText, "source", KindText,
		"payload", KindJSON, "schema_version", KindInt, "occurred_at", KindTime, "prev_hash", KindText,
		"hash", KindText)},
	{Name: "gitlab_approvals", Key: []string{"operation_id", "username"}, Columns: cols(
		"operation_id", KindText, "username", KindText, "source", KindText, "approved_at", KindTime)},
	{Name: "webhook_deliveries", Key: []string{"id"}, Columns: cols(
		"id", KindInt, "dedupe_key", KindText, "event", KindText, "project_id", KindInt, "body", KindBytes,
		"received_at", KindTime, "processed_at", KindNullTime, "outcome", KindText, "dispatched_at", KindNullTime)},
	{Name: "callback_requests", Key: []string{"kind", "request_id"}, Columns: cols(
		"request_id", KindText, "kind", KindText, "operation_id", KindText, "result", KindText,
		"received_at", KindTime)},
	{Name: "note_commands", Key: []string{"platform", "project_id", "note_id"}, Columns: cols(
		"platform", KindText, "project_id", KindInt, "note_id", KindInt, "mr_iid", KindInt, "author", KindText, "outcome", KindText,
		"received_at", KindTime)},
	{Name: "status_notes", Key: []string{"platform", "project_id", "mr_iid"}, Columns: cols(
		"platform", KindText, "project_id", KindInt, "mr_iid", KindInt, "note_id", KindInt, "operation_id", KindText,
		"rendered_seq", KindInt, "updated_at", KindTime)},
	{Name: "commit_claims", Key: []string{"run_id", "step"}, Columns: cols(
		"run_id", KindText, "step", KindText, "status", KindText, "branch", KindText, "seq", KindInt,
		"token", KindInt, "claimed_at", KindTime)},
	{Name: "deploy_confirmations", Key: []string{"project_id", "target_branch", "mr_iid"}, Columns: cols(
		"project_id", KindInt, "target_branch", KindText, "mr_iid", KindInt, "confirmed_at", KindTime)},
	{Name: "settings", Key: []string{"key", "scope"}, Columns: cols(
		"key", KindText, "scope", KindText, "value", KindJSON, "updated_by", KindText, "updated_at", KindTime)},
	{Name: "settings_audit", Key: []string{"id"}, Columns: cols(
		"id", KindInt, "key", KindText, "scope", KindText, "old_value", KindNullJSON, "new_value", KindNullJSON,
		"updated_by", KindText, "updated_at", KindTime)},
	{Name: "gitlab_account_waits", Key: []string{"account"}, Columns: cols(
		"account", KindText, "blocked_until", KindTime, "updated_at", KindTime,
		"tokens", KindFloat, "refilled_us", KindInt, "granted", KindBool)},
	{Name: "merge_queues", Key: []string{"platform", "project_id", "target_branch"}, Columns: cols(
		"platform", KindText, "project_id", KindInt, "target_branch", KindText, "head_operation_id", KindText,
		"head_since", KindNullTime, "frozen_by", KindText, "frozen_reason", KindText, "frozen_at", KindNullTime,
		"updated_at", KindTime, "turn_avg_ms", KindInt)},
	{Name: "merge_queue_fronts", Key: []string{"operation_id"}, Columns: cols(
		"operation_id", KindText, "moved_by", KindText, "reason", KindText, "moved_at", KindTime)},
	{Name: "repo_policies", Key: []string{"platform", "project_id", "branch"}, Columns: cols(
		"platform", KindText, "project_id", KindInt, "branch", KindText, "sha", KindText, "body", KindText,
		"read_at", KindTime)},
	// The state each rollout last notified: carried, so that the target
	// does not tell a rollout's state again.
	{Name: "rollouts", Key: []string{"rollout_id"}, Columns: cols(
		"rollout_id", KindText, "state", KindText, "notices", KindInt, "updated_at", KindTime)},
}

// IgnoredTables are the tables of an installation that a copy leaves
// behind on purpose (see CopyTables); a target holding rows in them is
// still refused, as not empty. change_snapshots is derived from the events
// (a replay writes them again); notification_deliveries is the log of
// notifications already sent from the source.
var IgnoredTables = []string{"status_note_claims", "change_snapshots", "notification_deliveries"}

// UnknownTableError is an Export's refusal of a database holding a table
// the copy does not know: a migration added it and CopyTables (or
// IgnoredTables) was not told, so the copy would leave its rows behind.
type UnknownTableError struct {
	Tables []string
}

func (e *UnknownTableError) Error() string {
	return fmt.Sprintf("the database has tables the copy does not know (%s): is it migrated by a newer changebot?",
		strings.Join(e.Tables, ", "))
}

// CheckTables returns an *UnknownTableError when have (the tables of a
// database) holds one that is not in CopyTables or IgnoredTables and is
// not bookkeeping: River's (river_*), the migrations' and the engines' own
// counters (commit_claim_tokens, sqlite_sequence).
func CheckTables(have []string) error {
	known := map[string]bool{"changebot_schema_migrations": true, "commit_claim_tokens": true, "sqlite_sequence": true}
	for _, t := range CopyTables {
		known[t.Name] = true
	}
	for _, n := range IgnoredTables {
		known[n] = true
	}
	var unknown []string
	for _, n := range have {
		if !known[n] && !strings.HasPrefix(n, "river_") {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return &UnknownTableError{Tables: unknown}
	}
	return nil
}

// JobsTable is the name Snapshot counts its jobs under.
const JobsTable = "river_job"

// CopyJobStates are the states of the jobs a copy carries: every job not
// finished. A running job of a source that is not served belongs to a
// process that is gone; on the target it runs again (as River's rescuer
// would have made it do).
var CopyJobStates = []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStateScheduled,
	rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStatePending}

// Snapshot is an installation as stored, read in one transaction by an
// engine's Export and written by another's Import.
type Snapshot struct {
	// Rows holds, per CopyTables name, the rows in key order; each row
	// holds one value per column of the table in its order, of the Go type
	// its ColumnKind names.
	Rows map[string][][]any
	// Jobs are the unfinished jobs (CopyJobStates) in id order.
	Jobs []*rivertype.JobRow
}

// TableCount is how many rows a copy carried of one table.
type TableCount struct {
	Table string
	Rows  int
}

// Counts returns the rows of each table of CopyTables, then the jobs
// (JobsTable), in that order.
func (s *Snapshot) Counts() []TableCount {
	out := make([]TableCount, 0, len(CopyTables)+1)
	for _, t := range CopyTables {
		out = append(out, TableCount{Table: t.Name, Rows: len(s.Rows[t.Name])})
	}
	return append(out, TableCount{Table: JobsTable, Rows: len(s.Jobs)})
}

// NotEmptyError is an Import's refusal of a target that already holds
// rows: Rows counts them per table.
type NotEmptyError struct {
	Rows map[string]int
}

func (e *NotEmptyError) Error() string {
	names := make([]string, 0, len(e.Rows))
	for n := range e.Rows {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s has %d rows", n, e.Rows[n])
	}
	return "the target database is not empty (" + strings.Join(parts, ", ") + "): copy only into a newly migrated database"
}

// SchemaMismatchError is an Export's refusal of a table whose columns are
// not the ones CopyTables lists.
type SchemaMismatchError struct {
	Table      string
	Have, Want []string
}

func (e *SchemaMismatchError) Error() string {
	return fmt.Sprintf("table %s has columns %s, the copy knows %s: is the source migrated to this version of changebot?",
		e.Table, strings.Join(e.Have, ","), strings.Join(e.Want, ","))
}

// CheckColumns returns a *SchemaMismatchError when have (the columns a
// database reports for t, any order) are not t's.
func CheckColumns(t Table, have []string) error {
	want := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		want[i] = c.Name
	}
	h := append([]string(nil), have...)
	w := append([]string(nil), want...)
	sort.Strings(h)
	sort.Strings(w)
	if strings.Join(h, ",") != strings.Join(w, ",") {
		return &SchemaMismatchError{Table: t.Name, Have: h, Want: w}
	}
	return nil
}

// RawJobArgs are a copied job's arguments as stored: the kind and the
// encoded JSON, given to River's InsertMany unchanged (River's unique key
// by args reads the encoded JSON with its keys sorted, so the copy's key
// is the source's).
type RawJobArgs struct {
	JobKind string
	Encoded []byte
}

// Kind implements river.JobArgs.
func (a RawJobArgs) Kind() string { return a.JobKind }

// MarshalJSON returns the encoded arguments.
func (a RawJobArgs) MarshalJSON() ([]byte, error) { return a.Encoded, nil }

// CopyJobParams returns the insert, through River's InsertMany, of job j on
// another database: the same kind, arguments, queue, priority, maximum
// attempts, time (a past time makes it available at once), tags and
// metadata. A unique job stays unique by kind and args in the states it was
// unique in (every unique job of changebot is: flows' uniqueActive,
// retention's); CheckCopiedJobs checks the key River computed is the
// source's. The attempt count starts again at 0.
func CopyJobParams(j *rivertype.JobRow) river.InsertManyParams {
	opts := &river.InsertOpts{Queue: j.Queue, Priority: j.Priority, MaxAttempts: j.MaxAttempts,
		ScheduledAt: j.ScheduledAt, Tags: j.Tags, Metadata: CopyJobMetadata(j.Metadata)}
	if len(j.UniqueKey) > 0 {
		opts.UniqueOpts = river.UniqueOpts{ByArgs: true, ByState: j.UniqueStates}
	}
	return river.InsertManyParams{Args: RawJobArgs{JobKind: j.Kind, Encoded: j.EncodedArgs}, InsertOpts: opts}
}

// uniqueNonceKey is the metadata key River's SQLite driver writes on each
// insert to tell a new job from a duplicate (riverdriver's
// UniqueInsertMetadataKey); it belongs to the insert, not the job.
const uniqueNonceKey = "river:unique_nonce"

// CopyJobMetadata is a job's metadata as a copy inserts it: without River's
// insert nonce (uniqueNonceKey); unchanged when it is not a JSON object.
func CopyJobMetadata(meta []byte) []byte {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(meta, &m); err != nil {
		return meta
	}
	if _, ok := m[uniqueNonceKey]; !ok {
		return meta
	}
	delete(m, uniqueNonceKey)
	out, err := json.Marshal(m)
	if err != nil {
		return meta
	}
	return out
}

// CheckCopiedJobs checks the results of inserting CopyJobParams of src, in
// order: every job inserted (none skipped as a duplicate) and unique under
// the source's key.
func CheckCopiedJobs(src []*rivertype.JobRow, res []*rivertype.JobInsertResult) error {
	if len(res) != len(src) {
		return fmt.Errorf("inserted %d of %d jobs", len(res), len(src))
	}
	for i, r := range res {
		j := src[i]
		if r.UniqueSkippedAsDuplicate {
			return fmt.Errorf("job %d (%s %s) was skipped as a duplicate of job %d", j.ID, j.Kind, j.EncodedArgs, r.Job.ID)
		}
		if !bytes.Equal(r.Job.UniqueKey, j.UniqueKey) {
			return fmt.Errorf("job %d (%s %s): its unique key on the target differs from the source's (unique by more than kind and args?)",
				j.ID, j.Kind, j.EncodedArgs)
		}
	}
	return nil
}
