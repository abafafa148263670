package gitlab

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"

	"changebot/platform"
)

// TestErrorTranslation checks that every non-2xx answer becomes a
// *platform.Error with the real status, GitLab's message and the wait GitLab
// asked for, that client-go's *gitlab.ErrorResponse stays reachable, and that
// no token leaks into the error text. Bodies are the ones GITLAB-FACTS.md
// quotes with their source lines.
func TestErrorTranslation(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name           string
		status         int
		body           string
		header         map[string]string
		wantMessage    string
		wantRetryAfter time.Duration
	}{
		{name: "401 double approve or not allowed", status: 401, body: `{"message":"401 Unauthorized"}`, wantMessage: "401 Unauthorized"},
		{name: "404 with body", status: 404, body: `{"message":"404 Merge Request Not Found"}`, wantMessage: "404 Merge Request Not Found"},
		{name: "404 empty", status: 404, wantMessage: "404 Not Found"},
		{name: "405 not mergeable", status: 405, body: `{"message":"405 Method Not Allowed"}`, wantMessage: "405 Method Not Allowed"},
		{name: "406 older gitlab", status: 406, body: `{"message":"Branch cannot be merged"}`, wantMessage: "Branch cannot be merged"},
		{name: "409 sha mismatch", status: 409, body: `{"message":"SHA does not match HEAD of source branch: abc"}`, wantMessage: "SHA does not match HEAD of source branch: abc"},
		{name: "409 message array", status: 409, body: `{"message":["Another open merge request already exists for this source branch: !5"]}`, wantMessage: "Another open merge request already exists for this source branch: !5"},
		{name: "400 validation object", status: 400, body: `{"message":{"title":["can't be blank"],"base":["is bad"]}}`, wantMessage: "base: is bad; title: can't be blank"},
		{name: "400 grape error", status: 400, body: `{"error":"sha is invalid"}`, wantMessage: "sha is invalid"},
		{name: "422 cannot merge", status: 422, body: `{"message":"Branch cannot be merged"}`, wantMessage: "Branch cannot be merged"},
		{name: "429 retry-after plain text", status: 429, body: "Retry later\n", header: map[string]string{"Retry-After": "7", "Content-Type": "text/plain"}, wantMessage: "Retry later", wantRetryAfter: 7 * time.Second},
		{
			name: "429 ratelimit-reset", status: 429,
			body:        `{"message":{"error":"This endpoint has been requested too many times. Try again later."}}`,
			header:      map[string]string{"RateLimit-Reset": strconv.FormatInt(now.Add(30*time.Second).Unix(), 10)},
			wantMessage: "error: This endpoint has been requested too many times. Try again later.", wantRetryAfter: 30 * time.Second,
		},
		{name: "500", status: 500, body: `{"message":"500 Internal Server Error"}`, wantMessage: "500 Internal Server Error"},
		{name: "502 html", status: 502, body: "<html><body>bad gateway</body></html>", header: map[string]string{"Content-Type": "text/html"}, wantMessage: "502 Bad Gateway"},
		{name: "message echoing a token is redacted", status: 400, body: `{"message":"bad token ` + robotToken + `"}`, wantMessage: "bad token [REDACTED]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t)
			s.on("PUT /projects/42/merge_requests/7/merge", answer{status: tt.status, body: tt.body, header: tt.header})
			c := newClient(t, s, func(cfg *Config) {
				cfg.NowFunc = func() time.Time { return now }
				cfg.RetryWaitMax = time.Millisecond // a 429 asking for seconds surfaces at once
			})
			_, err := c.Merge(t.Context(), 42, 7, platform.MergeParams{SHA: "abc"})
			if err == nil {
				t.Fatal("Merge succeeded; want an error")
			}
			var pe *platform.Error
			if !errors.As(err, &pe) {
				t.Fatalf("err %T %v is not a *platform.Error", err, err)
			}
			if pe.Status != tt.status || pe.Message != tt.wantMessage || pe.RetryAfter != tt.wantRetryAfter {
				t.Errorf("platform.Error{Status:%d Message:%q RetryAfter:%v}; want {%d %q %v}", pe.Status, pe.Message, pe.RetryAfter, tt.status, tt.wantMessage, tt.wantRetryAfter)
			}
			if pe.Method != http.MethodPut || pe.Path != "/projects/42/merge_requests/7/merge" {
				t.Errorf("call = %s %s; want PUT /projects/42/merge_requests/7/merge", pe.Method, pe.Path)
			}
			if got := errors.Is(err, platform.ErrNotFound); got != (tt.status == 404) {
				t.Errorf("errors.Is(err, ErrNotFound) = %v", got)
			}
			var er *gl.ErrorResponse
			if !errors.As(err, &er) || !er.HasStatusCode(tt.status) {
				t.Errorf("errors.As(*gitlab.ErrorResponse) = %v with status %d", er, tt.status)
			}
			if platform.StatusOf(err) != tt.status {
				t.Errorf("StatusOf = %d", platform.StatusOf(err))
			}
			wantTransient := tt.status == 429 || tt.status >= 500
			if platform.IsTransient(err) != wantTransient {
				t.Errorf("IsTransient = %v; want %v", platform.IsTransient(err), wantTransient)
			}
			if !strings.HasPrefix(err.Error(), "merging merge request !7 of project 42: ") {
				t.Errorf("error %q lacks its context", err)
			}
			assertNoSecrets(t, err.Error())
			assertNoSecrets(t, er.Error())
			if got := s.count("PUT /projects/42/merge_requests/7/merge"); got != 1 {
				t.Errorf("PUT merge sent %d times; want 1 (never retried in the client)", got)
			}
		})
	}
}

// TestRetriesAreBounded counts requests: 429 naming a short wait is retried for any method, 5xx
// only for reads, each at most RetryMax times; a 429 asking for longer than
// RetryWaitMax surfaces at once.
func TestRetriesAreBounded(t *testing.T) {
	t.Parallel()
	fail500 := answer{status: 500, body: `{"message":"500 Internal Server Error"}`}
	fail429 := answer{status: 429, body: "Retry later"}
	mrGet := answer{fixture: "api-mr-get.json"}
	tests := []struct {
		name      string
		retryMax  int
		route     string
		answers   []answer
		call      func(*testing.T, *Client) error
		wantCount int
		wantOK    bool
	}{
		{
			name: "get 500 default retries", route: "GET /projects/42/merge_requests/7", answers: []answer{fail500},
			call:      func(t *testing.T, c *Client) error { _, err := c.MergeRequest(t.Context(), 42, 7, false); return err },
			wantCount: 1 + DefaultRetryMax,
		},
		{
			name: "get 500 then success", route: "GET /projects/42/merge_requests/7", answers: []answer{fail500, mrGet},
			call:      func(t *testing.T, c *Client) error { _, err := c.MergeRequest(t.Context(), 42, 7, false); return err },
			wantCount: 2, wantOK: true,
		},
		{
			name: "get 500 retries disabled", retryMax: -1, route: "GET /projects/42/merge_requests/7", answers: []answer{fail500},
			call:      func(t *testing.T, c *Client) error { _, err := c.MergeRequest(t.Context(), 42, 7, false); return err },
			wantCount: 1,
		},
		{
			name: "get 500 five retries", retryMax: 5, route: "GET /projects/42/merge_requests/7", answers: []answer{fail500},
			call:      func(t *testing.T, c *Client) error { _, err := c.MergeRequest(t.Context(), 42, 7, false); return err },
			wantCount: 6,
		},
		{
			name: "post 500 not retried", route: "POST /projects/42/merge_requests/7/notes", answers: []answer{fail500},
			call:      func(t *testing.T, c *Client) error { _, err := c.CreateNote(t.Context(), 42, 7, "hi"); return err },
			wantCount: 1,
		},
		{
			// GitLab named no wait: its window lasts up to a minute, which
			// the calling job waits out (issue 10 point 4).
			name: "429 naming no wait not retried", route: "POST /projects/42/merge_requests/7/notes", answers: []answer{fail429},
			call:      func(t *testing.T, c *Client) error { _, err := c.CreateNote(t.Context(), 42, 7, "hi"); return err },
			wantCount: 1,
		},
		{
			name: "post 429 short retry-after retried", route: "POST /projects/42/merge_requests/7/notes",
			answers:   []answer{{status: 429, body: "Retry later", header: map[string]string{"Retry-After": "0"}}},
			call:      func(t *testing.T, c *Client) error { _, err := c.CreateNote(t.Context(), 42, 7, "hi"); return err },
			wantCount: 1 + DefaultRetryMax,
		},
		{
			name: "429 short retry-after then success", route: "GET /projects/42/merge_requests/7",
			answers:   []answer{{status: 429, header: map[string]string{"Retry-After": "0"}}, mrGet},
			call:      func(t *testing.T, c *Client) error { _, err := c.MergeRequest(t.Context(), 42, 7, false); return err },
			wantCount: 2, wantOK: true,
		},
		{
			name: "429 long retry-after surfaces at once", route: "GET /projects/42/merge_requests/7",
			answers:   []answer{{status: 429, header: map[string]string{"Retry-After": "60"}}},
			call:      func(t *testing.T, c *Client) error { _, err := c.MergeRequest(t.Context(), 42, 7, false); return err },
			wantCount: 1,
		},
		{
			name: "409 never retried", route: "POST /projects/42/merge_requests/7/approve",
			answers:   []answer{{status: 409, body: `{"message":"SHA does not match HEAD of source branch: abc"}`}},
			call:      func(t *testing.T, c *Client) error { return c.Approve(t.Context(), 0, 42, 7, "abc") },
			wantCount: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newServer(t)
			s.on(tt.route, tt.answers...)
			c := newClient(t, s, func(cfg *Config) { cfg.RetryMax = tt.retryMax })
			err := tt.call(t, c)
			if (err == nil) != tt.wantOK {
				t.Fatalf("err = %v; want ok=%v", err, tt.wantOK)
			}
			if got := s.count(tt.route); got != tt.wantCount {
				t.Errorf("%s sent %d times; want %d", tt.route, got, tt.wantCount)
			}
			if err != nil {
				var pe *platform.Error
				if !errors.As(err, &pe) || pe.Status != tt.answers[len(tt.answers)-1].status {
					t.Errorf("err = %v; want a *platform.Error with the last status", err)
				}
			}
		})
	}
}

// TestNetworkErrorIsTransientAndSecretFree points the client at a closed
// server: the error is not a *platform.Error, counts as transient and names no
// token.
func TestNetworkErrorIsTransientAndSecretFree(t *testing.T) {
	t.Parallel()
	s := newServer(t)
	c := newClient(t, s, func(cfg *Config) { cfg.RetryMax = -1 })
	s.srv.Close()
	_, err := c.MergeRequest(t.Context(), 42, 7, false)
	if err == nil {
		t.Fatal("call to a closed server succeeded")
	}
	if platform.StatusOf(err) != 0 || !platform.IsTransient(err) {
		t.Errorf("err %v: StatusOf = %d, IsTransient = %v; want 0, true", err, platform.StatusOf(err), platform.IsTransient(err))
	}
	assertNoSecrets(t, err.Error())
}

// TestRateLimitWait pins how long each form of GitLab's rate-limit answer
// asks us to wait (issue 10 point 4; python-gitlab#1889,
// gitlab-org/gitlab#199738), and whether it named a wait at all.
func TestRateLimitWait(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	end := now.Add(60 * time.Second)
	unix := func(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
	tests := []struct {
		name      string
		header    map[string]string
		want      time.Duration
		wantNamed bool
	}{
		{name: "none", want: 0},
		{name: "retry-after seconds", header: map[string]string{"Retry-After": "7"}, want: 7 * time.Second, wantNamed: true},
		{name: "retry-after zero", header: map[string]string{"Retry-After": "0"}, want: 0, wantNamed: true},
		{name: "retry-after http date", header: map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, want: 90 * time.Second, wantNamed: true},
		{name: "retry-after http date passed", header: map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, want: 0, wantNamed: true},
		{name: "ratelimit-reset epoch", header: map[string]string{"RateLimit-Reset": unix(now.Add(42 * time.Second))}, want: 42 * time.Second, wantNamed: true},
		{name: "ratelimit-reset epoch passed", header: map[string]string{"RateLimit-Reset": unix(now.Add(-time.Minute))}, want: 0, wantNamed: true},
		{name: "ratelimit-reset delta seconds", header: map[string]string{"RateLimit-Reset": "30"}, want: 30 * time.Second, wantNamed: true},
		{name: "ratelimit-resettime http date", header: map[string]string{"RateLimit-ResetTime": end.Format(http.TimeFormat)}, want: 60 * time.Second, wantNamed: true},
		{
			name: "gitlab throttle: limit, remaining, reset, resettime, no retry-after",
			header: map[string]string{"RateLimit-Limit": "2000", "RateLimit-Remaining": "0",
				"RateLimit-Reset": unix(end), "RateLimit-ResetTime": end.Format(http.TimeFormat)},
			want: 60 * time.Second, wantNamed: true,
		},
		{name: "retry-after wins", header: map[string]string{"Retry-After": "3", "RateLimit-Reset": unix(now.Add(42 * time.Second))}, want: 3 * time.Second, wantNamed: true},
		{name: "reset wins over resettime", header: map[string]string{"RateLimit-Reset": unix(now.Add(42 * time.Second)), "RateLimit-ResetTime": end.Format(http.TimeFormat)}, want: 42 * time.Second, wantNamed: true},
		{name: "garbage retry-after falls through to resettime", header: map[string]string{"Retry-After": "soon", "RateLimit-ResetTime": end.Format(http.TimeFormat)}, want: 60 * time.Second, wantNamed: true},
		{name: "garbage", header: map[string]string{"Retry-After": "soon", "RateLimit-Reset": "later", "RateLimit-ResetTime": "tomorrow"}, want: 0},
		{name: "remaining only", header: map[string]string{"RateLimit-Remaining": "0"}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			got, named := rateLimitWait(h, now)
			if got != tt.want || named != tt.wantNamed {
				t.Errorf("rateLimitWait = %v, %v; want %v, %v", got, named, tt.want, tt.wantNamed)
			}
			if ra := retryAfter(h, now); ra != tt.want {
				t.Errorf("retryAfter = %v; want %v", ra, tt.want)
			}
		})
	}
}

func TestMessageOf(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", maxMessage+50)
	tests := []struct {
		name, body, contentType, want string
		status                        int
	}{
		{name: "string", status: 409, body: `{"message":"SHA does not match HEAD of source branch: abc"}`, want: "SHA does not match HEAD of source branch: abc"},
		{name: "oauth error", status: 401, body: `{"error":"invalid_token","error_description":"Token was revoked."}`, want: "invalid_token: Token was revoked."},
		{name: "plain text", status: 429, body: "Retry later", want: "Retry later"},
		{name: "empty", status: 503, want: "503 Service Unavailable"},
		{name: "html", status: 502, body: "<html>x</html>", contentType: "text/html; charset=utf-8", want: "502 Bad Gateway"},
		{name: "json null", status: 500, body: "null", want: "500 Internal Server Error"},
		{name: "long", status: 400, body: long, want: long[:maxMessage] + "…"},
		{name: "whitespace collapsed", status: 400, body: "{\"message\":\"a\\n  b\"}", want: "a b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := messageOf([]byte(tt.body), tt.status, tt.contentType); got != tt.want {
				t.Errorf("messageOf = %q; want %q", got, tt.want)
			}
		})
	}
}

// TestTransportStripsEventUUID: even if a caller's context or middleware put
// X-Gitlab-Event-UUID on a request, it never reaches GitLab (DESIGN.md §1).
func TestTransportStripsEventUUID(t *testing.T) {
	t.Parallel()
	var got http.Header
	base := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = r.Header.Clone()
		return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
	})
	tr := &recordingTransport{base: base, logger: newClient(t, newServer(t)).logger}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://gitlab.example.com/api/v4/user", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Gitlab-Event-UUID", "5b3b7d3c-0000-4000-8000-000000000000")
	if _, err := tr.RoundTrip(req); err != nil {
		t.Fatal(err)
	}
	if got.Get("X-Gitlab-Event-UUID") != "" {
		t.Errorf("X-Gitlab-Event-UUID reached the transport")
	}
	if req.Header.Get("X-Gitlab-Event-UUID") == "" {
		t.Errorf("the caller's request was modified")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
