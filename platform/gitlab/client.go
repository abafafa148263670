// Package gitlab is changebot's GitLab adapter: the only package that imports
// the GitLab client library (gitlab.com/gitlab-org/api/client-go). It
// implements the REST calls the change flow needs, speaks only in platform
// types, and turns every non-2xx answer into a wrapped *platform.Error that
// keeps the real HTTP status, GitLab's message, the wait GitLab asked for and
// the client library's *gitlab.ErrorResponse.
//
// It must not hold change state, decide what a status means for a flow, sleep
// for longer than a short in-client retry, or let a token reach an error, a
// log line or a metric label. The in-memory GitLab used by tests lives in the
// subpackage gitlabfake.
package gitlab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	gl "gitlab.com/gitlab-org/api/client-go"

	"changebot/platform"
)

// Defaults applied by New when the corresponding Config field is zero.
const (
	// DefaultRetryMax is the number of in-client retries of one call.
	DefaultRetryMax = 2
	// DefaultRetryWaitMin is the first in-client backoff; it doubles per retry.
	DefaultRetryWaitMin = 100 * time.Millisecond
	// DefaultRetryWaitMax caps one in-client wait. A 429 that asks for a longer
	// wait (Retry-After or RateLimit-Reset) is not retried in the client: the
	// error carries RetryAfter so the calling job can snooze instead.
	DefaultRetryWaitMax = 2 * time.Second
)

// defaultHTTPTimeout bounds one attempt when Config.HTTPClient is nil.
const defaultHTTPTimeout = 30 * time.Second

// userAgent is sent on every request so GitLab admins can tell the bot apart.
const userAgent = "changebot"

// Config configures New. BaseURL and Token are required; everything else is
// optional.
type Config struct {
	// BaseURL is the GitLab instance, for example "https://gitlab.example.com"
	// or "https://gitlab.example.com/api/v4"; a trailing slash and the
	// "/api/v4" suffix are normalised away (doc/api/rest/_index.md).
	BaseURL string
	// Token is the personal, project or group access token of the robot
	// account that authors branches, commits, merge requests and notes. It is
	// sent as PRIVATE-TOKEN and never appears in errors or logs.
	Token string
	// ReviewerTokens are the tokens of the reviewer robots, one client each,
	// addressed by index in Reviewer and Approve. Each approves separately
	// (DESIGN.md §5 "Reviewer approval").
	ReviewerTokens []string
	// HTTPClient is the HTTP client to use; nil means one with a 30 s
	// timeout per attempt. A client without a Transport gets its own clone
	// of http.DefaultTransport (platform.OwnHTTPClient). New copies it and
	// wraps its transport; the caller's value is not changed.
	HTTPClient *http.Client
	// Logger receives one debug record per call and one per in-client retry;
	// nil discards. Records carry endpoint, method, path, status, duration and
	// attempt; never headers or tokens.
	Logger *slog.Logger
	// RetryMax is how many times one call is retried inside the client: 429
	// for every method (GitLab did not process the request) and 5xx for GET
	// only (a POST or PUT that answered 5xx may have taken effect; the calling
	// job, which is idempotent against GitLab's state, decides). Zero means
	// DefaultRetryMax; a negative value disables in-client retries, so the
	// job's own backoff governs alone. GITLAB-FACTS.md §2.12.
	RetryMax int
	// RetryWaitMin and RetryWaitMax bound the in-client backoff; zero means
	// DefaultRetryWaitMin and DefaultRetryWaitMax. A 429 asking to wait longer
	// than RetryWaitMax is returned at once with RetryAfter set.
	RetryWaitMin, RetryWaitMax time.Duration
	// ObserveFunc, when set, is called once after every call (after in-client
	// retries) with a low-cardinality endpoint name such as
	// "merge_request_get", the final HTTP status (0 when no answer arrived)
	// and the call's duration. The bot exports it as
	// changebot_gitlab_calls_total and changebot_gitlab_call_duration_seconds;
	// this package does not import Prometheus.
	ObserveFunc func(endpoint string, status int, d time.Duration)
	// NowFunc is the clock used to turn RateLimit-Reset (a Unix time) into a
	// wait, and the one the account waits (AccountWaits) are recorded and
	// compared on: every replica must use the same one, the Budget's
	// (serve passes the database's, budget.Clock, issue 21 point 6); nil
	// means time.Now.
	NowFunc func() time.Time
	// SleepFunc waits while a call a person waits on waits for the call
	// budget in the client (PersonBudgetWait); nil means a timer that ends
	// early with ctx. Tests inject one.
	SleepFunc func(ctx context.Context, d time.Duration) error
	// AdapterFunc, when set, is asked at every Approve which Approver to use
	// for the project: AdapterChecklist or AdapterLegacy (the runtime setting
	// approval.adapter; anything else means legacy). nil means legacy.
	AdapterFunc func(projectID int64) string
	// AccountWaits, when set, is where every replica records and reads how
	// long a GitLab account must wait after a 429 (the database, so that
	// all replicas respect one account's wait; issue 10 point 4). Before
	// each request the client reads its account's wait; while it lasts the
	// call is not sent and fails with a *platform.Error of kind
	// platform.ErrRateLimited (status 429, RetryAfter the rest of the
	// wait). After a 429 it records the wait GitLab named (Retry-After,
	// RateLimit-Reset, RateLimit-ResetTime), or platform.DefaultRateLimitWait
	// when it named none. An account is the instance's host and a
	// fingerprint of the token (never the token). A failed read or write is
	// logged and the call goes on (fail-open). nil: each call on its own.
	AccountWaits AccountWaits
	// Budget, when set, is the call budget every request of every account
	// takes from before it is sent (issue 12 point 4), shared by all
	// replicas: it replaces the read of AccountWaits (its take also
	// refuses while the account waits out a 429); changebot/budget leases
	// calls in batches, so most requests cost no database statement. A call it holds back fails unsent with a
	// *platform.Error of kind platform.ErrRateLimited, Budget set and
	// RetryAfter when the budget has a call again. Requests made with a
	// context of platform.PriorityBackground are held back while the
	// budget is low. A GitLab answer's RateLimit-Remaining below what the
	// budget holds lowers it; RateLimit-Remaining 0 with a reset time
	// records the wait in AccountWaits. A failed take is logged and the
	// call goes on (fail-open). nil: no budget.
	Budget CallBudget
	// ChecklistCacheSize bounds how many projects' approval checklists the
	// checklist adapter keeps in memory; zero means
	// DefaultChecklistCacheSize.
	ChecklistCacheSize int
}

// AccountWaits records and reads how long each GitLab account must wait
// before its next request (platform.AccountWaits); store.Store implements
// it over the gitlab_account_waits table. The zero time means "no wait".
type AccountWaits = platform.AccountWaits

// CallBudget is the call budget of each account (Config.Budget);
// changebot/budget implements it over the store.
type CallBudget interface {
	// TakeCall takes one call of account at priority p. It returns 0 and
	// what the budget holds after the take when granted, else how long to
	// wait before the budget has a call for p.
	TakeCall(ctx context.Context, account string, p platform.Priority) (wait time.Duration, left float64, err error)
	// RemainingCalls records that GitLab says account has remaining calls
	// left in its window (RateLimit-Remaining).
	RemainingCalls(ctx context.Context, account string, remaining int) error
}

// Client calls GitLab as the robot account and as each reviewer robot. It is
// safe for concurrent use. Build it with New.
type Client struct {
	robot     *gl.Client
	reviewers []*gl.Client

	basePath string // "/api/v4" or "/<prefix>/api/v4", stripped from error paths
	secrets  []string
	logger   *slog.Logger
	observe  func(endpoint string, status int, d time.Duration)
	now      func() time.Time
	adapter  func(projectID int64) string

	checklists *checklistCache

	accounts *platform.Accounts
}

// New validates cfg, reporting every problem at once, and builds one
// client-go client for the robot token and one per reviewer token. It makes
// no request.
func New(cfg Config) (*Client, error) {
	base, err := normalizeBaseURL(cfg.BaseURL)
	var problems []error
	if err != nil {
		problems = append(problems, err)
	}
	if strings.TrimSpace(cfg.Token) == "" {
		problems = append(problems, errors.New("robot token is empty"))
	}
	for i, t := range cfg.ReviewerTokens {
		if strings.TrimSpace(t) == "" {
			problems = append(problems, fmt.Errorf("reviewer token %d is empty", i))
		}
	}
	if cfg.RetryWaitMin < 0 || cfg.RetryWaitMax < 0 {
		problems = append(problems, errors.New("retry waits must not be negative"))
	}
	if cfg.ChecklistCacheSize < 0 {
		problems = append(problems, errors.New("checklist cache size must not be negative"))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("configuring gitlab client: %w", errors.Join(problems...))
	}

	c := &Client{
		basePath:   strings.TrimSuffix(base.Path, "/") + "/api/v4",
		secrets:    append([]string{cfg.Token}, cfg.ReviewerTokens...),
		logger:     cfg.Logger,
		observe:    cfg.ObserveFunc,
		now:        cfg.NowFunc,
		adapter:    cfg.AdapterFunc,
		checklists: newChecklistCache(cfg.ChecklistCacheSize),
		accounts:   platform.NewAccounts(len(cfg.ReviewerTokens)),
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	rp := retryPolicy{now: c.now,
		RetryLimits: platform.RetryLimits{Max: cfg.RetryMax, WaitMin: cfg.RetryWaitMin, WaitMax: cfg.RetryWaitMax}.
			WithDefaults(platform.RetryLimits{Max: DefaultRetryMax, WaitMin: DefaultRetryWaitMin, WaitMax: DefaultRetryWaitMax})}

	hc := platform.OwnHTTPClient(cfg.HTTPClient, defaultHTTPTimeout)
	build := func(token string) (*gl.Client, error) {
		gate := accountGate{waits: cfg.AccountWaits, budget: cfg.Budget, account: accountKey(base, token), now: c.now, sleep: cfg.SleepFunc}
		if gate.sleep == nil {
			gate.sleep = platform.SleepCtx
		}
		return gl.NewClient(token, c.clientOptions(base.String(), hc, rp, gate)...)
	}
	if c.robot, err = build(cfg.Token); err != nil {
		return nil, fmt.Errorf("building robot gitlab client: %w", c.redact(err))
	}
	for i, t := range cfg.ReviewerTokens {
		rc, err := build(t)
		if err != nil {
			return nil, fmt.Errorf("building reviewer %d gitlab client: %w", i, c.redact(err))
		}
		c.reviewers = append(c.reviewers, rc)
	}
	return c, nil
}

// clientOptions are the client-go options shared by every token's client.
func (c *Client) clientOptions(base string, hc *http.Client, rp retryPolicy, gate accountGate) []gl.ClientOptionFunc {
	h := *hc
	h.Transport = &recordingTransport{base: h.Transport, logger: c.logger, gate: gate}
	opts := []gl.ClientOptionFunc{
		gl.WithBaseURL(base),
		gl.WithHTTPClient(&h),
		gl.WithUserAgent(userAgent),
		gl.WithURLWarningLogger(c.logger),
		gl.WithCustomRetryWaitMinMax(rp.WaitMin, rp.WaitMax),
		gl.WithCustomBackoff(rp.backoff),
		gl.WithCustomRetry(rp.checkRetry),
		// client-go's own limiter is off: left on, each token's client sizes
		// one from the RateLimit-Limit of its first answer (read as calls
		// per minute, at two thirds of it) and queues every call of the
		// client behind it in arrival order. That held a call a person
		// waits on behind the polls queued before it (seconds each, under
		// a low limit), whatever the call budget's priority said, limited
		// each replica on its own instead of all together, and its
		// configuration races with the calls already under way. The call
		// budget (Config.Budget) and the account's 429 waits
		// (Config.AccountWaits) pace the calls instead.
		gl.WithCustomLimiter(noLimiter{}),
	}
	// checkRetry replaces client-go's own check, so RetryMax alone decides:
	// zero retries when retries are disabled.
	return append(opts, gl.WithCustomRetryMax(max(rp.Max, 0)))
}

// noLimiter is a client-go RateLimiter that never waits (see
// clientOptions).
type noLimiter struct{}

// Wait implements gl.RateLimiter: it returns at once.
func (noLimiter) Wait(context.Context) error { return nil }

// normalizeBaseURL parses raw and strips a trailing slash and "/api/v4", so
// that client-go, which appends "/api/v4" itself, sees the instance root.
func normalizeBaseURL(raw string) (*url.URL, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return nil, errors.New("base URL is empty")
	}
	u, err := platform.ParseBaseURL(raw)
	if err != nil {
		return nil, err
	}
	p := strings.TrimRight(u.Path, "/")
	p = strings.TrimSuffix(p, "/api/v4")
	u.Path = strings.TrimRight(p, "/")
	u.RawPath = ""
	return u, nil
}

// redactString replaces every configured token in s with "[REDACTED]".
func (c *Client) redactString(s string) string { return platform.Redact(s, c.secrets) }

// redact returns err unchanged unless its text contains a token, in which
// case it returns a plain error with the token removed.
func (c *Client) redact(err error) error { return platform.RedactError(err, c.secrets) }

// CurrentUser returns the robot account (GET /user, doc/api/users.md), read
// once and cached after the first success; concurrent first callers share
// one read.
func (c *Client) CurrentUser(ctx context.Context) (platform.User, error) {
	return c.accounts.Robot(ctx, func(ctx context.Context) (platform.User, error) { return c.readUser(ctx, c.robot) })
}

// ReviewerCount returns how many reviewer robots are configured
// (len(Config.ReviewerTokens)).
func (c *Client) ReviewerCount() int { return len(c.reviewers) }

// Reviewer returns reviewer robot i (0-based, in Config.ReviewerTokens order)
// as GET /user answers with its token, cached after the first success;
// concurrent first callers share one read.
func (c *Client) Reviewer(ctx context.Context, i int) (platform.User, error) {
	return c.accounts.Reviewer(ctx, i, func(ctx context.Context, i int) (platform.User, error) { return c.readUser(ctx, c.reviewers[i]) })
}

// IsReviewer reports whether username is one of the reviewer robots, as
// far as they have been read (platform.Accounts.IsReviewer: no call).
func (c *Client) IsReviewer(username string) bool { return c.accounts.IsReviewer(username) }

func (c *Client) readUser(ctx context.Context, api *gl.Client) (platform.User, error) {
	u, err := call(ctx, c, epUserGet, func(o gl.RequestOptionFunc) (*gl.User, *gl.Response, error) {
		return api.Users.CurrentUser(o)
	})
	if err != nil {
		return platform.User{}, err
	}
	return platform.User{ID: u.ID, Username: u.Username}, nil
}

// Project reads a project (GET /projects/:id, doc/api/projects.md). project is
// a numeric id ("42") or a full path ("group/sub/repo"); a 404 matches
// platform.ErrNotFound.
func (c *Client) Project(ctx context.Context, project string) (platform.Project, error) {
	if project == "" {
		return platform.Project{}, errors.New("reading project: project is empty")
	}
	var pid any = project
	if n, err := strconv.ParseInt(project, 10, 64); err == nil {
		pid = n
	}
	p, err := call(ctx, c, epProjectGet, func(o gl.RequestOptionFunc) (*gl.Project, *gl.Response, error) {
		return c.robot.Projects.GetProject(pid, nil, o)
	})
	if err != nil {
		return platform.Project{}, fmt.Errorf("reading project %s: %w", project, err)
	}
	return platform.Project{
		ID:                p.ID,
		PathWithNamespace: p.PathWithNamespace,
		DefaultBranch:     p.DefaultBranch,
		WebURL:            p.WebURL,
		SquashOption:      string(p.SquashOption),
		MergeMethod:       string(p.MergeMethod),
		MergeTrains:       p.MergeTrainsEnabled,
	}, nil
}

// MemberAccess returns the access level (10 guest … 50 owner) userID has on
// the project, inherited memberships included (GET
// /projects/:id/members/all/:user_id, doc/api/members.md). A user who is not
// a member yields 0 and a nil error.
func (c *Client) MemberAccess(ctx context.Context, projectID, userID int64) (int, error) {
	m, err := call(ctx, c, epMemberGet, func(o gl.RequestOptionFunc) (*gl.ProjectMember, *gl.Response, error) {
		return c.robot.ProjectMembers.GetInheritedProjectMember(projectID, userID, o)
	})
	if errors.Is(err, platform.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading access of user %d on project %d: %w", userID, projectID, err)
	}
	return int(m.AccessLevel), nil
}

// GroupMemberAccess returns userID's access level in group (a numeric id or
// a full path), inherited membership included (GET
// /groups/:id/members/all/:user_id, doc/api/members.md); 0 and nil error
// when the user is not a member (404).
func (c *Client) GroupMemberAccess(ctx context.Context, group string, userID int64) (int, error) {
	m, err := call(ctx, c, epGroupMemberGet, func(o gl.RequestOptionFunc) (*gl.GroupMember, *gl.Response, error) {
		return c.robot.GroupMembers.GetInheritedGroupMember(group, userID, o)
	})
	if errors.Is(err, platform.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading access of user %d in group %s: %w", userID, group, err)
	}
	return int(m.AccessLevel), nil
}
