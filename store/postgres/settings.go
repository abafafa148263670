package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"changebot/store"
	"changebot/store/postgres/internal/dbsqlc"

	"github.com/jackc/pgx/v5"
)

// SettingsChannel is the PostgreSQL NOTIFY channel on which every settings
// change is announced, in the transaction that writes it. Its payload is a
// SettingsNotice as JSON.
const SettingsChannel = "changebot_settings"

// ListSettings returns every stored setting, ordered by key and scope. The
// table holds a few rows per key: one query, no paging.
func (s *Store) ListSettings(ctx context.Context, db store.DBTX) ([]store.Setting, error) {
	return listSettings(ctx, q(db))
}

// listSettings is ListSettings on db (a pool or a transaction).
func listSettings(ctx context.Context, db dbsqlc.DBTX) ([]store.Setting, error) {
	rows, err := queries.SettingList(ctx, db)
	if err != nil {
		return nil, fmt.Errorf("listing settings: %w", err)
	}
	out := make([]store.Setting, 0, len(rows))
	for _, r := range rows {
		out = append(out, store.Setting{Key: r.Key, Scope: r.Scope, Value: r.Value, UpdatedBy: r.UpdatedBy, UpdatedAt: r.UpdatedAt.UTC()})
	}
	return out, nil
}

// SaveSetting writes (or, with a nil Value, removes) one setting and, in the
// same transaction, appends its audit row and notifies SettingsChannel. Every
// settings write holds one transaction-level advisory lock, so the audit's
// old value is exact under concurrent writers and p.Check sees the stored
// settings as no other write can change them before this one commits
// (settings writes are an operator's, a few a day: one lock for all costs
// nothing). It returns the row as written (for a
// removal: Key, Scope, UpdatedBy and UpdatedAt only).
func (s *Store) SaveSetting(ctx context.Context, p store.SaveSettingParams) (store.Setting, error) {
	if p.Key == "" || p.Scope == "" || p.UpdatedBy == "" {
		return store.Setting{}, errors.New("saving setting: key, scope and updated_by are required")
	}
	now := s.Now()
	saved := store.Setting{Key: p.Key, Scope: p.Scope, UpdatedBy: p.UpdatedBy, UpdatedAt: now}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// Hand-written: the advisory lock and the NOTIFY below are
		// PostgreSQL session functions, not queries of our tables.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('changebot_settings', 0))`); err != nil {
			return err
		}
		if p.Check != nil {
			stored, err := listSettings(ctx, tx)
			if err != nil {
				return err
			}
			if err := p.Check(stored); err != nil {
				return err
			}
		}
		old, err := queries.SettingValue(ctx, tx, &dbsqlc.SettingValueParams{Key: p.Key, Scope: p.Scope})
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if p.Value == nil {
			if err := queries.SettingDelete(ctx, tx, &dbsqlc.SettingDeleteParams{Key: p.Key, Scope: p.Scope}); err != nil {
				return err
			}
		} else {
			v, err := queries.SettingUpsert(ctx, tx, &dbsqlc.SettingUpsertParams{Key: p.Key, Scope: p.Scope,
				Value: []byte(p.Value), UpdatedBy: p.UpdatedBy, UpdatedAt: now})
			if err != nil {
				return err
			}
			saved.Value = v
		}
		var newValue []byte
		if p.Value != nil {
			newValue = saved.Value
		}
		if err := queries.SettingAuditInsert(ctx, tx, &dbsqlc.SettingAuditInsertParams{Key: p.Key, Scope: p.Scope,
			OldValue: nullJSON(old), NewValue: nullJSON(newValue), UpdatedBy: p.UpdatedBy, UpdatedAt: now}); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `SELECT pg_notify($1, json_build_object('schema', current_schema(), 'key', $2::text, 'scope', $3::text)::text)`,
			SettingsChannel, p.Key, p.Scope)
		return err
	})
	if err != nil {
		return store.Setting{}, fmt.Errorf("saving setting %s (%s): %w", p.Key, p.Scope, err)
	}
	return saved, nil
}

// nullJSON maps an empty value to SQL NULL (a nil slice).
func nullJSON(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// ListSettingAudit returns the audit rows of key in scope, oldest first.
func (s *Store) ListSettingAudit(ctx context.Context, db store.DBTX, key, scope string) ([]store.SettingAudit, error) {
	rows, err := queries.SettingAuditList(ctx, q(db), &dbsqlc.SettingAuditListParams{Key: key, Scope: scope})
	if err != nil {
		return nil, fmt.Errorf("listing audit of setting %s: %w", key, err)
	}
	out := make([]store.SettingAudit, 0, len(rows))
	for _, r := range rows {
		out = append(out, store.SettingAudit{ID: r.ID, Key: r.Key, Scope: r.Scope, OldValue: r.OldValue,
			NewValue: r.NewValue, UpdatedBy: r.UpdatedBy, UpdatedAt: r.UpdatedAt.UTC()})
	}
	return out, nil
}

// pgSettingsListener is a dedicated connection listening on SettingsChannel
// (PostgreSQL LISTEN/NOTIFY).
type pgSettingsListener struct {
	conn   *pgx.Conn
	schema string
}

// ListenSettings takes a connection out of the pool for good and listens on
// SettingsChannel with it (LISTEN). Close it when done.
func (s *Store) ListenSettings(ctx context.Context) (store.SettingsListener, error) {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquiring settings listener connection: %w", err)
	}
	conn := c.Hijack()
	// Hand-written: LISTEN and current_schema() are session statements,
	// not queries of our tables.
	l := &pgSettingsListener{conn: conn}
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&l.schema); err != nil {
		_ = conn.Close(ctx)
		return nil, fmt.Errorf("reading current schema: %w", err)
	}
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{SettingsChannel}.Sanitize()); err != nil {
		_ = conn.Close(ctx)
		return nil, fmt.Errorf("listening on %s: %w", SettingsChannel, err)
	}
	return l, nil
}

// Wait implements SettingsListener: notifications of other schemas in the
// same database (tests) are skipped.
func (l *pgSettingsListener) Wait(ctx context.Context) (store.SettingsNotice, error) {
	for {
		n, err := l.conn.WaitForNotification(ctx)
		if err != nil {
			return store.SettingsNotice{}, fmt.Errorf("waiting for settings notification: %w", err)
		}
		var sn store.SettingsNotice
		if json.Unmarshal([]byte(n.Payload), &sn) != nil {
			return store.SettingsNotice{Schema: l.schema}, nil
		}
		if sn.Schema == l.schema {
			return sn, nil
		}
	}
}

// Close implements SettingsListener: it closes the listener's connection.
func (l *pgSettingsListener) Close(ctx context.Context) error { return l.conn.Close(ctx) }
