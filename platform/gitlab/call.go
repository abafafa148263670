package gitlab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"

	"changebot/platform"
)

// Endpoint names passed to Config.ObserveFunc and logged as "endpoint". They
// are metric label values: keep them few and stable.
const (
	epUserGet                      = "user_get"
	epProjectGet                   = "project_get"
	epMemberGet                    = "project_member_get"
	epGroupMemberGet               = "group_member_get"
	epBranchGet                    = "branch_get"
	epTreeList                     = "tree_list"
	epProtectedBranchGet           = "protected_branch_get"
	epBranchCreate                 = "branch_create"
	epBranchDelete                 = "branch_delete"
	epCommitCreate                 = "commit_create"
	epCommitGet                    = "commit_get"
	epMergeBaseGet                 = "merge_base_get"
	epCompareGet                   = "compare_get"
	epMergeRequestList             = "merge_request_list"
	epMergeRequestCreate           = "merge_request_create"
	epMergeRequestGet              = "merge_request_get"
	epMergeRequestUpdate           = "merge_request_update"
	epMergeRequestApprovalsGet     = "merge_request_approvals_get"
	epMergeRequestApprove          = "merge_request_approve"
	epMergeRequestApproveChecklist = "merge_request_approve_checklist"
	epMergeRequestUnapprove        = "merge_request_unapprove"
	epApprovalChecklistGet         = "approval_checklist_get"
	epMergeRequestMerge            = "merge_request_merge"
	epMergeRequestRebase           = "merge_request_rebase"
	epMergeTrainAdd                = "merge_train_add"
	epMergeTrainCarGet             = "merge_train_car_get"
	epMergeRequestPipelinesList    = "merge_request_pipelines_list"
	epMergeRequestPipelineNew      = "merge_request_pipeline_create"
	epPipelinesList                = "pipelines_list"
	epPipelineCreate               = "pipeline_create"
	epNoteCreate                   = "note_create"
	epNoteUpdate                   = "note_update"
	epNoteGet                      = "note_get"
	epNotesList                    = "notes_list"
)

// eventUUIDHeader must never be sent back to GitLab: GitLab would treat the
// hooks our calls cause as recursive and block them (GITLAB-FACTS.md §1.1,
// DESIGN.md §1).
const eventUUIDHeader = "X-Gitlab-Event-Uuid"

// maxErrorBody bounds how much of an error answer is kept for the message.
const maxErrorBody = 64 << 10

// maxMessage bounds platform.Error.Message.
const maxMessage = 500

// record collects what the transport saw during one call (all attempts).
type record struct {
	attempts int
	method   string
	url      *url.URL
	body     []byte // body of the last error answer, at most maxErrorBody
	// blockedUntil is set when the account's wait or its call budget kept
	// the last attempt from being sent (accountGate); budget tells which.
	blockedUntil time.Time
	budget       bool
}

type recordKey struct{}

// call runs one client-go call with ctx, observes and logs it, and translates
// a failure into a *platform.Error when GitLab answered with a non-2xx status.
func call[T any](ctx context.Context, c *Client, endpoint string, fn func(gl.RequestOptionFunc) (T, *gl.Response, error)) (T, error) {
	v, _, err := callResp(ctx, c, endpoint, fn)
	return v, err
}

// callResp is call that also returns client-go's response (for pagination and
// the exact status of a success).
func callResp[T any](ctx context.Context, c *Client, endpoint string, fn func(gl.RequestOptionFunc) (T, *gl.Response, error)) (T, *gl.Response, error) {
	rec := &record{}
	start := time.Now()
	v, resp, err := fn(gl.WithContext(context.WithValue(ctx, recordKey{}, rec)))
	d := time.Since(start)
	if err != nil && !rec.blockedUntil.IsZero() {
		var zero T
		return zero, nil, c.blocked(ctx, endpoint, rec)
	}

	status := 0
	if resp != nil && resp.Response != nil {
		status = resp.StatusCode
	}
	path := ""
	if rec.url != nil {
		path = c.apiPath(rec.url)
	}
	c.logger.LogAttrs(ctx, slog.LevelDebug, "gitlab call", platform.CallAttrs(endpoint, rec.method, path, status, d, rec.attempts)...)
	if c.observe != nil {
		c.observe(endpoint, status, d)
	}
	if err != nil {
		var zero T
		return zero, resp, c.translate(endpoint, err, resp, rec)
	}
	return v, resp, nil
}

// minHeldWait is the shortest RetryAfter of a call held back by the
// account's wait, so that a job never spins on a wait about to end.
const minHeldWait = 100 * time.Millisecond

// blocked is the error of a call the account's wait kept from being sent:
// a *platform.Error of kind ErrRateLimited with the rest of the wait (at
// least minHeldWait). It is logged, not observed: GitLab never saw it. The
// wait is the rest, not a round second: with GitLab's waits of a second or
// two, a floor of a second kept every held job sleeping after the account
// could send again (the chaos run's robot account sat idle so).
func (c *Client) blocked(ctx context.Context, endpoint string, rec *record) error {
	path := ""
	if rec.url != nil {
		path = c.apiPath(rec.url)
	}
	wait := max(rec.blockedUntil.Sub(c.now()), minHeldWait)
	c.logger.LogAttrs(ctx, slog.LevelDebug, "gitlab call held back by the account's rate limit wait",
		platform.HeldBackAttrs(endpoint, rec.method, path, rec.blockedUntil)...)
	msg := "not sent: GitLab asked this account to wait until " + rec.blockedUntil.UTC().Format(time.RFC3339)
	if rec.budget {
		msg = "not sent: the account's call budget has a call again at " + rec.blockedUntil.UTC().Format(time.RFC3339)
	}
	return &platform.Error{
		Method: rec.method, Path: path, Status: http.StatusTooManyRequests, Kind: platform.ErrRateLimited,
		Message: msg, RetryAfter: wait, NotSent: true, Budget: rec.budget,
	}
}

// translate turns a failed call to endpoint into a *platform.Error when
// GitLab answered with a status client-go treats as failure (anything but
// 200, 201, 202, 204, 304), its Kind chosen by kindOf. Other failures
// (network, timeout, cancelled context, undecodable body) are returned
// unchanged except for token redaction; platform.IsTransient treats them as
// transient.
func (c *Client) translate(endpoint string, err error, resp *gl.Response, rec *record) error {
	if resp == nil || resp.Response == nil || successStatus(resp.StatusCode) {
		return c.redact(err)
	}
	hr := resp.Response
	var er *gl.ErrorResponse
	if !errors.As(err, &er) {
		// client-go answers a 404 with its own gl.ErrNotFound and drops the
		// body; rebuild the ErrorResponse so callers always find one.
		er = &gl.ErrorResponse{Response: hr, Body: rec.body}
	}
	body := er.Body
	if len(body) == 0 {
		body = rec.body
	}
	msg := c.redactString(messageOf(body, hr.StatusCode, hr.Header.Get("Content-Type")))
	// The ErrorResponse is wrapped too: scrub it so that neither its Error()
	// nor its Body can echo a token GitLab might have quoted.
	er.Message = c.redactString(er.Message)
	if er.Message == "" {
		er.Message = msg
	}
	er.Body = []byte(c.redactString(string(body)))
	method, path := "", ""
	if hr.Request != nil {
		method, path = hr.Request.Method, c.apiPath(hr.Request.URL)
	}
	return &platform.Error{
		Method:     method,
		Path:       path,
		Status:     hr.StatusCode,
		Kind:       kindOf(endpoint, hr.StatusCode, msg),
		Message:    msg,
		RetryAfter: retryAfter(hr.Header, c.now()),
		Err:        er,
	}
}

// kindOf names what GitLab's answer status (with message msg) means on
// endpoint, where the same status means different things on different
// endpoints (GitLab's lib/api sources and doc/api pages):
//   - merge (PUT .../merge): 409 "SHA does not match HEAD of source branch"
//     is ErrHeadMoved; 405 "Method Not Allowed", 406 (GitLab 15 and older)
//     and 422 "Branch cannot be merged" are ErrNotMergeable;
//   - approve (POST .../approve): 409 "SHA does not match HEAD of source
//     branch" is ErrHeadMoved;
//   - merge request create: 409 "Another open merge request already exists
//     for this source branch: !<iid>" is ErrAlreadyExists;
//   - branch create: 400 "Branch already exists" is ErrAlreadyExists (other
//     400s, such as "Branch name is invalid", are ErrInvalid);
//   - commit create on a new branch (start_branch): 400 "A branch called
//     '<b>' already exists. Switch to that branch in order to make changes"
//     is ErrAlreadyExists (Commits::CreateService#validate_branch_existence!;
//     the file actions' 400s, such as "A file with this name already
//     exists", are ErrInvalid), and 400 "You can only create or edit files
//     when you are on a branch" (no such start branch) is ErrNotFound;
//   - everything else: platform.KindOf(status).
func kindOf(endpoint string, status int, msg string) error {
	switch {
	case status == http.StatusConflict && (endpoint == epMergeRequestMerge || endpoint == epMergeRequestApprove || endpoint == epMergeRequestApproveChecklist):
		return platform.ErrHeadMoved
	case endpoint == epMergeRequestMerge && (status == http.StatusMethodNotAllowed || status == http.StatusNotAcceptable || status == http.StatusUnprocessableEntity):
		return platform.ErrNotMergeable
	case endpoint == epMergeRequestCreate && status == http.StatusConflict:
		return platform.ErrAlreadyExists
	case endpoint == epBranchCreate && status == http.StatusBadRequest && strings.Contains(strings.ToLower(msg), "already exists"):
		return platform.ErrAlreadyExists
	case endpoint == epCommitCreate && status == http.StatusBadRequest && strings.HasPrefix(msg, "A branch called ") &&
		strings.Contains(msg, " already exists"):
		return platform.ErrAlreadyExists
	case endpoint == epCommitCreate && status == http.StatusBadRequest && msg == "You can only create or edit files when you are on a branch":
		return platform.ErrNotFound // the start branch does not exist (validate_on_branch!)
	}
	return platform.KindOf(status)
}

// successStatus mirrors client-go's CheckResponse.
func successStatus(code int) bool {
	switch code {
	case 200, 201, 202, 204, 304:
		return true
	}
	return false
}

// apiPath returns u's escaped path relative to the API root, for example
// "/projects/group%2Frepo/merge_requests/7/merge".
func (c *Client) apiPath(u *url.URL) string { return platform.APIPath(u, c.basePath) }

// messageOf extracts GitLab's message from an error body. GitLab answers
// {"message": "..."} (render_api_error!), {"message": ["..."]} (409 on MR
// create), {"message": {"field": ["..."]}} (validation), {"error": "..."}
// (Grape and OAuth), or plain text such as Rack::Attack's "Retry later"
// (GITLAB-FACTS.md §2.3, §2.12). An empty or HTML body yields "<code> <text>".
func messageOf(body []byte, status int, contentType string) string {
	b := bytes.TrimSpace(body)
	fallback := strconv.Itoa(status) + " " + http.StatusText(status)
	if len(b) == 0 {
		return fallback
	}
	var raw any
	if json.Unmarshal(b, &raw) == nil {
		if m, ok := raw.(map[string]any); ok {
			if v, ok := m["message"]; ok {
				if s := flatten(v); s != "" {
					return truncate(s)
				}
			}
			if v, ok := m["error"]; ok {
				s := flatten(v)
				if d, ok := m["error_description"].(string); ok && d != "" {
					s += ": " + d
				}
				if s != "" {
					return truncate(s)
				}
			}
		}
		if s := flatten(raw); s != "" {
			return truncate(s)
		}
		return fallback
	}
	if mt, _, _ := mime.ParseMediaType(contentType); mt == "text/html" || bytes.HasPrefix(b, []byte("<")) {
		return fallback
	}
	return truncate(string(b))
}

// flatten renders a decoded JSON message as one line: strings as they are,
// arrays joined with "; ", objects as sorted "key: value" pairs.
func flatten(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case []any:
		parts := make([]string, 0, len(v))
		for _, e := range v {
			if s := flatten(e); s != "" {
				parts = append(parts, s)
			}
		}
		return strings.Join(parts, "; ")
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			if s := flatten(v[k]); s != "" {
				parts = append(parts, k+": "+s)
			}
		}
		return strings.Join(parts, "; ")
	default:
		return fmt.Sprint(v)
	}
}

func truncate(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= maxMessage {
		return s
	}
	r := []rune(s)
	if len(r) <= maxMessage {
		return s
	}
	return string(r[:maxMessage]) + "…"
}

// retryAfter is how long GitLab asked us to wait (rateLimitWait), zero
// when it did not say or the moment has passed.
func retryAfter(h http.Header, now time.Time) time.Duration {
	d, _ := rateLimitWait(h, now)
	return d
}

// rateLimitWait reads how long a rate-limited answer asks us to wait, in the
// forms GitLab sends (doc/administration/settings/user_and_ip_rate_limits.md
// "Response headers"; python-gitlab#1889, gitlab-org/gitlab#199738), first
// match wins:
//   - Retry-After in seconds ("60") or as an HTTP date;
//   - RateLimit-Reset as a Unix time in seconds ("1740906060"); a value below
//     resetDeltaBelow is read as seconds from now, the IETF draft's form;
//   - RateLimit-ResetTime as an HTTP date ("Sun, 02 Mar 2026 09:01:00 GMT").
//
// named reports whether a header named a wait at all; d is zero when none
// did or the moment has passed. Unparsable values count as absent.
func rateLimitWait(h http.Header, now time.Time) (d time.Duration, named bool) {
	until := func(t time.Time) (time.Duration, bool) { return max(t.Sub(now), 0), true }
	if d, named := platform.RetryAfterHeader(h, now); named {
		return d, true
	}
	if v := strings.TrimSpace(h.Get("RateLimit-Reset")); v != "" {
		if u, err := strconv.ParseInt(v, 10, 64); err == nil && u >= 0 {
			if u < resetDeltaBelow {
				return time.Duration(u) * time.Second, true
			}
			d, ok := until(time.Unix(u, 0))
			return d.Round(time.Second), ok
		}
	}
	if v := strings.TrimSpace(h.Get("RateLimit-ResetTime")); v != "" {
		if t, err := http.ParseTime(v); err == nil {
			return until(t)
		}
	}
	return 0, false
}

// resetDeltaBelow: a RateLimit-Reset below this (2001-09-09 as a Unix time)
// is a number of seconds, not a moment.
const resetDeltaBelow = 1_000_000_000

// retryPolicy is the in-client retry of client-go's retryablehttp layer.
type retryPolicy struct {
	platform.RetryLimits
	now func() time.Time
}

// checkRetry retries a 429 when GitLab names a wait of no more than waitMax
// (a 429 that names none is not retried here: GitLab's windows last a
// minute, and the calling job waits that out, issue 10 point 4), a 5xx
// (except 501) of a GET or HEAD, and network errors known to happen before
// the request reached GitLab (dial, DNS). Everything else surfaces at once.
func (rp retryPolicy) checkRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if err != nil {
		return platform.UnsentRetryable(err), nil
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		d, named := rateLimitWait(resp.Header, rp.now())
		return named && d <= rp.WaitMax, nil
	case resp.StatusCode == 0 || (resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented):
		if resp.Request == nil {
			return false, nil
		}
		m := resp.Request.Method
		return m == http.MethodGet || m == http.MethodHead, nil
	}
	return false, nil
}

// backoff waits what a 429 asked for, else waitMin doubled per attempt with
// jitter, never more than waitMax.
func (rp retryPolicy) backoff(waitMin, waitMax time.Duration, attempt int, resp *http.Response) time.Duration {
	if resp != nil && resp.StatusCode == http.StatusTooManyRequests {
		if d := retryAfter(resp.Header, rp.now()); d > 0 {
			return min(d, waitMax)
		}
	}
	return platform.Backoff(waitMin, waitMax, attempt)
}

// recordingTransport wraps the HTTP transport under client-go: it strips
// X-Gitlab-Event-UUID, counts attempts, keeps the body of error answers
// (client-go drops the body of a 404) and logs retries.
type recordingTransport struct {
	base   http.RoundTripper
	logger *slog.Logger
	gate   accountGate
}

// accountGate holds back the requests of one account while GitLab asked it
// to wait, and records the wait a 429 names (Config.AccountWaits).
type accountGate struct {
	waits   AccountWaits // nil: no gate
	budget  CallBudget   // nil: no budget, the wait alone
	account string
	now     func() time.Time
	sleep   func(ctx context.Context, d time.Duration) error // Config.SleepFunc
}

// PersonBudgetWait is the longest a call at person priority waits in the
// client, in all, for the call budget to have a call for it (one flows
// back every 60/PerMinute seconds: 40 ms at the default 1,500 a minute)
// before it is held back as a background call is at once. Waiting here
// keeps a step's calls together: a held call ends the step's job, which
// runs the step again from its start and sends the calls it had made
// again, so under a burst of changes (the budget's burst spent) the steps
// a person waits on would spend the budget on repeats and never finish.
// A wait longer than this (GitLab's 429 wait, a budget turned low) is
// still the job's snooze, never a sleep; so is a wait that would leave the
// call's context (the job's timeout) less than the wait itself: a job that
// slept into its timeout would fail and use up an attempt, where a held
// call snoozes without one.
const PersonBudgetWait = 2 * time.Second

// leavesTime reports whether waiting wait leaves ctx at least as much
// time again (always, for a context without a deadline).
func leavesTime(ctx context.Context, wait time.Duration) bool {
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl) >= 2*wait
}

// take asks the budget for one call at ctx's priority: the zero time when
// it may be sent (also when the budget cannot be read: fail-open), else
// until when to hold it; left is what the budget holds after a granted
// take (-1 unknown). A call at person priority waits for the budget here
// while its waits add up to no more than PersonBudgetWait, unless ctx
// says not to (platform.WithoutBudgetWait: a submit's checks).
func (g accountGate) take(ctx context.Context, log *slog.Logger) (until time.Time, left float64) {
	p := platform.PriorityOf(ctx)
	var waited time.Duration
	for {
		wait, left, err := g.budget.TakeCall(ctx, g.account, p)
		if err != nil {
			log.WarnContext(ctx, "taking a call from the gitlab account's budget failed; sending", "err", err)
			return time.Time{}, -1
		}
		if wait <= 0 {
			return time.Time{}, left
		}
		if p == platform.PriorityBackground || !platform.BudgetWaitAllowed(ctx) || waited+wait > PersonBudgetWait || !leavesTime(ctx, wait) || g.sleep(ctx, wait) != nil {
			return g.now().Add(wait), 0
		}
		waited += wait
	}
}

// answered lowers the budget when GitLab says the account has fewer calls
// left (RateLimit-Remaining) than the budget held after its take, and
// records GitLab's reset time as the account's wait when none are left.
// It writes only then: a request normally costs the take alone.
func (g accountGate) answered(ctx context.Context, log *slog.Logger, h http.Header, left float64) {
	v := strings.TrimSpace(h.Get("RateLimit-Remaining"))
	if g.budget == nil || v == "" {
		return
	}
	remaining, err := strconv.Atoi(v)
	if err != nil || remaining < 0 || float64(remaining) >= left {
		return
	}
	if err := g.budget.RemainingCalls(ctx, g.account, remaining); err != nil {
		log.WarnContext(ctx, "recording the gitlab account's remaining calls failed", "err", err)
	}
	if remaining > 0 || g.waits == nil {
		return
	}
	if d, named := rateLimitWait(h, g.now()); named && d > 0 {
		if err := g.waits.BlockAccountUntil(ctx, g.account, g.now().Add(d)); err != nil {
			log.WarnContext(ctx, "recording the gitlab account's rate limit wait failed", "err", err)
		}
	}
}

// accountKey names the account of token on the instance at base: its host
// and the first 16 hex digits of the token's SHA-256 (never the token), so
// that every replica configured with the same token shares one wait.
func accountKey(base *url.URL, token string) string { return platform.AccountKey(base.Host, token) }

// AccountOf returns the key under which the account of token on the
// instance at baseURL keeps its wait and its call budget (AccountWaits,
// CallBudget): its host and a fingerprint of the token, never the token.
func AccountOf(baseURL, token string) (string, error) {
	base, err := normalizeBaseURL(baseURL)
	if err != nil {
		return "", err
	}
	return accountKey(base, token), nil
}

// blockedUntil returns until when the account must wait, the zero time
// when it may send now (also when the wait cannot be read: fail-open).
func (g accountGate) blockedUntil(ctx context.Context, log *slog.Logger) time.Time {
	until, err := platform.WaitUntil(ctx, g.waits, g.account, g.now)
	if err != nil {
		log.WarnContext(ctx, "reading the gitlab account's rate limit wait failed; sending", "err", err)
	}
	return until
}

// record429 records the wait a 429 answer asks of the account.
func (g accountGate) record429(ctx context.Context, log *slog.Logger, h http.Header) {
	if g.waits == nil {
		return
	}
	now := g.now()
	d, named := rateLimitWait(h, now)
	switch {
	case !named:
		d = platform.DefaultRateLimitWait
	case d <= 0:
		return // GitLab says the window is over: nothing to wait for
	}
	if err := g.waits.BlockAccountUntil(ctx, g.account, now.Add(d)); err != nil {
		log.WarnContext(ctx, "recording the gitlab account's rate limit wait failed", "err", err)
	}
}

// errAccountBlocked is what the transport returns for a request it held
// back; callResp turns it into a *platform.Error through the record.
var errAccountBlocked = errors.New("gitlab account is waiting out a rate limit")

// RoundTrip implements http.RoundTripper.
func (t *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if _, ok := req.Header[eventUUIDHeader]; ok {
		req = req.Clone(req.Context())
		req.Header.Del(eventUUIDHeader)
	}
	rec, _ := req.Context().Value(recordKey{}).(*record)
	if rec != nil {
		rec.attempts++
		rec.method, rec.url = req.Method, req.URL
		rec.body = nil
		if rec.attempts > 1 {
			t.logger.LogAttrs(req.Context(), slog.LevelDebug, "gitlab call retry",
				slog.String(platform.AttrMethod, req.Method),
				slog.Int(platform.AttrAttempt, rec.attempts),
			)
		}
	}
	var until time.Time
	left := -1.0
	if t.gate.budget != nil {
		until, left = t.gate.take(req.Context(), t.logger)
	} else {
		until = t.gate.blockedUntil(req.Context(), t.logger)
	}
	if !until.IsZero() {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		if rec != nil {
			rec.blockedUntil, rec.budget = until, t.gate.budget != nil
		}
		return nil, errAccountBlocked
	}
	if rec != nil {
		rec.blockedUntil, rec.budget = time.Time{}, false
	}
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err == nil && resp != nil && resp.StatusCode == http.StatusTooManyRequests {
		t.gate.record429(req.Context(), t.logger, resp.Header)
	} else if err == nil && resp != nil && left >= 0 {
		t.gate.answered(req.Context(), t.logger, resp.Header, left)
	}
	if err != nil || resp == nil || rec == nil || resp.StatusCode < 300 {
		return resp, err
	}
	buf, readErr := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	rec.body = buf
	rest := resp.Body
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(buf), errReader{readErr}, rest), rest}
	return resp, nil
}

// errReader replays a read error after the buffered prefix of a body.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	return 0, io.EOF
}
