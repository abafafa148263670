package github

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	gh "github.com/google/go-github/v93/github"

	"changebot/platform"
)

// Endpoint names passed to Config.ObserveFunc and logged as "endpoint".
// They are metric label values: keep them few and stable.
const (
	epUserGet             = "user_get"
	epUserGetByID         = "user_get_by_id"
	epAppGet              = "app_get"
	epInstallationToken   = "installation_token_create"
	epRepoGet             = "repo_get"
	epRepoGetByID         = "repo_get_by_id"
	epPermissionGet       = "collaborator_permission_get"
	epOrgMembershipGet    = "org_membership_get"
	epRefGet              = "git_ref_get"
	epRefCreate           = "git_ref_create"
	epRefUpdate           = "git_ref_update"
	epRefDelete           = "git_ref_delete"
	epBlobCreate          = "git_blob_create"
	epTreeCreate          = "git_tree_create"
	epTreeGet             = "git_tree_get"
	epCommitCreate        = "git_commit_create"
	epCommitGet           = "git_commit_get"
	epCompare             = "compare_get"
	epCommitsList         = "commits_list"
	epPullList            = "pull_list"
	epPullCreate          = "pull_create"
	epPullGet             = "pull_get"
	epPullUpdate          = "pull_update"
	epPullMerge           = "pull_merge"
	epPullUpdateBranch    = "pull_update_branch"
	epReviewsList         = "pull_reviews_list"
	epReviewCreate        = "pull_review_create"
	epReviewDismiss       = "pull_review_dismiss"
	epCheckRunsList       = "check_runs_list"
	epCheckSuitesList     = "check_suites_list"
	epCheckSuiteRerequest = "check_suite_rerequest"
	epCombinedStatusGet   = "combined_status_get"
	epRequiredChecksGet   = "required_status_checks_get"
	epWorkflowRunsList    = "workflow_runs_list"
	epWorkflowRunRerun    = "workflow_run_rerun_failed"
	epCommentCreate       = "issue_comment_create"
	epCommentUpdate       = "issue_comment_update"
	epCommentGet          = "issue_comment_get"
	epCommentsList        = "issue_comments_list"
)

// maxMessage bounds platform.Error.Message.
const maxMessage = 500

// record collects what the transport saw during one call (all attempts).
type record struct {
	attempts int
	method   string
	url      *url.URL
	// blockedUntil is set when the account's wait kept the request from
	// being sent (accountGate).
	blockedUntil time.Time
}

type recordKey struct{}

// call runs one go-github call with ctx, observes and logs it, and turns a
// non-2xx answer into a *platform.Error.
func call[T any](ctx context.Context, c *Client, endpoint string, fn func(context.Context) (T, *gh.Response, error)) (T, error) {
	v, _, err := callResp(ctx, c, endpoint, fn)
	return v, err
}

// callResp is call that also returns go-github's response (pagination,
// the exact status of a success). A 202 (go-github's *AcceptedError) is a
// success.
func callResp[T any](ctx context.Context, c *Client, endpoint string, fn func(context.Context) (T, *gh.Response, error)) (T, *gh.Response, error) {
	rec := &record{}
	start := time.Now()
	v, resp, err := fn(context.WithValue(ctx, recordKey{}, rec))
	d := time.Since(start)
	if err != nil && !rec.blockedUntil.IsZero() {
		var zero T
		return zero, nil, c.blocked(ctx, endpoint, rec)
	}
	var accepted *gh.AcceptedError
	if errors.As(err, &accepted) {
		err = nil
	}
	status := 0
	if resp != nil && resp.Response != nil {
		status = resp.StatusCode
	}
	path := ""
	if rec.url != nil {
		path = c.apiPath(rec.url)
	}
	c.logger.LogAttrs(ctx, slog.LevelDebug, "github call", platform.CallAttrs(endpoint, rec.method, path, status, d, rec.attempts)...)
	if c.observe != nil {
		c.observe(endpoint, status, d)
	}
	if err != nil {
		var zero T
		return zero, resp, c.translate(endpoint, err, resp)
	}
	return v, resp, nil
}

// minHeldWait is the shortest RetryAfter of a call held back by the
// account's wait, so that a job never spins on a wait about to end.
const minHeldWait = 100 * time.Millisecond

// blocked is the error of a call the account's wait kept from being sent:
// a *platform.Error of kind ErrRateLimited with the rest of the wait, at
// least minHeldWait. It is logged, not observed: GitHub never saw it.
func (c *Client) blocked(ctx context.Context, endpoint string, rec *record) error {
	path := ""
	if rec.url != nil {
		path = c.apiPath(rec.url)
	}
	c.logger.LogAttrs(ctx, slog.LevelDebug, "github call held back by the account's rate limit wait",
		platform.HeldBackAttrs(endpoint, rec.method, path, rec.blockedUntil)...)
	return &platform.Error{
		Method: rec.method, Path: path, Kind: platform.ErrRateLimited,
		Message:    "not sent: GitHub asked this account to wait until " + rec.blockedUntil.UTC().Format(time.RFC3339),
		RetryAfter: max(rec.blockedUntil.Sub(c.waitsNow()), minHeldWait),
	}
}

// accountGate holds back the requests of one account while GitHub asked
// it to wait, and records the wait a rate-limited answer names
// (Config.AccountWaits).
type accountGate struct {
	waits   AccountWaits // nil: no gate
	account string
	now     func() time.Time
}

// blockedUntil is until when the account must wait, zero when it may
// send (also when the wait cannot be read: fail-open).
func (g accountGate) blockedUntil(ctx context.Context, log *slog.Logger) time.Time {
	until, err := platform.WaitUntil(ctx, g.waits, g.account, g.now)
	if err != nil {
		log.WarnContext(ctx, "reading the github account's rate limit wait failed; sending", "err", err)
	}
	return until
}

// record records the wait d of a rate-limited answer (rateLimit's: what
// GitHub named, or DefaultSecondaryWait for a secondary limit that named
// none). Zero records nothing: GitHub says the window is over.
func (g accountGate) record(ctx context.Context, log *slog.Logger, d time.Duration) {
	if g.waits == nil || d <= 0 {
		return
	}
	if err := g.waits.BlockAccountUntil(ctx, g.account, g.now().Add(d)); err != nil {
		log.WarnContext(ctx, "recording the github account's rate limit wait failed", "err", err)
	}
}

// errAccountBlocked is what the transport returns for a request it held
// back; callResp turns it into a *platform.Error through the record.
var errAccountBlocked = errors.New("github account is waiting out a rate limit")

// translate turns a failed call into a *platform.Error when GitHub
// answered with a non-2xx status, its Kind chosen by kindOf and its
// RetryAfter by rateLimit. Other failures (network, timeout, cancelled
// context) are returned unchanged except for redaction;
// platform.IsTransient treats them as transient.
func (c *Client) translate(endpoint string, err error, resp *gh.Response) error {
	if resp == nil || resp.Response == nil || resp.StatusCode < 300 {
		return c.redact(err)
	}
	hr := resp.Response
	msg := c.redactString(messageOf(err, hr.StatusCode))
	method, path := "", ""
	if hr.Request != nil {
		method, path = hr.Request.Method, c.apiPath(hr.Request.URL)
	}
	pe := &platform.Error{
		Method:  method,
		Path:    path,
		Status:  hr.StatusCode,
		Kind:    kindOf(endpoint, hr.StatusCode, msg),
		Message: msg,
		Err:     c.redact(err),
	}
	if wait, limited := rateLimit(hr.StatusCode, hr.Header, msg, c.now()); limited {
		pe.Kind = platform.ErrRateLimited
		pe.RetryAfter = wait
	}
	return pe
}

// kindOf names what GitHub's status (with message msg) means on endpoint
// (docs.github.com REST reference of each endpoint; fixtures
// api-pulls-merge-405.json, api-pulls-merge-409.json):
//   - merge: 405 "Pull Request is not mergeable" is ErrNotMergeable; 409
//     "Head branch was modified. Review and try the merge again." is
//     ErrHeadMoved;
//   - update-branch: 422 with expected_head_sha stale is ErrHeadMoved; 422
//     "merge conflict between base and head" is ErrConflict (the flows then
//     read the pull request, which shows the conflict);
//   - ref create: 422 "Reference already exists" is ErrAlreadyExists;
//   - ref delete: 422 "Reference does not exist" is ErrNotFound; ref
//     update: 422 "Update is not a fast forward" is ErrConflict; commit
//     read: 422 "No commit found for SHA" is ErrNotFound;
//   - pull request create: 422 "A pull request already exists for
//     <owner>:<branch>." is ErrAlreadyExists;
//   - review create: 422 "Can not approve your own pull request" (and the
//     Actions token's "not permitted to approve") is ErrForbidden;
//   - everything else: platform.KindOf(status). Rate limits are decided
//     after this by rateLimit.
func kindOf(endpoint string, status int, msg string) error {
	lower := strings.ToLower(msg)
	switch {
	case endpoint == epPullMerge && status == http.StatusMethodNotAllowed:
		return platform.ErrNotMergeable
	case endpoint == epPullMerge && status == http.StatusConflict:
		return platform.ErrHeadMoved
	case endpoint == epPullUpdateBranch && status == http.StatusUnprocessableEntity && strings.Contains(lower, "expected head sha"):
		return platform.ErrHeadMoved
	case endpoint == epPullUpdateBranch && status == http.StatusUnprocessableEntity && strings.Contains(lower, "conflict"):
		return platform.ErrConflict
	case endpoint == epRefCreate && status == http.StatusUnprocessableEntity && strings.Contains(lower, "already exists"):
		return platform.ErrAlreadyExists
	case endpoint == epPullCreate && status == http.StatusUnprocessableEntity && strings.Contains(lower, "already exists"):
		return platform.ErrAlreadyExists
	case endpoint == epRefDelete && status == http.StatusUnprocessableEntity && strings.Contains(lower, "does not exist"):
		return platform.ErrNotFound
	case endpoint == epRefUpdate && status == http.StatusUnprocessableEntity && strings.Contains(lower, "fast forward"):
		return platform.ErrConflict
	case endpoint == epCommitsList && status == http.StatusUnprocessableEntity && strings.Contains(lower, "no commit found"):
		return platform.ErrNotFound
	case endpoint == epReviewCreate && status == http.StatusUnprocessableEntity &&
		(strings.Contains(lower, "approve your own") || strings.Contains(lower, "not permitted to approve")):
		return platform.ErrForbidden
	}
	return platform.KindOf(status)
}

// DefaultSecondaryWait is the wait after a secondary rate limit that named
// none: GitHub asks to "wait at least one minute" (docs.github.com "Rate
// limits for the REST API", exceeding the secondary rate limit).
const DefaultSecondaryWait = time.Minute

// MinResetWait is the least wait after a primary rate limit: an
// x-ratelimit-reset already past on the local clock (a clock ahead of
// GitHub's) would otherwise be retried at once, and GitHub answers each
// retry with the same limit until its own clock reaches the reset.
const MinResetWait = 5 * time.Second

// rateLimit reports whether a 403 or 429 is one of GitHub's rate limits
// and how long it asks to wait (docs.github.com "Rate limits for the REST
// API"):
//   - primary: x-ratelimit-remaining is 0; wait until x-ratelimit-reset
//     (Unix seconds), at least MinResetWait, Retry-After first when present;
//   - secondary: Retry-After is present, or the message says "secondary
//     rate limit" or "abuse detection" (fixture
//     api-error-403-secondary-rate-limit-2018.json, 2018 wording); wait
//     Retry-After seconds, else until x-ratelimit-reset when remaining is
//     0, else DefaultSecondaryWait.
//
// A plain 429 is a rate limit too (platform.KindOf); a 403 that is none of
// these is a refusal.
func rateLimit(status int, h http.Header, msg string, now time.Time) (time.Duration, bool) {
	if status != http.StatusForbidden && status != http.StatusTooManyRequests {
		return 0, false
	}
	lower := strings.ToLower(msg)
	primary := h.Get("X-Ratelimit-Remaining") == "0"
	retry, hasRetry := platform.RetryAfterHeader(h, now)
	secondary := hasRetry || strings.Contains(lower, "secondary rate limit") || strings.Contains(lower, "abuse detection")
	if !primary && !secondary && status != http.StatusTooManyRequests {
		return 0, false
	}
	if hasRetry {
		return retry, true
	}
	if v := h.Get("X-Ratelimit-Reset"); v != "" && primary {
		if u, err := strconv.ParseInt(v, 10, 64); err == nil {
			return max(time.Unix(u, 0).Sub(now), MinResetWait).Round(time.Second), true
		}
	}
	if secondary {
		return DefaultSecondaryWait, true
	}
	return 0, true
}

// messageOf is GitHub's message: ErrorResponse.message, with the errors[]
// entries' message (or code and field) after it, as in
// {"message": "Validation Failed", "errors": [{"resource": "PullRequest",
// "code": "custom", "message": "A pull request already exists for
// o:b."}]} (fixture api-real-422-validation-failed.exchange.json). An
// empty body yields "<code> <text>".
func messageOf(err error, status int) string {
	var parts []string
	var er *gh.ErrorResponse
	var rl *gh.RateLimitError
	var ab *gh.AbuseRateLimitError
	switch {
	case errors.As(err, &er):
		if er.Message != "" {
			parts = append(parts, er.Message)
		}
		for _, e := range er.Errors {
			switch {
			case e.Message != "":
				parts = append(parts, e.Message)
			case e.Code != "":
				parts = append(parts, strings.TrimSpace(e.Resource+" "+e.Field+" "+e.Code))
			}
		}
	case errors.As(err, &rl):
		parts = append(parts, rl.Message)
	case errors.As(err, &ab):
		parts = append(parts, ab.Message)
	}
	s := strings.Join(strings.Fields(strings.Join(parts, ": ")), " ")
	if s == "" {
		return strconv.Itoa(status) + " " + http.StatusText(status)
	}
	if r := []rune(s); len(r) > maxMessage {
		s = string(r[:maxMessage]) + "…"
	}
	return s
}

// apiPath is u's escaped path relative to the API root, for example
// "/repos/o/r/pulls/7/merge".
func (c *Client) apiPath(u *url.URL) string { return platform.APIPath(u, c.basePath) }

// retryPolicy is the in-client retry of the transport.
type retryPolicy struct {
	platform.RetryLimits
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) error
}

// tokenFunc returns the token a request is sent with, and whether it was
// minted for this request (an installation token just created from the
// App's JWT): a 401 on a minted token is a refusal, never renewed again.
type tokenFunc func(ctx context.Context) (tok string, minted bool, err error)

// staticToken is the tokenFunc of a configured token.
func staticToken(tok string) tokenFunc {
	return func(context.Context) (string, bool, error) { return tok, false, nil }
}

// transport authenticates each request, counts attempts and retries: a
// rate limit that names a wait of at most waitMax (any method), a 5xx
// other than 501 of a GET or HEAD, and dial or DNS errors (the request
// never reached GitHub). An installation token GitHub answers 401 for
// (revoked, the App re-keyed, or expired early because the local clock is
// behind GitHub's) is renewed and the same request sent once more, its
// body again from GetBody (docs.github.com "Authenticating as a GitHub App
// installation": an installation token "will expire after 1 hour" and
// "you can ... revoke" it; a revoked or expired one answers 401 "Bad
// credentials"); only a 401 on a token minted for the request is a
// refusal. Everything else surfaces at once.
type transport struct {
	base  http.RoundTripper
	token tokenFunc // nil: leave Authorization alone
	// refused, when set, is told the token GitHub answered 401 for, so
	// that the next token is a new one; set only where tokens can be
	// renewed (an App installation).
	refused func(token string)
	rp      retryPolicy
	logger  *slog.Logger
	gate    accountGate
}

// RoundTrip implements http.RoundTripper.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	rec, _ := ctx.Value(recordKey{}).(*record)
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	resendable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	renewed := false
	for attempt, sent := 0, 0; ; sent++ {
		r := req.Clone(ctx)
		if sent > 0 && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			r.Body = body
		}
		tok, minted := "", false
		if t.token != nil {
			var err error
			if tok, minted, err = t.token(ctx); err != nil {
				return nil, err
			}
			r.Header.Set("Authorization", "Bearer "+tok)
		}
		if rec != nil {
			rec.attempts++
			rec.method, rec.url = req.Method, req.URL
		}
		if attempt > 0 {
			t.logger.LogAttrs(ctx, slog.LevelDebug, "github call retry", slog.String(platform.AttrMethod, req.Method), slog.Int(platform.AttrAttempt, attempt+1))
		}
		if until := t.gate.blockedUntil(ctx, t.logger); !until.IsZero() {
			if r.Body != nil {
				_ = r.Body.Close()
			}
			if rec != nil {
				rec.blockedUntil = until
			}
			return nil, errAccountBlocked
		}
		if rec != nil {
			rec.blockedUntil = time.Time{}
		}
		resp, err := base.RoundTrip(r)
		if resp != nil && resp.StatusCode == http.StatusUnauthorized && t.refused != nil {
			t.refused(tok)
			if !renewed && !minted && resendable && ctx.Err() == nil {
				renewed = true
				drain(resp)
				t.logger.LogAttrs(ctx, slog.LevelDebug, "github installation token refused; sending again with a new one",
					slog.String(platform.AttrMethod, req.Method), slog.Int(platform.AttrStatus, resp.StatusCode))
				continue
			}
		}
		wait, retry := t.rp.shouldRetry(req, resp, err, attempt)
		if resp != nil && (resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests) {
			if d, limited := rateLimit(resp.StatusCode, resp.Header, peekMessage(resp), t.rp.now()); limited {
				t.gate.record(ctx, t.logger, d)
			}
		}
		if !retry || attempt >= max(t.rp.Max, 0) || !resendable {
			return resp, err
		}
		if resp != nil {
			drain(resp)
		}
		if err := t.rp.sleep(ctx, wait); err != nil {
			return nil, err
		}
		attempt++
	}
}

// drain reads what is left of an answer not handed on (at most 64 KiB, so
// the connection can be reused) and closes it.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}

// shouldRetry decides one attempt's retry and its wait.
func (rp retryPolicy) shouldRetry(req *http.Request, resp *http.Response, err error, attempt int) (time.Duration, bool) {
	if req.Context().Err() != nil {
		return 0, false
	}
	if err != nil {
		if platform.UnsentRetryable(err) {
			return rp.backoff(attempt), true
		}
		return 0, false
	}
	switch s := resp.StatusCode; {
	case s == http.StatusForbidden || s == http.StatusTooManyRequests:
		msg := peekMessage(resp)
		d, limited := rateLimit(s, resp.Header, msg, rp.now())
		if !limited || (d == 0 && s == http.StatusForbidden) {
			return 0, false
		}
		if d == 0 {
			d = rp.backoff(attempt)
		}
		return d, d <= rp.WaitMax
	case s >= 500 && s != http.StatusNotImplemented:
		return rp.backoff(attempt), req.Method == http.MethodGet || req.Method == http.MethodHead
	}
	return 0, false
}

// backoff is waitMin doubled per attempt with jitter, at most waitMax
// (platform.Backoff).
func (rp retryPolicy) backoff(attempt int) time.Duration {
	return platform.Backoff(rp.WaitMin, rp.WaitMax, attempt)
}

// peekMessage reads the message of an error answer and puts the body back.
func peekMessage(resp *http.Response) string {
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	if err != nil {
		return ""
	}
	var m struct {
		Message string `json:"message"`
	}
	_ = json.Unmarshal(b, &m)
	return m.Message
}

// notSent is the error of a call the client decided not to send, for
// example an approval of a sha that is no longer the head: a
// *platform.Error with Status 0 and the kind, so callers decide on it as
// on GitHub's answers.
func notSent(method, path string, kind error, format string, args ...any) error {
	return &platform.Error{Method: method, Path: path, Kind: kind, Message: fmt.Sprintf(format, args...)}
}
