package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"changebot/store"

	"github.com/jackc/pgx/v5"
)

// SettingsChannel is the PostgreSQL NOTIFY channel on which every settings
// change is announced, in the transaction that writes it. Its payload is a
// SettingsNotice as JSON.
const SettingsChannel = "changebot_settings"

// ListSettings returns every stored setting, ordered by key and scope. The
// table holds a few rows per key: one query, no paging.
func (s *Store) ListSettings(ctx context.Context, db store.DBTX) ([]store.Setting, error) {
	rows, err := q(db).Query(ctx, `SELECT key, scope, value, updated_by, updated_at FROM settings ORDER BY key, scope`)
	if err != nil {
		return nil, fmt.Errorf("listing settings: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Setting, error) {
		var st store.Setting
		err := r.Scan(&st.Key, &st.Scope, &st.Value, &st.UpdatedBy, &st.UpdatedAt)
		st.UpdatedAt = st.UpdatedAt.UTC()
		return st, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing settings: %w", err)
	}
	return out, nil
}

// SaveSetting writes (or, with a nil Value, removes) one setting and, in the
// same transaction, appends its audit row and notifies SettingsChannel. The
// (key, scope) pair is locked for the transaction, so the audit's old value
// is exact under concurrent writers. It returns the row as written (for a
// removal: Key, Scope, UpdatedBy and UpdatedAt only).
func (s *Store) SaveSetting(ctx context.Context, p store.SaveSettingParams) (store.Setting, error) {
	if p.Key == "" || p.Scope == "" || p.UpdatedBy == "" {
		return store.Setting{}, errors.New("saving setting: key, scope and updated_by are required")
	}
	now := s.Now()
	saved := store.Setting{Key: p.Key, Scope: p.Scope, UpdatedBy: p.UpdatedBy, UpdatedAt: now}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('changebot_settings/' || $1 || '/' || $2, 0))`, p.Key, p.Scope); err != nil {
			return err
		}
		var old json.RawMessage
		err := tx.QueryRow(ctx, `SELECT value FROM settings WHERE key = $1 AND scope = $2`, p.Key, p.Scope).Scan(&old)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if p.Value == nil {
			if _, err := tx.Exec(ctx, `DELETE FROM settings WHERE key = $1 AND scope = $2`, p.Key, p.Scope); err != nil {
				return err
			}
		} else {
			err := tx.QueryRow(ctx, `INSERT INTO settings (key, scope, value, updated_by, updated_at)
				VALUES ($1, $2, $3, $4, $5)
				ON CONFLICT (key, scope) DO UPDATE SET value = EXCLUDED.value, updated_by = EXCLUDED.updated_by, updated_at = EXCLUDED.updated_at
				RETURNING value`, p.Key, p.Scope, []byte(p.Value), p.UpdatedBy, now).Scan(&saved.Value)
			if err != nil {
				return err
			}
		}
		var newValue []byte
		if p.Value != nil {
			newValue = saved.Value
		}
		if _, err := tx.Exec(ctx, `INSERT INTO settings_audit (key, scope, old_value, new_value, updated_by, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6)`, p.Key, p.Scope, nullJSON(old), nullJSON(newValue), p.UpdatedBy, now); err != nil {
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

// nullJSON maps an empty value to SQL NULL.
func nullJSON(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

// ListSettingAudit returns the audit rows of key in scope, oldest first.
func (s *Store) ListSettingAudit(ctx context.Context, db store.DBTX, key, scope string) ([]store.SettingAudit, error) {
	rows, err := q(db).Query(ctx, `SELECT id, key, scope, old_value, new_value, updated_by, updated_at
		FROM settings_audit WHERE key = $1 AND scope = $2 ORDER BY id`, key, scope)
	if err != nil {
		return nil, fmt.Errorf("listing audit of setting %s: %w", key, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.SettingAudit, error) {
		var a store.SettingAudit
		err := r.Scan(&a.ID, &a.Key, &a.Scope, &a.OldValue, &a.NewValue, &a.UpdatedBy, &a.UpdatedAt)
		a.UpdatedAt = a.UpdatedAt.UTC()
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("listing audit of setting %s: %w", key, err)
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
