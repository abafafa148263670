package platform

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"
)

// UserOnce is an account as the platform answers for one token, read once
// and cached after the first success. Callers that ask while the first read
// is in flight wait for it instead of reading too, so the jobs and hooks
// that start together (status note, command check, approve) make one read
// per token, not one each; a failed read is not cached, the next caller
// reads again. The zero value is ready; it must not be copied after use.
type UserOnce struct {
	mu   sync.Mutex
	user *User
	// reading is closed when the read in flight ends; nil when none runs.
	reading chan struct{}
}

// Get returns the cached account or the one read answers, sharing a read
// in flight. A caller whose ctx ends while it waits gets ctx's error.
func (o *UserOnce) Get(ctx context.Context, read func(context.Context) (User, error)) (User, error) {
	for {
		o.mu.Lock()
		if o.user != nil {
			u := *o.user
			o.mu.Unlock()
			return u, nil
		}
		if o.reading == nil {
			done := make(chan struct{})
			o.reading = done
			o.mu.Unlock()
			u, err := read(ctx)
			o.mu.Lock()
			if err == nil {
				o.user = &u
			}
			o.reading = nil
			o.mu.Unlock()
			close(done)
			return u, err
		}
		wait := o.reading
		o.mu.Unlock()
		select {
		case <-wait: // cached now, or failed: then read ourselves
		case <-ctx.Done():
			return User{}, ctx.Err()
		}
	}
}

// Cached returns the account if it was read already; it never reads.
func (o *UserOnce) Cached() (User, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.user == nil {
		return User{}, false
	}
	return *o.user, true
}

// Accounts are an adapter's robot account and its reviewer robots', each
// read once and cached (UserOnce). Build it with NewAccounts.
type Accounts struct {
	robot     UserOnce
	reviewers []UserOnce
}

// NewAccounts returns the cache of a robot and n reviewers.
func NewAccounts(n int) *Accounts { return &Accounts{reviewers: make([]UserOnce, n)} }

// Robot returns the robot account, read once by read; its error is
// wrapped "reading robot user: …".
func (a *Accounts) Robot(ctx context.Context, read func(context.Context) (User, error)) (User, error) {
	u, err := a.robot.Get(ctx, read)
	if err != nil {
		return User{}, fmt.Errorf("reading robot user: %w", err)
	}
	return u, nil
}

// Reviewer returns reviewer i (0-based, in the order of the adapter's
// reviewer tokens), read once by read(ctx, i); an error names i, also when
// fewer reviewers are configured.
func (a *Accounts) Reviewer(ctx context.Context, i int, read func(ctx context.Context, i int) (User, error)) (User, error) {
	if i < 0 || i >= len(a.reviewers) {
		return User{}, fmt.Errorf("reading reviewer %d: only %d reviewers configured", i, len(a.reviewers))
	}
	u, err := a.reviewers[i].Get(ctx, func(ctx context.Context) (User, error) { return read(ctx, i) })
	if err != nil {
		return User{}, fmt.Errorf("reading reviewer %d: %w", i, err)
	}
	return u, nil
}

// IsReviewer reports whether username is one of the reviewer robots read so
// far (Reviewer); it makes no call, so a reviewer not read yet is not one.
func (a *Accounts) IsReviewer(username string) bool {
	if username == "" {
		return false
	}
	for i := range a.reviewers {
		if u, ok := a.reviewers[i].Cached(); ok && u.Username == username {
			return true
		}
	}
	return false
}

// ParseBaseURL parses an adapter's base URL and refuses what cannot be an
// API root: a scheme other than http or https, no host, user info, a query
// or a fragment. The errors name the URL redacted, never a password. The
// adapter then normalizes the path its own way.
func ParseBaseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("parsing base URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("base URL %q: scheme must be http or https", u.Redacted())
	}
	if u.Host == "" {
		return nil, fmt.Errorf("base URL %q: host is empty", u.Redacted())
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("base URL %q: must not carry user info, query or fragment", u.Redacted())
	}
	return u, nil
}

// AccountKey names an account on the API host: the host and the first 16
// hex digits of the SHA-256 of what identifies the account (a token, or an
// App installation), never that itself, so that every replica configured
// with the same credentials shares one wait and one call budget.
func AccountKey(host, id string) string {
	sum := sha256.Sum256([]byte(id))
	return host + "/" + hex.EncodeToString(sum[:8])
}

// Redact replaces every non-empty secret in s with "[REDACTED]".
func Redact(s string, secrets []string) string {
	for _, t := range secrets {
		if t != "" {
			s = strings.ReplaceAll(s, t, "[REDACTED]")
		}
	}
	return s
}

// RedactError returns err unchanged unless its text contains one of the
// secrets; then a plain error with the text redacted (Redact). The chain
// is dropped then, since a wrapped error could still print the secret.
func RedactError(err error, secrets []string) error {
	if err == nil {
		return nil
	}
	if s := err.Error(); Redact(s, secrets) != s {
		return errors.New(Redact(s, secrets))
	}
	return err
}

// RetryLimits bound an adapter's in-client retries of one call.
type RetryLimits struct {
	// Max is how many times one call is retried; negative: never.
	Max int
	// WaitMin is the first backoff (it doubles per retry), WaitMax caps one
	// wait.
	WaitMin, WaitMax time.Duration
}

// WithDefaults returns l with each zero field taken from def, and WaitMax
// raised to WaitMin when below it.
func (l RetryLimits) WithDefaults(def RetryLimits) RetryLimits {
	if l.Max == 0 {
		l.Max = def.Max
	}
	if l.WaitMin == 0 {
		l.WaitMin = def.WaitMin
	}
	if l.WaitMax == 0 {
		l.WaitMax = def.WaitMax
	}
	l.WaitMax = max(l.WaitMax, l.WaitMin)
	return l
}
