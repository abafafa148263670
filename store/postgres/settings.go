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

// SettingsLock implements store.SettingQueries: one transaction-level
// advisory lock for every settings write.
func (x executor) SettingsLock(ctx context.Context) error {
	// Hand-written: the advisory lock is a PostgreSQL session function, not
	// a query of our tables.
	_, err := x.q.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('changebot_settings', 0))`)
	return err
}

// SettingList implements store.SettingQueries.
func (x executor) SettingList(ctx context.Context) ([]store.Setting, error) {
	rows, err := queries.SettingList(ctx, x.q)
	if err != nil {
		return nil, err
	}
	out := make([]store.Setting, 0, len(rows))
	for _, r := range rows {
		out = append(out, store.Setting{Key: r.Key, Scope: r.Scope, Value: r.Value, UpdatedBy: r.UpdatedBy, UpdatedAt: r.UpdatedAt.UTC()})
	}
	return out, nil
}

// SettingValue implements store.SettingQueries.
func (x executor) SettingValue(ctx context.Context, key, scope string) (json.RawMessage, error) {
	v, err := queries.SettingValue(ctx, x.q, &dbsqlc.SettingValueParams{Key: key, Scope: scope})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return v, err
}

// SettingUpsert implements store.SettingQueries.
func (x executor) SettingUpsert(ctx context.Context, st store.Setting) (json.RawMessage, error) {
	return queries.SettingUpsert(ctx, x.q, &dbsqlc.SettingUpsertParams{Key: st.Key, Scope: st.Scope,
		Value: []byte(st.Value), UpdatedBy: st.UpdatedBy, UpdatedAt: st.UpdatedAt})
}

// SettingDelete implements store.SettingQueries.
func (x executor) SettingDelete(ctx context.Context, key, scope string) error {
	return queries.SettingDelete(ctx, x.q, &dbsqlc.SettingDeleteParams{Key: key, Scope: scope})
}

// SettingAuditInsert implements store.SettingQueries.
func (x executor) SettingAuditInsert(ctx context.Context, a store.SettingAudit) error {
	return queries.SettingAuditInsert(ctx, x.q, &dbsqlc.SettingAuditInsertParams{Key: a.Key, Scope: a.Scope,
		OldValue: a.OldValue, NewValue: a.NewValue, UpdatedBy: a.UpdatedBy, UpdatedAt: a.UpdatedAt})
}

// SettingAuditList implements store.SettingQueries.
func (x executor) SettingAuditList(ctx context.Context, key, scope string) ([]store.SettingAudit, error) {
	rows, err := queries.SettingAuditList(ctx, x.q, &dbsqlc.SettingAuditListParams{Key: key, Scope: scope})
	if err != nil {
		return nil, err
	}
	out := make([]store.SettingAudit, 0, len(rows))
	for _, r := range rows {
		out = append(out, store.SettingAudit{ID: r.ID, Key: r.Key, Scope: r.Scope, OldValue: r.OldValue,
			NewValue: r.NewValue, UpdatedBy: r.UpdatedBy, UpdatedAt: r.UpdatedAt.UTC()})
	}
	return out, nil
}

// SettingsNotify implements store.SettingQueries: NOTIFY on SettingsChannel
// with a SettingsNotice naming the writer's schema, delivered at commit.
func (x executor) SettingsNotify(ctx context.Context, key, scope string) error {
	// Hand-written: NOTIFY is a PostgreSQL session function.
	_, err := x.q.Exec(ctx, `SELECT pg_notify($1, json_build_object('schema', current_schema(), 'key', $2::text, 'scope', $3::text)::text)`,
		SettingsChannel, key, scope)
	return err
}

// pgSettingsListener is a dedicated connection listening on SettingsChannel
// (PostgreSQL LISTEN/NOTIFY).
type pgSettingsListener struct {
	conn   *pgx.Conn
	schema string
}

// ListenSettings implements store.Driver: it takes a connection out of the
// pool for good and listens on SettingsChannel with it (LISTEN). Close it
// when done.
func (d *driver) ListenSettings(ctx context.Context) (store.SettingsListener, error) {
	c, err := d.pool.Acquire(ctx)
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
