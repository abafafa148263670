package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"changebot/store/postgres/internal/dbsqlc"

	"github.com/jackc/pgx/v5"
)

// AccountBlockedUntil returns until when GitLab asked account to wait (a
// 429's Retry-After, RateLimit-Reset or the default minute), or the zero
// time when it never did. The moment may have passed. account is the GitLab
// adapter's key of one account (instance and token fingerprint); every
// replica reads the same row (issue 10 point 4).
func (s *Store) AccountBlockedUntil(ctx context.Context, account string) (time.Time, error) {
	until, err := queries.GitLabAccountBlockedUntil(ctx, s.pool, account)
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
	err := queries.GitLabAccountBlock(ctx, s.pool, &dbsqlc.GitLabAccountBlockParams{Account: account,
		BlockedUntil: until.UTC(), UpdatedAt: s.Now()})
	if err != nil {
		return fmt.Errorf("recording the wait of gitlab account %s: %w", account, err)
	}
	return nil
}
