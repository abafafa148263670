package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// Driver is one database engine below the store's rules (issue 20 point 3,
// after River's riverdriver): its handles and transactions, and the queries
// of its Executor. It decides nothing: which write is legal, what a
// duplicate means, which lock is taken in which order and what a method
// answers are the rules of DriverStore, written once for every engine.
// What really differs between engines stays behind it: the SQL dialect,
// locking (PostgreSQL row and advisory locks, SQLite's one writer that
// BEGIN IMMEDIATE takes), RETURNING forms and how times are encoded.
// store/postgres and store/sqlite implement it; the contract suite
// (storetest) runs DriverStore on each.
type Driver interface {
	// Engine names the engine, as its handles do (DBTX.Engine): "postgres",
	// "sqlite".
	Engine() string
	// Name is the engine's name for people, in errors: "PostgreSQL".
	Name() string
	// DB is the driver's own handle: each statement on its own
	// (autocommit).
	DB() DBTX
	// Executor returns what runs the queries on db, a handle this driver
	// made (DB, or a Tx of InTx or ReadTx); an error naming both engines
	// for a handle of another driver, or for nil.
	Executor(db DBTX) (Executor, error)
	// InTx runs fn in one write transaction, committing when fn returns
	// nil and rolling back when it returns an error (returned as is).
	// PostgreSQL: READ COMMITTED, rows locked as the queries say;
	// SQLite: BEGIN IMMEDIATE, the database's write lock held throughout.
	InTx(ctx context.Context, fn func(tx Tx) error) error
	// ReadTx runs fn in one transaction that reads a single moment of the
	// database. PostgreSQL: REPEATABLE READ, READ ONLY; SQLite: as InTx
	// (the write lock keeps every writer out while it reads).
	ReadTx(ctx context.Context, fn func(tx Tx) error) error
	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// ListenSettings returns a listener of the announcements that
	// SettingQueries.SettingsNotify makes (PostgreSQL LISTEN on its own
	// connection; SQLite: in-process, the listeners of this database).
	ListenSettings(ctx context.Context) (SettingsListener, error)
}

// ErrUniqueViolation is what an Executor's write returns (wrapped, with the
// database's own error) when a unique constraint refused it. The rules
// decide what it means (CreateOperation: a concurrent request with the same
// idempotency key won).
var ErrUniqueViolation = errors.New("unique constraint violated")

// Executor runs the queries of one handle of a Driver: each method is one
// statement (two where an engine needs them, as its doc says), with no rule
// of its own. A read of one row returns ErrNotFound, unwrapped, when there
// is none; other errors are the database's, for the caller to wrap. Times
// go in and come out in UTC at microsecond precision; "now" is always a
// parameter (the store's clock), never the database's, except where a
// method says so.
type Executor interface {
	OperationQueries
	EventQueries
	IntakeQueries
	ApprovalQueries
	StatusNoteQueries
	JobQueries
	CommitClaimQueries
	SettingQueries
	AccountQueries
	CopyQueries
	QueueQueries
	OverviewQueries
	NotificationQueries
	RepoPolicyQueries
	RolloutQueries
}

// OperationQueries are the queries of operations, bindings and deploy
// confirmations.
type OperationQueries interface {
	// OperationGet reads operation id; ErrNotFound.
	OperationGet(ctx context.Context, id string) (Operation, error)
	// OperationGetForUpdate reads operation id and keeps other writers of
	// it waiting until the transaction ends (PostgreSQL: FOR UPDATE;
	// SQLite: the transaction's write lock already does); ErrNotFound.
	OperationGetForUpdate(ctx context.Context, id string) (Operation, error)
	// OperationStepStatusForUpdate reads the step and status of operation
	// id, locked as OperationGetForUpdate locks it; ErrNotFound.
	OperationStepStatusForUpdate(ctx context.Context, id string) (step int, status string, err error)
	// OperationExists reports whether operation id exists.
	OperationExists(ctx context.Context, id string) (bool, error)
	// OperationGetByIdempotencyKey reads the operation submitted with key;
	// ErrNotFound.
	OperationGetByIdempotencyKey(ctx context.Context, key string) (Operation, error)
	// OperationNewestOfMR reads the newest operation (by created_at) of
	// merge request iid of projectID on platform; ErrNotFound.
	OperationNewestOfMR(ctx context.Context, platform string, projectID, iid int64) (Operation, error)
	// OperationListByStatus lists up to limit operations in one of
	// statuses with updated_at in [from, to), oldest first.
	OperationListByStatus(ctx context.Context, statuses []string, from, to time.Time, limit int) ([]Operation, error)
	// OperationListMergedByProject lists up to limit operations of
	// projectID on platform in status (MERGED) whose merge commit is set,
	// oldest first.
	OperationListMergedByProject(ctx context.Context, platform string, projectID int64, status string, limit int) ([]Operation, error)
	// OperationListIDs lists up to limit operation ids greater than after,
	// in order.
	OperationListIDs(ctx context.Context, after string, limit int) ([]string, error)
	// OperationList lists the operations ListParams selects, newest first
	// by id (ListChanges).
	OperationList(ctx context.Context, p ListParams) ([]Operation, error)
	// OperationListWatched lists the operations WatchParams selects, in id
	// order (ListWatchedMRs).
	OperationListWatched(ctx context.Context, p WatchParams) ([]Operation, error)
	// OperationListStuck lists the operations StuckParams selects, oldest
	// first: none of their step's jobs is live (ListStuckOperations; it
	// reads River's jobs).
	OperationListStuck(ctx context.Context, p StuckParams) ([]Operation, error)
	// OperationCountByStatus counts the operations of each of statuses
	// (not empty) and the oldest updated_at of each; a status without
	// operations may be left out.
	OperationCountByStatus(ctx context.Context, statuses []string) ([]StatusAge, error)
	// OperationInsert inserts op as given (Version, times, files; an empty
	// IdempotencyKey is stored as NULL); ErrUniqueViolation (wrapped) when
	// its id or idempotency key is taken.
	OperationInsert(ctx context.Context, op Operation) error
	// OperationUpdate writes every mutable field of op (all but its
	// identity, request and creation fields) to the row of op.ID.
	OperationUpdate(ctx context.Context, op Operation) error
	// ReconcileCandidates lists up to p.Limit operations in status
	// (MERGED) with a merge commit and updated_at inside (p.After,
	// p.Before), ordered by project, target branch and age, each with its
	// watermark verdict (ListReconcileCandidates).
	ReconcileCandidates(ctx context.Context, status string, p ReconcileParams) ([]ReconcileCandidate, error)
	// DeployConfirmationRecord records c confirmed at at; a later
	// confirmation of the same MR moves its time forward, never back.
	DeployConfirmationRecord(ctx context.Context, c DeployConfirmation, at time.Time) error
	// BindingGet reads the binding (subjectID, targetKey); ErrNotFound.
	BindingGet(ctx context.Context, subjectID, targetKey string) (Binding, error)
	// BindingGetForUpdate reads the binding, locked as
	// OperationGetForUpdate locks an operation; ErrNotFound.
	BindingGetForUpdate(ctx context.Context, subjectID, targetKey string) (Binding, error)
	// BindingInsertIfAbsent inserts b at version 1 unless its row exists,
	// and reports whether it did. On PostgreSQL an insert that meets a
	// concurrent one's uncommitted row waits for that transaction.
	BindingInsertIfAbsent(ctx context.Context, b Binding) (bool, error)
	// BindingReset gives the existing row of b to b.OperationID at
	// b.Status, version+1.
	BindingReset(ctx context.Context, b Binding) error
	// BindingSetStatus sets the binding's status, version+1.
	BindingSetStatus(ctx context.Context, subjectID, targetKey, status string, at time.Time) error
}

// EventQueries are the queries of change events and state snapshots.
type EventQueries interface {
	// ChangeEventLast returns the sequence number and hash of the newest
	// event of operationID; ErrNotFound when it has none.
	ChangeEventLast(ctx context.Context, operationID string) (seq int64, hash string, err error)
	// ChangeEventInsert inserts ev as given.
	ChangeEventInsert(ctx context.Context, ev Event) error
	// ChangeEventList lists the events of operationID in sequence order,
	// as stored.
	ChangeEventList(ctx context.Context, operationID string) ([]Event, error)
	// ChangeEventListAfter lists the events of operationID with a sequence
	// number above after, in order, as stored.
	ChangeEventListAfter(ctx context.Context, operationID string, after int64) ([]Event, error)
	// ChangeSnapshotInsert inserts s; one already stored at its sequence
	// number is kept.
	ChangeSnapshotInsert(ctx context.Context, s StateSnapshot) error
	// ChangeSnapshotNearest reads the snapshot of operationID of the
	// highest sequence number that occurred at or before at; ErrNotFound.
	ChangeSnapshotNearest(ctx context.Context, operationID string, at time.Time) (StateSnapshot, error)
}

// IntakeQueries are the queries of webhook deliveries, callback requests
// and note commands.
type IntakeQueries interface {
	// DeliveryInsertMany inserts the deliveries of ds (distinct dedupe
	// keys) whose key is not stored yet, received at receivedAt and, when
	// dispatched, dispatched then, in one statement; it returns the new
	// id of each key it stored.
	DeliveryInsertMany(ctx context.Context, ds []Delivery, receivedAt time.Time, dispatched bool) (map[string]int64, error)
	// DeliveryLockUndispatched returns the ids of up to max undispatched
	// deliveries, oldest first, held until the transaction ends
	// (PostgreSQL: FOR UPDATE SKIP LOCKED, so concurrent callers take
	// disjoint rows; SQLite: the write lock).
	DeliveryLockUndispatched(ctx context.Context, max int) ([]int64, error)
	// DeliveryMarkDispatched marks the deliveries ids dispatched at at.
	DeliveryMarkDispatched(ctx context.Context, ids []int64, at time.Time) error
	// DeliveryGet reads delivery id; ErrNotFound.
	DeliveryGet(ctx context.Context, id int64) (Delivery, error)
	// DeliveryMarkProcessed records outcome as delivery id's, processed at
	// at.
	DeliveryMarkProcessed(ctx context.Context, id int64, outcome string, at time.Time) error
	// DeliveryCount counts the deliveries.
	DeliveryCount(ctx context.Context) (int64, error)
	// DeliveryLastID returns the newest delivery's id, 0 without one.
	DeliveryLastID(ctx context.Context) (int64, error)
	// DeliveryListAfter lists up to 100 deliveries with an id above after,
	// oldest first, without their bodies.
	DeliveryListAfter(ctx context.Context, after int64) ([]Delivery, error)
	// DeliveryPrune deletes up to limit processed deliveries received
	// before before, oldest first, and returns how many.
	DeliveryPrune(ctx context.Context, before time.Time, limit int) (int64, error)
	// CallbackRequestInsertIfNew records the callback request (kind,
	// requestID) unless it is recorded, and reports whether it did.
	CallbackRequestInsertIfNew(ctx context.Context, requestID, kind, operationID, result string, at time.Time) (bool, error)
	// CallbackRequestResult reads the result recorded for (kind,
	// requestID); ErrNotFound.
	CallbackRequestResult(ctx context.Context, kind, requestID string) (string, error)
	// CallbackRequestPrune deletes up to limit callback requests received
	// before before, oldest first, and returns how many.
	CallbackRequestPrune(ctx context.Context, before time.Time, limit int) (int64, error)
	// NoteCommandClaim records note n (its Outcome is ignored) received at
	// at unless it is recorded, and reports whether it did.
	NoteCommandClaim(ctx context.Context, n NoteCommand, at time.Time) (bool, error)
	// NoteCommandSetOutcome records n.Outcome as the outcome of note n.
	NoteCommandSetOutcome(ctx context.Context, n NoteCommand) error
	// NoteCommandActivity counts author's notes received since since, and
	// those of them answered rate_limited.
	NoteCommandActivity(ctx context.Context, author string, since time.Time) (notes, limited int64, err error)
}

// NoteCommand is one row of note_commands as the drivers write it: a note
// whose commands run once (ClaimNote).
type NoteCommand struct {
	// Platform is the note's platform (PlatformOr applied).
	Platform  string
	ProjectID int64
	NoteID    int64
	// MRIID is the merge request the note is on.
	MRIID   int64
	Author  string
	Outcome string
}

// ApprovalQueries are the queries of the approvals given in GitLab.
type ApprovalQueries interface {
	// GitLabApprovalAdd records username's approval of operationID at at
	// unless it is recorded, and reports whether it did.
	GitLabApprovalAdd(ctx context.Context, operationID, username, source string, at time.Time) (bool, error)
	// GitLabApprovalRemove deletes username's approval of operationID and
	// reports whether there was one.
	GitLabApprovalRemove(ctx context.Context, operationID, username string) (bool, error)
	// GitLabApprovalCount counts the approvals of operationID that count:
	// never its requester's.
	GitLabApprovalCount(ctx context.Context, operationID string) (int64, error)
	// GitLabApprovalClear deletes every approval of operationID and
	// returns how many.
	GitLabApprovalClear(ctx context.Context, operationID string) (int64, error)
}

// StatusNoteQueries are the queries of status notes and their claims.
type StatusNoteQueries interface {
	// StatusNoteGet reads the status note of MR iid; ErrNotFound.
	StatusNoteGet(ctx context.Context, platform string, projectID, iid int64) (StatusNote, error)
	// StatusNoteSave writes n, updated at at, unless a newer render of the
	// same note is stored, and reports whether it wrote.
	StatusNoteSave(ctx context.Context, n StatusNote, at time.Time) (bool, error)
	// StatusNoteClaim writes claim c until until unless a claim of its MR
	// is live at now, and reports whether it did (claimed) and whether it
	// replaced an expired claim that was neither recorded nor released
	// (takenOver, see NoteClaim.TakenOver).
	StatusNoteClaim(ctx context.Context, c NoteClaim, until, now time.Time) (claimed, takenOver bool, err error)
	// StatusNoteRenew moves claim c's end to until while c holds the MR,
	// and reports whether it did.
	StatusNoteRenew(ctx context.Context, c NoteClaim, until time.Time) (bool, error)
	// StatusNoteRelease deletes claim c while it holds the MR.
	StatusNoteRelease(ctx context.Context, c NoteClaim) error
	// StatusNoteCurrent reads the NoteState of operation id in one
	// statement; ErrNotFound without such an operation.
	StatusNoteCurrent(ctx context.Context, id string) (NoteState, error)
}

// JobQueries are the statements over River's jobs: River's own API (in a
// transaction only) and the hand-written queries that find a step's jobs
// through their JSON args ("operation_id", "step").
type JobQueries interface {
	// JobInsertMany inserts jobs through River; outside a transaction it
	// fails.
	JobInsertMany(ctx context.Context, jobs []river.InsertManyParams) ([]*rivertype.JobInsertResult, error)
	// JobList lists jobs through River; outside a transaction it fails.
	JobList(ctx context.Context, p *river.JobListParams) (*river.JobListResult, error)
	// JobWakeLiveOfStep counts the live jobs (available, pending,
	// scheduled, running, retryable) of kinds for operationID's step, and
	// makes those that wait (available, scheduled, retryable, due after
	// now) available at now: any replica's fetch takes it, not only after
	// the elected leader's scheduler has promoted it (DESIGN §7).
	JobWakeLiveOfStep(ctx context.Context, operationID string, step int, kinds []string, now time.Time) (live int, err error)
	// JobRetireOfStep deletes the queued jobs (available, pending,
	// scheduled, retryable) of kinds for operationID's step and returns how
	// many.
	JobRetireOfStep(ctx context.Context, operationID string, step int, kinds []string) (int64, error)
	// JobPostponeOfStep moves the scheduled jobs of kinds for operationID's
	// step due before until to until and returns how many.
	JobPostponeOfStep(ctx context.Context, operationID string, step int, kinds []string, until time.Time) (int64, error)
	// JobWakeStaleWaits makes due at now the scheduled jobs WakeParams
	// selects (one per operation, oldest operation first) and returns how
	// many.
	JobWakeStaleWaits(ctx context.Context, p WakeParams, now time.Time) (int64, error)
	// JobLeaderIs reports whether River client clientID leads now (by the
	// database's clock: River's leader rows are written by it).
	JobLeaderIs(ctx context.Context, clientID string) (bool, error)
}

// CommitClaimQueries are the queries of the commit gate's claims.
type CommitClaimQueries interface {
	// CommitClaimInsert writes claim c with a newly minted token unless
	// its (RunID, Step) is claimed, and returns the token and whether it
	// wrote. A zero c.ClaimedAt is the database's clock (SQLite has none
	// of its own: the driver's clock). A refused claim may burn a token.
	CommitClaimInsert(ctx context.Context, c CommitClaim) (token int64, claimed bool, err error)
	// CommitClaimSeed writes claim c as CommitClaimInsert does; a claimed
	// (RunID, Step) is kept unchanged.
	CommitClaimSeed(ctx context.Context, c CommitClaim) error
	// CommitClaimGet reads the claim of (runID, step); ErrNotFound.
	CommitClaimGet(ctx context.Context, runID, step string) (CommitClaim, error)
	// CommitClaimRelease deletes the claim of (runID, step) if it carries
	// token, and reports whether it did.
	CommitClaimRelease(ctx context.Context, runID, step string, token int64) (bool, error)
	// CommitClaimCount counts the claims.
	CommitClaimCount(ctx context.Context) (int64, error)
}

// SettingQueries are the queries of settings, their audit and their
// announcements.
type SettingQueries interface {
	// SettingsLock keeps every other settings write waiting until the
	// transaction ends (PostgreSQL: a transaction-level advisory lock;
	// SQLite: the write lock that the transaction holds already).
	SettingsLock(ctx context.Context) error
	// SettingList lists the settings by key and scope.
	SettingList(ctx context.Context) ([]Setting, error)
	// SettingValue reads the stored value of (key, scope); nil when there
	// is none.
	SettingValue(ctx context.Context, key, scope string) (json.RawMessage, error)
	// SettingUpsert writes s (Key, Scope, Value, UpdatedBy, UpdatedAt) and
	// returns the value as stored (PostgreSQL normalises jsonb).
	SettingUpsert(ctx context.Context, s Setting) (json.RawMessage, error)
	// SettingDelete deletes the value of (key, scope).
	SettingDelete(ctx context.Context, key, scope string) error
	// SettingAuditInsert appends a (its ID is ignored; nil values are
	// NULL).
	SettingAuditInsert(ctx context.Context, a SettingAudit) error
	// SettingAuditList lists the audit of (key, scope), oldest first.
	SettingAuditList(ctx context.Context, key, scope string) ([]SettingAudit, error)
	// SettingsNotify announces the change of (key, scope) to every
	// listener (Driver.ListenSettings) once the transaction commits, and
	// never when it rolls back (PostgreSQL: NOTIFY; SQLite: in-process
	// after the commit).
	SettingsNotify(ctx context.Context, key, scope string) error
}

// AccountQueries are the queries of the GitLab accounts' waits and call
// budgets (table gitlab_account_waits).
type AccountQueries interface {
	// GitLabAccountBlockedUntil reads the wait of account; ErrNotFound.
	GitLabAccountBlockedUntil(ctx context.Context, account string) (time.Time, error)
	// GitLabAccountBlock records account's wait until until (at at),
	// keeping a later one.
	GitLabAccountBlock(ctx context.Context, account string, until, at time.Time) error
	// GitLabBudgetTake refills account's bucket up to p.Now and takes p.N
	// calls when p.Keep + p.N are there and the account does not wait, in
	// one statement; ErrNotFound when the account has no row.
	GitLabBudgetTake(ctx context.Context, p BudgetTakeParams) (BudgetTake, error)
	// GitLabBudgetEnsure creates account's row (a full bucket, no wait)
	// unless it exists.
	GitLabBudgetEnsure(ctx context.Context, account string, at time.Time) error
	// GitLabBudgetClamp refills account's bucket up to p.Now and lowers it
	// to p.Remaining when it holds more; an account without a row is left
	// alone.
	GitLabBudgetClamp(ctx context.Context, p BudgetClampParams) error
}

// CopyQueries are the statements of an installation copy (Export, Import):
// generic over the columns of CopyTables, so they are not sqlc's.
type CopyQueries interface {
	// CopyTableNames lists the database's tables.
	CopyTableNames(ctx context.Context) ([]string, error)
	// CopyTableColumns lists the columns of table.
	CopyTableColumns(ctx context.Context, table string) ([]string, error)
	// CopyTableRead reads every row of t in key order, each value of the Go
	// type its ColumnKind names (Snapshot.Rows).
	CopyTableRead(ctx context.Context, t Table) ([][]any, error)
	// CopyTableCount counts the rows of table (a CopyTables or
	// IgnoredTables name, or JobsTable).
	CopyTableCount(ctx context.Context, table string) (int, error)
	// CopyTablesLock keeps every other writer of tables out until the
	// transaction ends (PostgreSQL: LOCK TABLE … IN EXCLUSIVE MODE;
	// SQLite: the write lock held already).
	CopyTablesLock(ctx context.Context, tables []string) error
	// CopyTableWrite inserts rows (Snapshot.Rows of t) into t.
	CopyTableWrite(ctx context.Context, t Table, rows [][]any) error
	// CopyCountersReset moves the engine's counters past the values of
	// the rows written: the ids of deliveries and audit rows, the commit
	// claim tokens.
	CopyCountersReset(ctx context.Context) error
}

// EncodeFiles returns files as every driver stores them (column
// operations.files): a JSON list, [] for nil.
func EncodeFiles(files []File) ([]byte, error) {
	if files == nil {
		files = []File{}
	}
	b, err := json.Marshal(files)
	if err != nil {
		return nil, fmt.Errorf("encoding files: %w", err)
	}
	return b, nil
}

// DecodeFiles decodes the stored files (EncodeFiles) of operation id.
func DecodeFiles(id string, raw []byte) ([]File, error) {
	var files []File
	if err := json.Unmarshal(raw, &files); err != nil {
		return nil, fmt.Errorf("decoding files of %s: %w", id, err)
	}
	return files, nil
}

// NullText returns s as a nullable text column: nil (NULL) for "", as the
// drivers store an operation without an idempotency key (unique where
// set).
func NullText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// TextOf returns the text of a nullable column, "" for NULL.
func TextOf(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
