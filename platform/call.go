package platform

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Log attribute keys of the adapters' call records (STYLE.md rule 9).
const (
	AttrEndpoint = "endpoint"
	AttrMethod   = "method"
	AttrPath     = "path"
	AttrStatus   = "status"
	AttrDuration = "duration"
	AttrAttempt  = "attempt"
)

// CallAttrs are the attributes of an adapter's debug record of one call:
// its endpoint name (a metric label value such as "pull_get"), the method
// and API path of its last attempt, the final HTTP status (0 when no answer
// arrived), its duration over all attempts and how many attempts it took.
// Never headers or tokens.
func CallAttrs(endpoint, method, path string, status int, d time.Duration, attempts int) []slog.Attr {
	return []slog.Attr{
		slog.String(AttrEndpoint, endpoint),
		slog.String(AttrMethod, method),
		slog.String(AttrPath, path),
		slog.Int(AttrStatus, status),
		slog.Duration(AttrDuration, d),
		slog.Int(AttrAttempt, attempts),
	}
}

// HeldBackAttrs are the attributes of an adapter's debug record of a call
// the account's rate limit wait kept from being sent, until when the
// account waits.
func HeldBackAttrs(endpoint, method, path string, until time.Time) []slog.Attr {
	return []slog.Attr{
		slog.String(AttrEndpoint, endpoint), slog.String(AttrMethod, method), slog.String(AttrPath, path),
		slog.Time("blocked_until", until),
	}
}

// APIPath is u's escaped path relative to the API root basePath (for
// example "/repos/o/r/pulls/7/merge" under "/api/v3"; a trailing slash of
// basePath is ignored), or the whole path when it is not under basePath.
func APIPath(u *url.URL, basePath string) string {
	p := u.EscapedPath()
	if rest, ok := strings.CutPrefix(p, strings.TrimSuffix(basePath, "/")); ok && rest != "" {
		return rest
	}
	return p
}

// RetryAfterHeader reads Retry-After (RFC 9110 §10.2.3) in seconds or as
// an HTTP date: the wait from now (zero when the date has passed), and
// whether the header named one. A missing or unparsable value names none.
func RetryAfterHeader(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// Backoff is the in-client wait before retry attempt+1 (attempt counts
// from 0): waitMin doubled per attempt, at most waitMax, then jittered
// into its upper half (d/2 to d). Zero when the bound is not positive.
func Backoff(waitMin, waitMax time.Duration, attempt int) time.Duration {
	d := waitMin
	for i := 0; i < attempt && d < waitMax; i++ {
		d *= 2
	}
	d = min(d, waitMax)
	if d <= 0 {
		return 0
	}
	return d/2 + rand.N(d/2+1)
}

// UnsentRetryable reports whether a transport error is one the adapters
// retry in-client because the request cannot have reached the platform: a
// failed dial, or a DNS failure other than "no such host".
func UnsentRetryable(err error) bool {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return !dnsErr.IsNotFound
	}
	var opErr *net.OpError
	return errors.As(err, &opErr) && opErr.Op == "dial"
}

// AccountWaits records and reads how long each account of an adapter must
// wait before its next request, after the platform rate-limited it, so that
// every replica respects one account's wait (store.Store implements it over
// the account waits table). The zero time means "no wait".
type AccountWaits interface {
	AccountBlockedUntil(ctx context.Context, account string) (time.Time, error)
	BlockAccountUntil(ctx context.Context, account string, until time.Time) error
}

// WaitUntil is until when account must wait before it sends, by waits:
// the zero time when it may send now (now is the clock), or when waits is
// nil. On a failed read it returns the zero time with the error, for the
// adapter to log and send (fail-open).
func WaitUntil(ctx context.Context, waits AccountWaits, account string, now func() time.Time) (time.Time, error) {
	if waits == nil {
		return time.Time{}, nil
	}
	until, err := waits.AccountBlockedUntil(ctx, account)
	if err != nil {
		return time.Time{}, err
	}
	if !until.After(now()) {
		return time.Time{}, nil
	}
	return until, nil
}

// SleepCtx waits d or until ctx ends, and returns ctx's error when it ended
// first (a d of zero or less returns at once). Adapters use it where they
// wait in the client (Config.SleepFunc's default).
func SleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
