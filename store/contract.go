package store

import (
	"context"
	"time"

	"github.com/riverqueue/river"
)

// Store is the contract every implementation of changebot's state keeps
// (DriverStore, over the driver of store/postgres or store/sqlite;
// storetest.Run checks it). Methods that take a DBTX run on the handle
// given (DB, or a Tx of InTx); the others open what they need themselves.
// Jobs given to a write are enqueued in the same transaction as the write:
// both commit, or neither. Each method's doc is DriverStore's, which the
// contract suite pins.
type Store interface {
	Handles
	Operations
	Events
	Intake
	Approvals
	StatusNotes
	Jobs
	CommitClaims
	Settings
	AccountWaits
	Queues
	Notifications
	RepoPolicies
	Rollouts
}

// Handles are the store's handles, transactions and clock.
type Handles interface {
	// DB is the store's own handle: each statement on its own.
	DB() DBTX
	// InTx runs fn in one transaction, committing when fn returns nil.
	InTx(ctx context.Context, fn func(tx Tx) error) error
	// Now is the store clock's time in UTC, at the precision the store
	// keeps, so values read back compare equal.
	Now() time.Time
	// Ping checks that the database answers.
	Ping(ctx context.Context) error
}

// Operations are the operations and their bindings (DESIGN §2).
type Operations interface {
	CreateOperation(ctx context.Context, p CreateParams) (op Operation, created bool, err error)
	ApplyTransition(ctx context.Context, p TransitionParams) (Operation, Event, error)
	GetOperation(ctx context.Context, db DBTX, id string) (Operation, error)
	OperationExists(ctx context.Context, db DBTX, id string) (bool, error)
	FindOperationByIdempotencyKey(ctx context.Context, db DBTX, key string) (Operation, error)
	FindOperationByMR(ctx context.Context, db DBTX, platform string, projectID, iid int64) (Operation, error)
	ListOperationsByStatus(ctx context.Context, db DBTX, statuses []string, from, to time.Time, limit int) ([]Operation, error)
	ListMergedByProject(ctx context.Context, db DBTX, platform string, projectID int64, limit int) ([]Operation, error)
	ListOperationIDs(ctx context.Context, db DBTX, after string, limit int) ([]string, error)
	GetBinding(ctx context.Context, db DBTX, subjectID, targetKey string) (Binding, error)
	CountActive(ctx context.Context, db DBTX) (int, error)
	CountByStatusWithAge(ctx context.Context, db DBTX, statuses []string) ([]StatusAge, error)
	ReadOverview(ctx context.Context, db DBTX, statuses []string, discardedSince time.Time) (Overview, error)
	ListReconcileCandidates(ctx context.Context, db DBTX, p ReconcileParams) ([]ReconcileCandidate, error)
	RecordDeployConfirmation(ctx context.Context, db DBTX, c DeployConfirmation) error
	ListStuckOperations(ctx context.Context, db DBTX, p StuckParams) ([]Operation, error)
	ListWatchedMRs(ctx context.Context, db DBTX, p WatchParams) ([]Operation, error)
	ListChanges(ctx context.Context, db DBTX, p ListParams) ([]Operation, error)
}

// Events are the hash-chained change events (DESIGN §4).
type Events interface {
	AppendEvent(ctx context.Context, operationID string, p EventParams, jobs ...river.InsertManyParams) (Event, error)
	ListEvents(ctx context.Context, db DBTX, operationID string) ([]Event, error)
	ReadHistory(ctx context.Context, id string) (History, error)
	// ListEventsAfter returns the events of operationID with a sequence
	// number above after, in order, upcast (a replay from a snapshot).
	ListEventsAfter(ctx context.Context, db DBTX, operationID string, after int64) ([]Event, error)
	// PutSnapshot stores a snapshot; one already stored at its sequence
	// number is kept (snapshots of one event are equal).
	PutSnapshot(ctx context.Context, db DBTX, s StateSnapshot) error
	// NearestSnapshot returns the operation's snapshot of the highest
	// sequence number whose event happened at or before at; false when
	// there is none.
	NearestSnapshot(ctx context.Context, db DBTX, operationID string, at time.Time) (StateSnapshot, bool, error)
}

// Intake is what arrives from outside: webhook deliveries, callback
// requests and the commands of notes.
type Intake interface {
	InsertDelivery(ctx context.Context, d Delivery, job func(id int64) river.InsertManyParams) (id int64, inserted bool, err error)
	// InsertDeliveries stores the deliveries of ds whose DedupeKey is new
	// (the first of each key; FirstOfKey) with one statement, and enqueues
	// job(id) for each one stored, all in one transaction: the group commit
	// of the webhook intake (issue 12). out[i] answers ds[i]. On an error
	// nothing is stored or enqueued, and out is nil.
	InsertDeliveries(ctx context.Context, ds []Delivery, job func(id int64) river.InsertManyParams) (out []DeliveryInsert, err error)
	// StoreDeliveries stores the deliveries of ds whose DedupeKey is new
	// as InsertDeliveries does, without enqueueing their jobs: they wait
	// (DispatchedAt nil) for DispatchDeliveries. On PostgreSQL it is one
	// autocommit statement, the intake's one durable round trip (issue 12).
	StoreDeliveries(ctx context.Context, ds []Delivery) (out []DeliveryInsert, err error)
	// DispatchDeliveries enqueues job(id) for at most max stored deliveries
	// whose jobs are not enqueued yet, oldest first, and marks them
	// dispatched, in one transaction; concurrent callers (replicas) never
	// enqueue one delivery twice. It returns how many it enqueued.
	DispatchDeliveries(ctx context.Context, max int, job func(id int64) river.InsertManyParams) (n int, err error)
	GetDelivery(ctx context.Context, db DBTX, id int64) (Delivery, error)
	MarkDeliveryProcessed(ctx context.Context, db DBTX, id int64, outcome string) error
	CountDeliveries(ctx context.Context, db DBTX) (int, error)
	LastDeliveryID(ctx context.Context, db DBTX) (int64, error)
	DeliveriesAfter(ctx context.Context, db DBTX, after int64) ([]Delivery, error)
	InsertCallbackRequest(ctx context.Context, db DBTX, requestID, kind, operationID, result string) error
	CallbackResult(ctx context.Context, db DBTX, kind, requestID string) (string, error)
	ClaimNote(ctx context.Context, db DBTX, platform string, projectID, noteID, iid int64, author string) (bool, error)
	SetNoteOutcome(ctx context.Context, db DBTX, platform string, projectID, noteID int64, outcome string) error
	NoteActivity(ctx context.Context, db DBTX, author string, since time.Time) (notes, limited int, err error)
	PruneIntake(ctx context.Context, table string, before time.Time, limit int) (int64, error)
}

// Approvals are the approvals given in GitLab.
type Approvals interface {
	AddGitLabApproval(ctx context.Context, db DBTX, operationID, username, source string) (added bool, count int, err error)
	RemoveGitLabApproval(ctx context.Context, db DBTX, operationID, username string) (bool, error)
	CountGitLabApprovals(ctx context.Context, db DBTX, operationID string) (int, error)
	ClearGitLabApprovals(ctx context.Context, db DBTX, operationID string) (int, error)
}

// StatusNotes are the status comments and their claims (DESIGN §7).
type StatusNotes interface {
	GetStatusNote(ctx context.Context, db DBTX, platform string, projectID, iid int64) (StatusNote, error)
	// StatusNoteState reads operation id's MR, newest event and the MR's
	// recorded status note in one statement (no transaction), so a refresh
	// that finds the note current writes nothing; ErrNotFound (wrapped)
	// without such an operation.
	StatusNoteState(ctx context.Context, db DBTX, id string) (NoteState, error)
	SaveStatusNote(ctx context.Context, db DBTX, n StatusNote) (bool, error)
	ClaimStatusNote(ctx context.Context, platform string, projectID, iid int64, lease time.Duration) (c NoteClaim, ok bool, err error)
	RenewStatusNote(ctx context.Context, c NoteClaim, lease time.Duration) (ok bool, err error)
	RecordStatusNote(ctx context.Context, c NoteClaim, n StatusNote) (bool, error)
	ReleaseStatusNote(ctx context.Context, db DBTX, c NoteClaim) error
}

// Jobs are the reads and writes of the job queue's rows that must agree
// with the operations' (one job per operation and step, waking waits).
type Jobs interface {
	ResumeStep(ctx context.Context, p ResumeStepParams) (bool, error)
	RetireStepJobs(ctx context.Context, db DBTX, operationID string, step int, kinds []string) (int, error)
	WakeStep(ctx context.Context, db DBTX, operationID string, step int, kinds []string) (bool, error)
	WakeStaleWaits(ctx context.Context, db DBTX, p WakeParams) (int, error)
	// PostponeStepJobs moves the scheduled jobs of kinds for operationID's
	// step that are due before until to until, and returns how many it
	// moved: a webhook for the change's merge request arrived, so its next
	// poll waits a whole interval (issue 12 point 4). One statement.
	PostponeStepJobs(ctx context.Context, db DBTX, operationID string, step int, kinds []string, until time.Time) (int, error)
	IsJobLeader(ctx context.Context, db DBTX, clientID string) (bool, error)
}

// CommitClaims are the rows of the commit gate (flows/commitgate.DBStore).
type CommitClaims interface {
	ClaimCommit(ctx context.Context, db DBTX, c CommitClaim) (token int64, claimed bool, err error)
	SeedCommitClaim(ctx context.Context, db DBTX, c CommitClaim) error
	GetCommitClaim(ctx context.Context, db DBTX, runID, step string) (CommitClaim, error)
	ReleaseCommitClaim(ctx context.Context, db DBTX, runID, step string, token int64) (bool, error)
	CountCommitClaims(ctx context.Context, db DBTX) (int, error)
}

// Settings are the runtime settings, their audit and the announcements of
// their changes.
type Settings interface {
	ListSettings(ctx context.Context, db DBTX) ([]Setting, error)
	SaveSetting(ctx context.Context, p SaveSettingParams) (Setting, error)
	ListSettingAudit(ctx context.Context, db DBTX, key, scope string) ([]SettingAudit, error)
	ListenSettings(ctx context.Context) (SettingsListener, error)
}

// AccountWaits are the waits GitLab asked of an account (issue 10 point 4).
type AccountWaits interface {
	AccountBlockedUntil(ctx context.Context, account string) (time.Time, error)
	BlockAccountUntil(ctx context.Context, account string, until time.Time) error
	// TakeAccountBudget takes p.N calls from the account's call budget,
	// shared by every replica (issue 12 point 4): one statement.
	TakeAccountBudget(ctx context.Context, p BudgetTakeParams) (BudgetTake, error)
	// ClampAccountBudget lowers the account's budget to remaining calls
	// (GitLab's RateLimit-Remaining) when it holds more; one statement.
	ClampAccountBudget(ctx context.Context, p BudgetClampParams) error
}

// BudgetRate is the shape of an account's call budget: a token bucket of
// Capacity calls refilled at PerSecond calls per second.
type BudgetRate struct {
	// Capacity is the most calls the bucket holds (its burst); a new
	// account's bucket starts full.
	Capacity float64
	// PerSecond is how many calls per second flow back into the bucket.
	PerSecond float64
}

// BudgetTakeParams are the arguments of TakeAccountBudget.
type BudgetTakeParams struct {
	// Account is the GitLab adapter's key of one account.
	Account string
	// Now is the caller's clock: the bucket is refilled up to Now (never
	// back: a replica whose clock lags refills nothing) and the account's
	// wait (BlockAccountUntil) compared with it.
	Now  time.Time
	Rate BudgetRate
	// Keep is how many calls the take must leave in the bucket: a take
	// is granted only when Keep + N calls are there after the refill (the
	// reserve that background work leaves to work a person waits on; 0
	// for that work).
	Keep float64
	// N is how many calls to take (1 per request).
	N float64
}

// BudgetTake is the answer of TakeAccountBudget.
type BudgetTake struct {
	// Granted reports whether the calls were taken: false when the account
	// waits (BlockedUntil after Now) or the bucket holds fewer than Keep +
	// N calls.
	Granted bool
	// Tokens is what the bucket holds after the take (a fraction while it
	// refills).
	Tokens float64
	// BlockedUntil is the account's wait, the zero time or a past moment
	// when there is none.
	BlockedUntil time.Time
}

// BudgetClampParams are the arguments of ClampAccountBudget.
type BudgetClampParams struct {
	Account   string
	Now       time.Time
	Rate      BudgetRate
	Remaining float64
}
