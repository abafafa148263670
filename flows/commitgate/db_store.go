package commitgate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"changebot/store"
)

// Claims is what DBStore needs from the store (implemented by the
// database store: commit_claims rows keyed by run and step, tokens from a
// database sequence).
type Claims interface {
	ClaimCommit(ctx context.Context, db store.DBTX, c store.CommitClaim) (token int64, claimed bool, err error)
	SeedCommitClaim(ctx context.Context, db store.DBTX, c store.CommitClaim) error
	GetCommitClaim(ctx context.Context, db store.DBTX, runID, step string) (store.CommitClaim, error)
	ReleaseCommitClaim(ctx context.Context, db store.DBTX, runID, step string, token int64) (bool, error)
	CountCommitClaims(ctx context.Context, db store.DBTX) (int, error)
}

// DBStore is the production Store: claims live in the database store
// (Claims) and are written on the handle db, the store's own or a
// transaction. It is safe for concurrent use when db is (the store's own
// handle is; a transaction is not).
type DBStore struct {
	st  Claims
	db  store.DBTX
	now func() time.Time // nil: the database's clock
}

// NewDBStore returns a DBStore writing through st on db.
func NewDBStore(st Claims, db store.DBTX) *DBStore {
	return &DBStore{st: st, db: db}
}

// InTx returns a DBStore that runs in tx, so a caller can claim inside its
// own transaction and have the claim and the state it writes commit or
// roll back together (fencing). A concurrent claim of the same ref waits
// until tx ends.
func (s *DBStore) InTx(tx store.Tx) *DBStore {
	return &DBStore{st: s.st, db: tx, now: s.now}
}

// WithClock returns a DBStore that stamps claims with now instead of the
// database's clock, so that the caller compares a claim's age
// (Held.ClaimedAt) on its own (injected) clock.
func (s *DBStore) WithClock(now func() time.Time) *DBStore {
	return &DBStore{st: s.st, db: s.db, now: now}
}

// row is c as a claim row, stamped with the store's clock if it has one.
func (s *DBStore) row(c Commit) store.CommitClaim {
	r := store.CommitClaim{RunID: c.Ref.RunID, Step: c.Ref.Step, Status: c.Status, Branch: c.Branch, Seq: c.Seq}
	if s.now != nil {
		r.ClaimedAt = s.now()
	}
	return r
}

// claimAttempts bounds the retries when a holder is released between the
// conflicting insert and the read of that holder.
const claimAttempts = 3

// Claim implements Store: an insert that does nothing on conflict, then on
// conflict a read of the holder.
func (s *DBStore) Claim(ctx context.Context, c Commit) (int64, Commit, bool, error) {
	for range claimAttempts {
		token, ok, err := s.st.ClaimCommit(ctx, s.db, s.row(c))
		if err != nil {
			return 0, Commit{}, false, err
		}
		if ok {
			return token, Commit{}, true, nil
		}
		holder, ok, err := s.Get(ctx, c.Ref)
		if err != nil {
			return 0, Commit{}, false, err
		}
		if ok {
			return 0, holder, false, nil
		}
	}
	return 0, Commit{}, false, fmt.Errorf("claiming commit: holder released %d times during the claim", claimAttempts)
}

// ReleaseToken implements Store with a delete conditional on the token.
func (s *DBStore) ReleaseToken(ctx context.Context, ref Ref, token int64) (bool, error) {
	return s.st.ReleaseCommitClaim(ctx, s.db, ref.RunID, ref.Step, token)
}

// SeedIfAbsent implements Store.
func (s *DBStore) SeedIfAbsent(ctx context.Context, c Commit) error {
	return s.st.SeedCommitClaim(ctx, s.db, s.row(c))
}

// Get implements Store.
func (s *DBStore) Get(ctx context.Context, ref Ref) (Commit, bool, error) {
	h, ok, err := s.Held(ctx, ref)
	return h.Commit, ok, err
}

// Held implements Store.
func (s *DBStore) Held(ctx context.Context, ref Ref) (Held, bool, error) {
	r, err := s.st.GetCommitClaim(ctx, s.db, ref.RunID, ref.Step)
	if errors.Is(err, store.ErrNotFound) {
		return Held{}, false, nil
	}
	if err != nil {
		return Held{}, false, err
	}
	return Held{Commit: Commit{Ref: ref, Status: r.Status, Branch: r.Branch, Seq: r.Seq}, Token: r.Token, ClaimedAt: r.ClaimedAt}, true, nil
}

// Count implements Store.
func (s *DBStore) Count(ctx context.Context) (int, error) {
	return s.st.CountCommitClaims(ctx, s.db)
}
