package store

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river"
)

// DriverStore is the store contract (Store) written once over a Driver:
// every rule the contract carries (the transition's step, version and
// ownership checks, binding takeover, the hash chain, dedupe, claims,
// settings audit, the installation copy) lives here, and the driver only
// runs queries. store/postgres and store/sqlite embed one over their
// driver; storetest checks it on each.
type DriverStore struct {
	d   Driver
	now func() time.Time
}

// DriverStoreOpts are optional settings of NewDriverStore; nil means
// defaults.
type DriverStoreOpts struct {
	// NowFunc is the store's clock (time.Now when nil); UTC and
	// microseconds are applied at the boundary (Now).
	NowFunc func() time.Time
}

// NewDriverStore returns the store of d.
func NewDriverStore(d Driver, opts *DriverStoreOpts) *DriverStore {
	s := &DriverStore{d: d, now: time.Now}
	if opts != nil && opts.NowFunc != nil {
		s.now = opts.NowFunc
	}
	return s
}

var _ Store = (*DriverStore)(nil)

// Now returns the store clock's time in UTC, truncated to the microseconds
// both engines keep (PostgreSQL's timestamptz precision, SQLite's text
// format), so values read back compare equal.
func (s *DriverStore) Now() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// DB returns the store's own handle: each statement of a method given it
// runs on its own (autocommit).
func (s *DriverStore) DB() DBTX { return s.d.DB() }

// InTx runs fn in one transaction, committing when fn returns nil and
// rolling back when it returns an error (which InTx returns as is).
// Driver.InTx says what the engine's transaction holds.
func (s *DriverStore) InTx(ctx context.Context, fn func(tx Tx) error) error {
	return s.d.InTx(ctx, fn)
}

// Ping checks that the database answers.
func (s *DriverStore) Ping(ctx context.Context) error { return s.d.Ping(ctx) }

// ListenSettings returns a listener of the settings changes that
// SaveSetting announces (Driver.ListenSettings). Close it when done.
func (s *DriverStore) ListenSettings(ctx context.Context) (SettingsListener, error) {
	return s.d.ListenSettings(ctx)
}

// inTx runs fn with the executor of one transaction of InTx.
func (s *DriverStore) inTx(ctx context.Context, fn func(tx Tx, x Executor) error) error {
	return s.d.InTx(ctx, func(tx Tx) error {
		x, err := s.d.Executor(tx)
		if err != nil {
			return err
		}
		return fn(tx, x)
	})
}

// enqueue inserts jobs in the transaction of x (River's InsertManyTx).
// Empty jobs is a no-op.
func enqueue(ctx context.Context, x Executor, jobs []river.InsertManyParams) error {
	if len(jobs) == 0 {
		return nil
	}
	if _, err := x.JobInsertMany(ctx, jobs); err != nil {
		return fmt.Errorf("enqueueing %d jobs: %w", len(jobs), err)
	}
	return nil
}
