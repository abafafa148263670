// Package dbtime is the Go type of the SQLite store's time columns: TEXT
// in UTC, 'YYYY-MM-DD HH:MM:SS.ffffff' (fixed width, so text order is time
// order; store/sqlite/migrations/0001). The generated queries
// (internal/dbsqlc, sqlc.yaml overrides) read and write it.
package dbtime

import (
	"database/sql/driver"
	"fmt"
	"time"
)

// Format is how a time is stored.
const Format = "2006-01-02 15:04:05.000000"

// Time is a time stored as text; its Value is the text, its Scan parses it
// (and the shorter forms SQLite's own functions write), always in UTC.
type Time struct{ time.Time }

// Of returns t as a stored time.
func Of(t time.Time) Time { return Time{t.UTC()} }

// Value implements driver.Valuer: t in Format, in UTC.
func (t Time) Value() (driver.Value, error) { return t.UTC().Format(Format), nil }

// Scan implements sql.Scanner; NULL gives the zero time.
func (t *Time) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		t.Time = time.Time{}
		return nil
	case time.Time:
		t.Time = v.UTC()
		return nil
	case string:
		return t.parse(v)
	case []byte:
		return t.parse(string(v))
	}
	return fmt.Errorf("scanning a time from %T", src)
}

func (t *Time) parse(s string) error {
	for _, f := range []string{Format, "2006-01-02 15:04:05.000", "2006-01-02 15:04:05", time.RFC3339Nano} {
		if p, err := time.Parse(f, s); err == nil {
			t.Time = p.UTC()
			return nil
		}
	}
	return fmt.Errorf("scanning a time from %q", s)
}
