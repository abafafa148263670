package store

import (
	"context"
	"encoding/json"
	"time"
)

// Setting is one stored runtime setting. Scope is "global" or
// "project:<id or path>"; Value is the JSON value as PostgreSQL normalises
// jsonb. Which keys exist and what their values mean is decided by the
// settings package, not here.
type Setting struct {
	Key       string
	Scope     string
	Value     json.RawMessage
	UpdatedBy string
	UpdatedAt time.Time
}

// SettingAudit is one change of a setting. OldValue is nil when the setting
// had no stored value; NewValue is nil when the change removed it.
type SettingAudit struct {
	ID        int64
	Key       string
	Scope     string
	OldValue  json.RawMessage
	NewValue  json.RawMessage
	UpdatedBy string
	UpdatedAt time.Time
}

// SaveSettingParams is one settings change. A nil Value removes the stored
// value (the setting falls back to its initial value or default).
type SaveSettingParams struct {
	Key       string
	Scope     string
	Value     json.RawMessage
	UpdatedBy string
	// Check, when set, is called inside the write's transaction with every
	// stored setting (ListSettings' rows), read after the transaction took
	// the settings write lock that every SaveSetting takes: no other write
	// of any setting can come between what Check saw and this write, so a
	// rule between two settings (settings.Cache.Set) holds under
	// concurrent writers of both. An error aborts the write; nothing is
	// stored and SaveSetting returns it wrapped.
	Check func(stored []Setting) error
}

// SettingsNotice is the payload of a SettingsChannel notification. Schema
// is the writer's current_schema(), so that listeners of other schemas in
// the same database (tests) can ignore it.
type SettingsNotice struct {
	Schema string `json:"schema"`
	Key    string `json:"key"`
	Scope  string `json:"scope"`
}

// SettingsListener delivers the announcements of settings changes made by
// any replica (SaveSetting announces each in the transaction that writes
// it). It is not safe for concurrent use; one goroutine owns it.
type SettingsListener interface {
	// Wait blocks until an announcement arrives or ctx ends (its error then
	// wraps ctx.Err()). An announcement that does not decode is returned as
	// a zero notice, so the caller still reloads.
	Wait(ctx context.Context) (SettingsNotice, error)
	// Close stops listening and releases what the listener holds.
	Close(ctx context.Context) error
}
