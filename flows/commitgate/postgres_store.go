package commitgate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DBTX is the part of pgx that PostgresStore uses; *pgxpool.Pool, *pgx.Conn
// and pgx.Tx satisfy it.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// PostgresStore is the production Store: claims are rows of commit_claims
// (store migration 0002) keyed by (run_id, step), with tokens from the
// commit_claim_tokens sequence. It is safe for concurrent use when its DBTX
// is (a pool is; a transaction is not).
type PostgresStore struct {
	db  DBTX
	now func() time.Time // nil: the database's now()
}

// NewPostgresStore returns a PostgresStore over db (a pool, a connection or
// a transaction), whose search_path must reach commit_claims.
func NewPostgresStore(db DBTX) *PostgresStore {
	return &PostgresStore{db: db}
}

// InTx returns a PostgresStore that runs in tx, so a caller can claim inside
// its own transaction and have the claim and the state it writes commit or
// roll back together (fencing). A concurrent claim of the same ref waits
// until tx ends.
func (s *PostgresStore) InTx(tx pgx.Tx) *PostgresStore {
	return &PostgresStore{db: tx, now: s.now}
}

// WithClock returns a PostgresStore that stamps claimed_at with now instead
// of the database's now(), so that the caller compares a claim's age
// (Held.ClaimedAt) on its own (injected) clock.
func (s *PostgresStore) WithClock(now func() time.Time) *PostgresStore {
	return &PostgresStore{db: s.db, now: now}
}

// stamp is the claimed_at to write: nil lets the database use now().
func (s *PostgresStore) stamp() any {
	if s.now == nil {
		return nil
	}
	return s.now().UTC()
}

const (
	claimSQL = `INSERT INTO commit_claims (run_id, step, status, branch, seq, token, claimed_at)
VALUES ($1, $2, $3, $4, $5, nextval('commit_claim_tokens'), COALESCE($6::timestamptz, now()))
ON CONFLICT (run_id, step) DO NOTHING
RETURNING token`
	heldSQL    = `SELECT status, branch, seq, token, claimed_at FROM commit_claims WHERE run_id = $1 AND step = $2`
	getSQL     = `SELECT status, branch, seq FROM commit_claims WHERE run_id = $1 AND step = $2`
	releaseSQL = `DELETE FROM commit_claims WHERE run_id = $1 AND step = $2 AND token = $3`
	seedSQL    = `INSERT INTO commit_claims (run_id, step, status, branch, seq, token, claimed_at)
VALUES ($1, $2, $3, $4, $5, nextval('commit_claim_tokens'), COALESCE($6::timestamptz, now()))
ON CONFLICT (run_id, step) DO NOTHING`
	countSQL = `SELECT count(*) FROM commit_claims`
)

// claimAttempts bounds the retries when a holder is released between the
// conflicting insert and the read of that holder.
const claimAttempts = 3

// Claim implements Store with INSERT … ON CONFLICT DO NOTHING; on conflict
// it reads the holder.
func (s *PostgresStore) Claim(ctx context.Context, c Commit) (int64, Commit, bool, error) {
	for range claimAttempts {
		var token int64
		err := s.db.QueryRow(ctx, claimSQL, c.Ref.RunID, c.Ref.Step, c.Status, c.Branch, c.Seq, s.stamp()).Scan(&token)
		if err == nil {
			return token, Commit{}, true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return 0, Commit{}, false, fmt.Errorf("inserting commit claim: %w", err)
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

// ReleaseToken implements Store with a DELETE conditional on the token.
func (s *PostgresStore) ReleaseToken(ctx context.Context, ref Ref, token int64) (bool, error) {
	tag, err := s.db.Exec(ctx, releaseSQL, ref.RunID, ref.Step, token)
	if err != nil {
		return false, fmt.Errorf("deleting commit claim: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// SeedIfAbsent implements Store with INSERT … ON CONFLICT DO NOTHING.
func (s *PostgresStore) SeedIfAbsent(ctx context.Context, c Commit) error {
	if _, err := s.db.Exec(ctx, seedSQL, c.Ref.RunID, c.Ref.Step, c.Status, c.Branch, c.Seq, s.stamp()); err != nil {
		return fmt.Errorf("seeding commit claim: %w", err)
	}
	return nil
}

// Get implements Store.
func (s *PostgresStore) Get(ctx context.Context, ref Ref) (Commit, bool, error) {
	c := Commit{Ref: ref}
	err := s.db.QueryRow(ctx, getSQL, ref.RunID, ref.Step).Scan(&c.Status, &c.Branch, &c.Seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return Commit{}, false, nil
	}
	if err != nil {
		return Commit{}, false, fmt.Errorf("reading commit claim: %w", err)
	}
	return c, true, nil
}

// Held implements Store.
func (s *PostgresStore) Held(ctx context.Context, ref Ref) (Held, bool, error) {
	h := Held{Commit: Commit{Ref: ref}}
	err := s.db.QueryRow(ctx, heldSQL, ref.RunID, ref.Step).Scan(&h.Commit.Status, &h.Commit.Branch, &h.Commit.Seq, &h.Token, &h.ClaimedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Held{}, false, nil
	}
	if err != nil {
		return Held{}, false, fmt.Errorf("reading commit claim: %w", err)
	}
	h.ClaimedAt = h.ClaimedAt.UTC()
	return h, true, nil
}

// Count implements Store.
func (s *PostgresStore) Count(ctx context.Context) (int, error) {
	var n int64
	if err := s.db.QueryRow(ctx, countSQL).Scan(&n); err != nil {
		return 0, fmt.Errorf("counting commit claims: %w", err)
	}
	return int(n), nil
}
