// Package store owns changebot's persistent state: the schema and its
// migrations, the PostgreSQL implementation (pgx v5) of operations,
// bindings, the hash-chained change events, webhook deliveries, callback
// requests and status notes. It must not know the flow: which transitions are
// legal is decided in flows, which calls ApplyTransition, the only writer of
// operations and bindings after creation. SQL lives here and nowhere else.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// Errors of the store's contract. Callers use errors.Is.
var (
	// ErrNotFound: no row with that key.
	ErrNotFound = errors.New("not found")
	// ErrVersionConflict: the row changed since the caller read it
	// (optimistic concurrency); re-read and decide again.
	ErrVersionConflict = errors.New("version conflict")
	// ErrStepMismatch: the operation is no longer at the step the caller
	// expected; nothing was written.
	ErrStepMismatch = errors.New("operation step changed")
	// ErrBindingNotOwned: the binding now belongs to another operation (it
	// was re-applied), so this operation's transition is stale.
	ErrBindingNotOwned = errors.New("binding belongs to another operation")
	// ErrActiveChange: the binding has an operation that is not in a
	// reappliable status.
	ErrActiveChange = errors.New("binding has an active change")
	// ErrDuplicate: a dedupe key (delivery, callback request) was seen before.
	ErrDuplicate = errors.New("duplicate")
)

// File is one file of a change: Action is create, update or delete
// (empty means create-or-update, decided against the repository).
type File struct {
	Path    string `json:"path"`
	Content string `json:"content"`
	Action  string `json:"action,omitempty"`
}

// Operation is one change (DESIGN §2): what was requested and where it
// stands. Step is a flows.StepCode; Status is the binding status it implies.
type Operation struct {
	ID             string
	SubjectID      string
	TargetKey      string
	Project        string // as submitted: "group/repo" or a numeric id
	ProjectID      int64  // resolved GitLab project id, 0 until known
	TargetBranch   string
	SourceBranch   string
	Title          string
	Description    string
	Files          []File
	RequestedBy    string
	ApprovalFirst  bool
	Step           int
	Status         string
	Version        int64
	TicketID       string
	MRIID          int64
	MRWebURL       string
	HeadSHA        string
	PipelineID     int64
	PipelineURL    string
	MergeCommitSHA string
	Rounds         int    // merge/rebase rounds or retries used in the current phase
	Detail         string // the last failure reason, shown to people
	IdempotencyKey string
	StepStartedAt  time.Time
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// Binding is the relation (subject_id, target_key) and the operation that
// currently owns it.
type Binding struct {
	SubjectID   string
	TargetKey   string
	OperationID string
	Status      string
	Version     int64
	UpdatedAt   time.Time
}

// StoreOpts are optional settings of New; nil means defaults.
type StoreOpts struct {
	Logger *slog.Logger
	// NowFunc is the clock; UTC is applied at the boundary.
	NowFunc func() time.Time
	// Schema is the PostgreSQL schema of River's tables (tests use one
	// schema per test); empty means search_path.
	Schema string
}

// Store is the PostgreSQL implementation.
type Store struct {
	pool   *pgxpool.Pool
	jobs   *river.Client[pgx.Tx] // insert-only client, enqueues in our transactions
	logger *slog.Logger
	now    func() time.Time
}

// New returns a store over pool. It builds an insert-only River client so
// that every write can enqueue its follow-up jobs in the same transaction.
func New(pool *pgxpool.Pool, opts *StoreOpts) (*Store, error) {
	if opts == nil {
		opts = &StoreOpts{}
	}
	s := &Store{pool: pool, logger: opts.Logger, now: opts.NowFunc}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	jobs, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: opts.Schema, Logger: s.logger})
	if err != nil {
		return nil, fmt.Errorf("building job inserter: %w", err)
	}
	s.jobs = jobs
	return s, nil
}

// Pool returns the underlying pool.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Now returns the store clock's time in UTC, truncated to PostgreSQL's
// microsecond precision so values read back compare equal.
func (s *Store) Now() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// DB returns the store's own handle: each statement of a method given it
// runs on its own (autocommit).
func (s *Store) DB() DBTX { return poolHandle{s.pool} }

// InTx runs fn in one transaction, committing when fn returns nil and
// rolling back when it returns an error (which InTx returns as is).
func (s *Store) InTx(ctx context.Context, fn func(tx Tx) error) error {
	return s.inTx(ctx, func(tx pgx.Tx) error { return fn(txHandle{tx}) })
}

// inTx runs fn in one pgx transaction.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}

// enqueue inserts jobs in tx. Empty jobs is a no-op.
func (s *Store) enqueue(ctx context.Context, tx pgx.Tx, jobs []river.InsertManyParams) error {
	if len(jobs) == 0 {
		return nil
	}
	if _, err := s.jobs.InsertManyTx(ctx, tx, jobs); err != nil {
		return fmt.Errorf("enqueueing %d jobs: %w", len(jobs), err)
	}
	return nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.pool.Ping(ctx) }

func marshalFiles(files []File) ([]byte, error) {
	if files == nil {
		files = []File{}
	}
	return json.Marshal(files)
}
