package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// AccountBlockedUntil returns until when GitLab asked account to wait (a
// 429's Retry-After, RateLimit-Reset or the default minute), or the zero
// time when it never did. The moment may have passed. account is the GitLab
// adapter's key of one account (instance and token fingerprint); every
// replica reads the same row (issue 10 point 4).
func (s *Store) AccountBlockedUntil(ctx context.Context, account string) (time.Time, error) {
	var until time.Time
	err := s.pool.QueryRow(ctx, `SELECT blocked_until FROM gitlab_account_waits WHERE account = $1`, account).Scan(&until)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the wait of gitlab account %s: %w", account, err)
	}
	return until.UTC(), nil
}

// BlockAccountUntil records that account must send nothing to GitLab
// before until. A later moment already recorded is kept (two replicas
// answered 429 at once: the longer wait wins). One statement.
func (s *Store) BlockAccountUntil(ctx context.Context, account string, until time.Time) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO gitlab_account_waits (account, blocked_until, updated_at)
		VALUES ($1, $2, $3)
		ON CONFLICT (account) DO UPDATE
		SET blocked_until = GREATEST(gitlab_account_waits.blocked_until, EXCLUDED.blocked_until),
		    updated_at = EXCLUDED.updated_at`,
		account, until.UTC(), s.Now())
	if err != nil {
		return fmt.Errorf("recording the wait of gitlab account %s: %w", account, err)
	}
	return nil
}
