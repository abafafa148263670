package config

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
)

// The engines DATABASE_URL can name.
const (
	EnginePostgres = "postgres"
	EngineSQLite   = "sqlite"
)

// sqliteScheme starts a DATABASE_URL naming a SQLite file:
// sqlite:///var/lib/changebot/changebot.db (absolute) or
// sqlite://changebot.db (relative to the working directory).
const sqliteScheme = "sqlite://"

// DefaultDatabaseFile is the SQLite file serve uses, in CHANGEBOT_DATA_DIR,
// when DATABASE_URL is empty.
const DefaultDatabaseFile = "changebot.db"

// DatabaseTarget is what a DATABASE_URL names: a PostgreSQL connection
// string or a SQLite file (ParseDatabaseTarget).
type DatabaseTarget struct {
	Engine string
	// URL is the PostgreSQL connection string (Engine postgres).
	URL string
	// Path is the SQLite file (Engine sqlite).
	Path string
}

// ParseDatabaseTarget reads a DATABASE_URL: sqlite://<path> names a SQLite
// file (three slashes for an absolute path), anything else must be a
// PostgreSQL URL (postgres://, postgresql://) or key=value connection string.
func ParseDatabaseTarget(s string) (DatabaseTarget, error) {
	if rest, ok := strings.CutPrefix(s, sqliteScheme); ok {
		if rest == "" || strings.ContainsAny(rest, "?#") {
			return DatabaseTarget{}, fmt.Errorf("DATABASE_URL %q: want sqlite:///absolute/path/changebot.db or sqlite://relative/path.db, without parameters", s)
		}
		return DatabaseTarget{Engine: EngineSQLite, Path: rest}, nil
	}
	if !validDatabaseURL(s) {
		return DatabaseTarget{}, errors.New("invalid DATABASE_URL: not a postgres:// URL, a key=value connection string or a sqlite:// file")
	}
	return DatabaseTarget{Engine: EnginePostgres, URL: s}, nil
}

// SQLiteURL is the DATABASE_URL of the SQLite file at path.
func SQLiteURL(path string) string { return sqliteScheme + path }

// DefaultDatabaseURL is the DATABASE_URL of an empty one: the file
// DefaultDatabaseFile in dataDir (empty: the working directory), absolute.
func DefaultDatabaseURL(dataDir string) string {
	p := filepath.Join(dataDir, DefaultDatabaseFile)
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	return SQLiteURL(p)
}

// validDatabaseURL accepts a postgres:// or postgresql:// URL that parses
// unambiguously, a key=value connection string, or a sqlite:// file.
func validDatabaseURL(s string) bool {
	if strings.HasPrefix(s, sqliteScheme) {
		_, err := ParseDatabaseTarget(s)
		return err == nil
	}
	if !strings.Contains(s, "://") {
		return strings.Contains(s, "=")
	}
	u, ok := parseDatabaseURL(s)
	return ok && (u.Scheme == "postgres" || u.Scheme == "postgresql")
}

// parseDatabaseURL parses a URL-form connection string, refusing forms
// where part of a password could end up outside the user info (an unescaped
// '#', '?' or '/' in the password).
func parseDatabaseURL(s string) (*url.URL, bool) {
	u, err := url.Parse(s)
	if err != nil || u.Fragment != "" || u.RawFragment != "" || strings.Contains(s, "#") {
		return nil, false
	}
	if u.User == nil && strings.Contains(s, "@") {
		return nil, false
	}
	return u, true
}

// dsnPassword matches password settings of a key=value connection string.
var dsnPassword = regexp.MustCompile(`(?i)\b((?:ssl)?password)\s*=\s*('(?:[^'\\]|\\.)*'|\S+)`)

// RedactedDatabaseURL returns DatabaseURL with any password replaced by
// "xxxxx" (user info, password= and sslpassword= parameters), or "[REDACTED]"
// when it cannot be parsed well enough to tell the password apart.
func (c Config) RedactedDatabaseURL() string { return RedactDatabaseURL(c.DatabaseURL) }

// RedactDatabaseURL is Config.RedactedDatabaseURL for any connection string s: a
// URL (user info, password= and sslpassword= parameters) or PostgreSQL's
// key=value form (password=, sslpassword=).
func RedactDatabaseURL(s string) string {
	if s == "" {
		return ""
	}
	if !strings.Contains(s, "://") {
		if strings.Contains(s, "@") && !strings.Contains(s, "=") {
			return redacted
		}
		return dsnPassword.ReplaceAllString(s, "${1}=xxxxx")
	}
	u, ok := parseDatabaseURL(s)
	if !ok {
		return redacted
	}
	q := u.Query()
	for _, k := range []string{"password", "sslpassword"} {
		if q.Has(k) {
			q.Set(k, "xxxxx")
			u.RawQuery = q.Encode()
		}
	}
	return u.Redacted()
}
