package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ListSettings returns every stored setting, ordered by key and scope. The
// table holds a few rows per key: one query, no paging.
func (s *DriverStore) ListSettings(ctx context.Context, db DBTX) ([]Setting, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return nil, err
	}
	return listSettings(ctx, x)
}

// listSettings is ListSettings on x.
func listSettings(ctx context.Context, x Executor) ([]Setting, error) {
	out, err := x.SettingList(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing settings: %w", err)
	}
	return out, nil
}

// SaveSetting writes (or, with a nil Value, removes) one setting and, in the
// same transaction, appends its audit row and announces the change
// (SettingsNotify: delivered once the transaction commits). Every settings
// write takes one lock for all settings first (SettingsLock: an advisory
// lock on PostgreSQL, the write lock on SQLite), so the audit's old value
// is exact under concurrent writers and p.Check sees the stored settings as
// no other write can change them before this one commits (settings writes
// are an operator's, a few a day: one lock for all costs nothing). It
// returns the row as written (for a removal: Key, Scope, UpdatedBy and
// UpdatedAt only). Key, Scope and UpdatedBy are required.
func (s *DriverStore) SaveSetting(ctx context.Context, p SaveSettingParams) (Setting, error) {
	if p.Key == "" || p.Scope == "" || p.UpdatedBy == "" {
		return Setting{}, errors.New("saving setting: key, scope and updated_by are required")
	}
	now := s.Now()
	saved := Setting{Key: p.Key, Scope: p.Scope, UpdatedBy: p.UpdatedBy, UpdatedAt: now}
	err := s.inTx(ctx, func(_ Tx, x Executor) error {
		if err := x.SettingsLock(ctx); err != nil {
			return err
		}
		if p.Check != nil {
			stored, err := listSettings(ctx, x)
			if err != nil {
				return err
			}
			if err := p.Check(stored); err != nil {
				return err
			}
		}
		old, err := x.SettingValue(ctx, p.Key, p.Scope)
		if err != nil {
			return err
		}
		if p.Value == nil {
			if err := x.SettingDelete(ctx, p.Key, p.Scope); err != nil {
				return err
			}
		} else {
			v, err := x.SettingUpsert(ctx, Setting{Key: p.Key, Scope: p.Scope, Value: p.Value, UpdatedBy: p.UpdatedBy, UpdatedAt: now})
			if err != nil {
				return err
			}
			saved.Value = v
		}
		a := SettingAudit{Key: p.Key, Scope: p.Scope, OldValue: nullJSON(old), NewValue: nullJSON(saved.Value),
			UpdatedBy: p.UpdatedBy, UpdatedAt: now}
		if err := x.SettingAuditInsert(ctx, a); err != nil {
			return err
		}
		return x.SettingsNotify(ctx, p.Key, p.Scope)
	})
	if err != nil {
		return Setting{}, fmt.Errorf("saving setting %s (%s): %w", p.Key, p.Scope, err)
	}
	return saved, nil
}

// nullJSON is b, or nil (SQL NULL) when b is empty: no value.
func nullJSON(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// ListSettingAudit returns the audit rows of key in scope, oldest first.
func (s *DriverStore) ListSettingAudit(ctx context.Context, db DBTX, key, scope string) ([]SettingAudit, error) {
	x, err := s.d.Executor(db)
	if err != nil {
		return nil, err
	}
	out, err := x.SettingAuditList(ctx, key, scope)
	if err != nil {
		return nil, fmt.Errorf("listing audit of setting %s: %w", key, err)
	}
	return out, nil
}

// AccountBlockedUntil returns until when GitLab asked account to wait (a
// 429's Retry-After, RateLimit-Reset or the default minute), or the zero
// time when it never did. The moment may have passed. account is the GitLab
// adapter's key of one account (instance and token fingerprint); every
// replica reads the same row (issue 10 point 4).
func (s *DriverStore) AccountBlockedUntil(ctx context.Context, account string) (time.Time, error) {
	x, err := s.d.Executor(s.d.DB())
	if err != nil {
		return time.Time{}, err
	}
	until, err := x.GitLabAccountBlockedUntil(ctx, account)
	if errors.Is(err, ErrNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("reading the wait of gitlab account %s: %w", account, err)
	}
	return until, nil
}

// BlockAccountUntil records that account must send nothing to GitLab
// before until. A later moment already recorded is kept (two replicas
// answered 429 at once: the longer wait wins). One statement.
func (s *DriverStore) BlockAccountUntil(ctx context.Context, account string, until time.Time) error {
	x, err := s.d.Executor(s.d.DB())
	if err != nil {
		return err
	}
	if err := x.GitLabAccountBlock(ctx, account, until.UTC(), s.Now()); err != nil {
		return fmt.Errorf("recording the wait of gitlab account %s: %w", account, err)
	}
	return nil
}

// TakeAccountBudget takes p.N calls from the account's call budget, shared
// by every replica (issue 12 point 4), with one UPDATE of the account's row
// (GitLabBudgetTake; the row is created on the first take): on PostgreSQL
// its row lock queues concurrent takes from every replica, on SQLite the
// one writer does, so none overdraws.
func (s *DriverStore) TakeAccountBudget(ctx context.Context, p BudgetTakeParams) (BudgetTake, error) {
	x, err := s.d.Executor(s.d.DB())
	if err != nil {
		return BudgetTake{}, err
	}
	p.Now = p.Now.UTC()
	out, err := x.GitLabBudgetTake(ctx, p)
	if errors.Is(err, ErrNotFound) {
		if err = x.GitLabBudgetEnsure(ctx, p.Account, s.Now()); err == nil {
			out, err = x.GitLabBudgetTake(ctx, p)
		}
	}
	if err != nil {
		return BudgetTake{}, fmt.Errorf("taking from the call budget of gitlab account %s: %w", p.Account, err)
	}
	return out, nil
}

// ClampAccountBudget lowers the account's budget to p.Remaining calls
// (GitLab's RateLimit-Remaining) when it holds more: one UPDATE; an
// account without a row has taken nothing yet and is left alone.
func (s *DriverStore) ClampAccountBudget(ctx context.Context, p BudgetClampParams) error {
	x, err := s.d.Executor(s.d.DB())
	if err != nil {
		return err
	}
	if err := x.GitLabBudgetClamp(ctx, p); err != nil {
		return fmt.Errorf("lowering the call budget of gitlab account %s: %w", p.Account, err)
	}
	return nil
}
