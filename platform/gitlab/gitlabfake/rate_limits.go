package gitlabfake

import (
	"net/http"
	"strconv"
	"time"
)

// RateLimitHeaders names which headers a rate-limited answer carries.
// GitLab's throttles send different sets depending on the limiter and the
// version (doc/administration/settings/user_and_ip_rate_limits.md "Response
// headers"; python-gitlab#1889, gitlab-org/gitlab#199738).
type RateLimitHeaders string

// The header sets of RateLimit.Headers.
const (
	// RateLimitResetHeaders: RateLimit-Limit, RateLimit-Remaining: 0,
	// RateLimit-Reset (Unix seconds of the window's end) and
	// RateLimit-ResetTime (HTTP date), no Retry-After. The default.
	RateLimitResetHeaders RateLimitHeaders = "ratelimit_reset"
	// RateLimitRetryAfterSeconds: Retry-After in seconds only.
	RateLimitRetryAfterSeconds RateLimitHeaders = "retry_after_seconds"
	// RateLimitRetryAfterDate: Retry-After as an HTTP date only.
	RateLimitRetryAfterDate RateLimitHeaders = "retry_after_date"
	// RateLimitNoHeaders: no header that says how long to wait.
	RateLimitNoHeaders RateLimitHeaders = "none"
)

// RateLimitMessage is the body GitLab's application rate limiter answers.
const RateLimitMessage = `{"message":{"error":"This endpoint has been requested too many times. Try again later."}}`

// RateLimit is a window during which every REST call authenticated as User
// answers 429 with RateLimitMessage, as when GitLab throttles one account.
type RateLimit struct {
	// User is the throttled username (required).
	User string
	// Until is the end of the window on the server's clock
	// (Options.NowFunc); calls from then on run normally.
	Until time.Time
	// Headers chooses the headers of the answers; "" means
	// RateLimitResetHeaders.
	Headers RateLimitHeaders
	// Limit is RateLimit-Limit; 0 means 2000 (GitLab.com's authenticated
	// API limit per minute).
	Limit int
}

// InjectRateLimit adds the window r. Windows are checked after
// authentication and before injected faults.
func (s *Server) InjectRateLimit(r RateLimit) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits = append(s.limits, r)
}

// rateLimitOf returns the window that throttles u now, nil when none. Under
// s.mu.
func (s *Server) rateLimitOf(u *user) *RateLimit {
	if u == nil {
		return nil
	}
	now := s.now()
	for i := range s.limits {
		if l := &s.limits[i]; l.User == u.username && now.Before(l.Until) {
			return l
		}
	}
	return nil
}

// writeRateLimit answers 429 for window l at now.
func (rc *reqCtx) writeRateLimit(l *RateLimit, now time.Time) {
	h := rc.w.Header()
	wait := l.Until.Sub(now)
	secs := int64((wait + time.Second - 1) / time.Second)
	switch l.Headers {
	case "", RateLimitResetHeaders:
		limit := l.Limit
		if limit == 0 {
			limit = 2000
		}
		h.Set("RateLimit-Limit", strconv.Itoa(limit))
		h.Set("RateLimit-Remaining", "0")
		h.Set("RateLimit-Reset", strconv.FormatInt(l.Until.Unix(), 10))
		h.Set("RateLimit-ResetTime", l.Until.UTC().Format(http.TimeFormat))
	case RateLimitRetryAfterSeconds:
		h.Set("Retry-After", strconv.FormatInt(secs, 10))
	case RateLimitRetryAfterDate:
		h.Set("Retry-After", l.Until.UTC().Format(http.TimeFormat))
	}
	rc.status = http.StatusTooManyRequests
	h.Set("Content-Type", "application/json")
	rc.w.WriteHeader(http.StatusTooManyRequests)
	_, _ = rc.w.Write([]byte(RateLimitMessage))
}

// RequestLimit throttles every user to PerWindow REST calls per Window, as
// GitLab's authenticated API rate limit does (GitLab.com: 2,000 per minute
// per user; doc/user/gitlab_com/_index.md "Rate limits"): windows are
// fixed, aligned on the server's clock (Options.NowFunc) to multiples of
// Window since the Unix epoch. Every answer to a throttled user carries
// RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset (the window's
// end, Unix seconds), as GitLab.com's answers do; the call beyond the
// limit answers 429 with RateLimitMessage and RateLimit-ResetTime.
type RequestLimit struct {
	PerWindow int
	// Window is the window's length; 0 means a minute.
	Window time.Duration
}

// requestWindow counts one user's calls in the current window.
type requestWindow struct {
	start time.Time
	calls int
}

// SetRequestLimit throttles every user to l from now on; a zero PerWindow
// removes the limit. Windows are checked after authentication, before
// injected rate limits and faults.
func (s *Server) SetRequestLimit(l RequestLimit) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.Window <= 0 {
		l.Window = time.Minute
	}
	s.reqLimit = l
	s.reqWindows = map[string]*requestWindow{}
}

// RateLimited returns how many calls the server answered 429 (request
// limit or injected windows) so far.
func (s *Server) RateLimited() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if c.Status == http.StatusTooManyRequests {
			n++
		}
	}
	return n
}

// countRequest counts a call of u against the request limit and sets the
// RateLimit-* headers; it reports false, having answered 429, when u is
// over the limit. Under s.mu.
func (rc *reqCtx) countRequest(s *Server, u *user, now time.Time) bool {
	l := s.reqLimit
	if u == nil || l.PerWindow <= 0 {
		return true
	}
	start := now.Truncate(l.Window)
	w := s.reqWindows[u.username]
	if w == nil || !w.start.Equal(start) {
		w = &requestWindow{start: start}
		s.reqWindows[u.username] = w
	}
	end := start.Add(l.Window)
	h := rc.w.Header()
	h.Set("RateLimit-Limit", strconv.Itoa(l.PerWindow))
	h.Set("RateLimit-Reset", strconv.FormatInt(end.Unix(), 10))
	if w.calls >= l.PerWindow {
		h.Set("RateLimit-Remaining", "0")
		h.Set("RateLimit-ResetTime", end.UTC().Format(http.TimeFormat))
		rc.status = http.StatusTooManyRequests
		h.Set("Content-Type", "application/json")
		rc.w.WriteHeader(http.StatusTooManyRequests)
		_, _ = rc.w.Write([]byte(RateLimitMessage))
		return false
	}
	w.calls++
	h.Set("RateLimit-Remaining", strconv.Itoa(l.PerWindow-w.calls))
	return true
}
