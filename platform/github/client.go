// Package github is changebot's GitHub adapter: the only package that
// imports the GitHub client library (github.com/google/go-github/v93). It
// implements the same method set as platform/gitlab (the interface the
// flows declare) with GitHub's meanings, speaks only in platform types, and
// turns every non-2xx answer into a wrapped *platform.Error that keeps the
// real HTTP status, GitHub's message and the wait GitHub asked for.
//
// The mapping, in the flows' words: a project is a repository (its numeric
// id; owner/name is looked up once and cached), an iid is a pull request
// number, a merge request is a pull request, a pipeline is synthesized per
// head sha from its check runs and commit statuses and the branch
// protection's required contexts, a note is an issue comment, an approval
// is a reviewer's latest review being APPROVED for the head commit, and an
// access level is a collaborator permission mapped onto GitLab's scale
// (docs/github.md).
//
// It must not hold change state, decide what a status means for a flow,
// sleep for longer than a short in-client retry, or let a token, a private
// key or a JWT reach an error, a log line or a metric label. The in-memory
// GitHub used by tests lives in the subpackage githubfake.
package github

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	gh "github.com/google/go-github/v93/github"

	"changebot/platform"
)

// Defaults applied by New when the corresponding Config field is zero.
const (
	// DefaultBaseURL is GitHub.com's REST API root.
	DefaultBaseURL = "https://api.github.com/"
	// DefaultRetryMax is the number of in-client retries of one call.
	DefaultRetryMax = 2
	// DefaultRetryWaitMin is the first in-client backoff; it doubles per retry.
	DefaultRetryWaitMin = 100 * time.Millisecond
	// DefaultRetryWaitMax caps one in-client wait. A rate limit that asks
	// for a longer wait is not retried in the client: the error carries
	// RetryAfter so the calling job can snooze instead.
	DefaultRetryWaitMax = 2 * time.Second
	// DefaultMergeableReads is how many times MergeRequest reads a pull
	// request whose mergeable is still null before it answers "checking".
	DefaultMergeableReads = 3
	// DefaultMergeableWait is the first wait between those reads; it
	// doubles per read.
	DefaultMergeableWait = 250 * time.Millisecond
	// DefaultRequiredContextsTTL is how long the required contexts of a
	// branch's protection are cached.
	DefaultRequiredContextsTTL = time.Minute
)

// defaultHTTPTimeout bounds one attempt when Config.HTTPClient is nil.
const defaultHTTPTimeout = 30 * time.Second

// userAgent is sent on every request; GitHub rejects requests without one.
const userAgent = "changebot"

// Config configures New. Either Token or App is required; everything else
// is optional.
type Config struct {
	// BaseURL is the REST API root: "" means https://api.github.com/; for
	// GitHub Enterprise Server "https://ghe.example.com/api/v3/" (a bare
	// host gets "/api/v3/" appended). A trailing slash is added.
	BaseURL string
	// Token is the personal access token (classic or fine-grained) or an
	// installation token of the robot account that authors branches,
	// commits, pull requests and comments. Sent as "Authorization: Bearer";
	// never in errors or logs. Exclusive with App.
	Token string
	// App authenticates as a GitHub App installation instead of Token:
	// installation tokens are created from the App's JWT and renewed
	// before their one-hour expiry (auth.go).
	App *AppAuth
	// ReviewerTokens are the tokens of the reviewer accounts, one each,
	// addressed by index in Reviewer and Approve. They must be other
	// accounts than the author: GitHub answers 422 "Can not approve your
	// own pull request", and an App cannot approve pull requests it opened.
	ReviewerTokens []string
	// HTTPClient is the HTTP client to use; nil means one with a 30 s
	// timeout per attempt. A client without a Transport gets its own clone
	// of http.DefaultTransport (platform.OwnHTTPClient). New copies it and
	// wraps its transport; the caller's value is not changed.
	HTTPClient *http.Client
	// Logger receives one debug record per call and per in-client retry;
	// nil discards. Records carry endpoint, method, path, status, duration
	// and attempt; never headers or tokens.
	Logger *slog.Logger
	// RetryMax is how many times one call is retried inside the client: a
	// rate limit that names a wait of at most RetryWaitMax (any method:
	// GitHub did not process the request) and a 5xx of a GET or HEAD (a
	// write that answered 5xx may have taken effect). Zero means
	// DefaultRetryMax; negative disables in-client retries.
	RetryMax int
	// RetryWaitMin and RetryWaitMax bound the in-client backoff; zero means
	// the defaults.
	RetryWaitMin, RetryWaitMax time.Duration
	// MergeableReads and MergeableWait bound MergeRequest's re-reads of a
	// pull request whose mergeable is null; zero means the defaults, a
	// negative MergeableReads means one read.
	MergeableReads int
	MergeableWait  time.Duration
	// RequiredContextsTTL is how long a branch's required status contexts
	// are cached; zero means DefaultRequiredContextsTTL, negative no cache.
	RequiredContextsTTL time.Duration
	// ObserveFunc, when set, is called once after every call (after
	// in-client retries) with a low-cardinality endpoint name such as
	// "pull_get", the final HTTP status (0 when no answer arrived) and the
	// call's duration.
	ObserveFunc func(endpoint string, status int, d time.Duration)
	// NowFunc is the clock for x-ratelimit-reset waits and installation
	// token expiry; nil means time.Now.
	NowFunc func() time.Time
	// WaitsNowFunc is the clock the account waits (AccountWaits) are
	// measured on: a rate limit's wait is recorded as this clock's now plus
	// the wait GitHub named, and a request is held while this clock is
	// before the recorded moment. Every replica must use the same one, or
	// a replica whose clock runs ahead records a wait the others keep too
	// long (and one behind a wait they ignore): serve passes the
	// database's (budget.Clock, issue 21 point 6). nil means NowFunc.
	WaitsNowFunc func() time.Time
	// SleepFunc waits between mergeable re-reads and in-client retries; nil
	// means a timer that ends early with ctx. Tests inject one.
	SleepFunc func(ctx context.Context, d time.Duration) error
	// AccountWaits, when set, is where every replica records and reads how
	// long a GitHub account must wait after a rate limit (primary or
	// secondary), so that all replicas respect one account's wait: GitHub
	// may ban an integration that keeps calling while limited. Before each
	// request the client reads its account's wait; while it lasts the call
	// is not sent and fails with a *platform.Error of kind
	// platform.ErrRateLimited (RetryAfter the rest of the wait). After a
	// rate-limited answer it records the wait GitHub named, or
	// DefaultSecondaryWait for a secondary limit that named none. An account is the API host and a fingerprint
	// of the token (never the token), or of the App installation. A failed
	// read or write is logged and the call goes on (fail-open). nil: each
	// call on its own. store.Store implements it.
	AccountWaits AccountWaits
}

// AccountWaits records and reads how long each account must wait before
// its next request (platform.AccountWaits, as for platform/gitlab); the
// zero time means "no wait".
type AccountWaits = platform.AccountWaits

// Client calls GitHub as the robot (a token or an App installation) and as
// each reviewer. It is safe for concurrent use. Build it with New.
type Client struct {
	robot     *gh.Client
	app       *appSource // nil unless Config.App
	reviewers []*gh.Client

	basePath string // "/" or "/api/v3/", stripped from error paths
	secrets  []string
	logger   *slog.Logger
	observe  func(endpoint string, status int, d time.Duration)
	now      func() time.Time
	waitsNow func() time.Time // Config.WaitsNowFunc
	sleep    func(ctx context.Context, d time.Duration) error
	rp       retryPolicy

	mergeableReads int
	mergeableWait  time.Duration
	requiredTTL    time.Duration
	waits          AccountWaits

	mu       sync.Mutex
	repos    map[int64]repoRef
	logins   map[int64]string // user id → login, for the permission reads
	required map[string]requiredEntry

	accounts *platform.Accounts
}

// repoRef is a repository's owner and name, cached per id.
type repoRef struct {
	owner, name string
}

func (r repoRef) String() string { return r.owner + "/" + r.name }

// requiredEntry is a cached list of required contexts.
type requiredEntry struct {
	contexts []string
	at       time.Time
}

// New validates cfg, reporting every problem at once, and builds one
// go-github client for the robot and one per reviewer token. It makes no
// request (an App's first installation token is created on first use).
func New(cfg Config) (*Client, error) {
	base, err := normalizeBaseURL(cfg.BaseURL)
	var problems []error
	if err != nil {
		problems = append(problems, err)
	}
	hasToken := strings.TrimSpace(cfg.Token) != ""
	switch {
	case hasToken && cfg.App != nil:
		problems = append(problems, errors.New("set either a robot token or a GitHub App, not both"))
	case !hasToken && cfg.App == nil:
		problems = append(problems, errors.New("robot token is empty and no GitHub App is configured"))
	}
	var key any
	if cfg.App != nil {
		k, err := cfg.App.validate()
		if err != nil {
			problems = append(problems, err)
		}
		key = k
	}
	for i, t := range cfg.ReviewerTokens {
		if strings.TrimSpace(t) == "" {
			problems = append(problems, fmt.Errorf("reviewer token %d is empty", i))
		}
	}
	if cfg.RetryWaitMin < 0 || cfg.RetryWaitMax < 0 || cfg.MergeableWait < 0 {
		problems = append(problems, errors.New("waits must not be negative"))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("configuring github client: %w", errors.Join(problems...))
	}

	c := &Client{
		basePath:       base.Path,
		secrets:        append([]string{cfg.Token}, cfg.ReviewerTokens...),
		logger:         cfg.Logger,
		observe:        cfg.ObserveFunc,
		now:            cfg.NowFunc,
		waitsNow:       cfg.WaitsNowFunc,
		sleep:          cfg.SleepFunc,
		mergeableReads: cfg.MergeableReads,
		mergeableWait:  cfg.MergeableWait,
		requiredTTL:    cfg.RequiredContextsTTL,
		waits:          cfg.AccountWaits,
		repos:          map[int64]repoRef{},
		logins:         map[int64]string{},
		required:       map[string]requiredEntry{},
		accounts:       platform.NewAccounts(len(cfg.ReviewerTokens)),
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.waitsNow == nil {
		c.waitsNow = c.now
	}
	if c.sleep == nil {
		c.sleep = platform.SleepCtx
	}
	switch {
	case c.mergeableReads == 0:
		c.mergeableReads = DefaultMergeableReads
	case c.mergeableReads < 0:
		c.mergeableReads = 1
	}
	if c.mergeableWait == 0 {
		c.mergeableWait = DefaultMergeableWait
	}
	if c.requiredTTL == 0 {
		c.requiredTTL = DefaultRequiredContextsTTL
	}
	c.rp = retryPolicy{now: c.now, sleep: c.sleep,
		RetryLimits: platform.RetryLimits{Max: cfg.RetryMax, WaitMin: cfg.RetryWaitMin, WaitMax: cfg.RetryWaitMax}.
			WithDefaults(platform.RetryLimits{Max: DefaultRetryMax, WaitMin: DefaultRetryWaitMin, WaitMax: DefaultRetryWaitMax})}

	hc := platform.OwnHTTPClient(cfg.HTTPClient, defaultHTTPTimeout)
	if cfg.App != nil {
		// The App's own calls carry its JWT (appTransportToken).
		jwtClient, err := c.build(base, hc, appTransportToken, accountKey(base, fmt.Sprintf("app:%d", cfg.App.AppID)), nil)
		if err != nil {
			return nil, err
		}
		c.app = &appSource{cfg: *cfg.App, key: key, api: jwtClient, c: c}
		c.robot, err = c.build(base, hc, c.app.token, accountKey(base, fmt.Sprintf("installation:%d", cfg.App.InstallationID)), c.app.refused)
		if err != nil {
			return nil, err
		}
	} else {
		tok := cfg.Token
		c.robot, err = c.build(base, hc, staticToken(tok), accountKey(base, tok), nil)
		if err != nil {
			return nil, err
		}
	}
	for _, t := range cfg.ReviewerTokens {
		tok := t
		rc, err := c.build(base, hc, staticToken(tok), accountKey(base, tok), nil)
		if err != nil {
			return nil, err
		}
		c.reviewers = append(c.reviewers, rc)
	}
	return c, nil
}

// build makes one go-github client whose transport authenticates with
// token (nil: none, the caller sets Authorization itself), respects the
// account's wait (Config.AccountWaits), retries and records. go-github's own rate-limit bookkeeping is off: this package
// reads the headers itself (call.go) so that one clock decides.
func (c *Client) build(base *url.URL, hc *http.Client, token tokenFunc, account string, refused func(string)) (*gh.Client, error) {
	h := *hc
	h.Transport = &transport{base: h.Transport, token: token, refused: refused, rp: c.rp, logger: c.logger,
		gate: accountGate{waits: c.waits, account: account, now: c.waitsNow}}
	u := base.String()
	cl, err := gh.NewClient(gh.WithHTTPClient(&h), gh.WithUserAgent(userAgent), gh.WithURLs(&u, &u), gh.WithDisableRateLimitCheck())
	if err != nil {
		return nil, fmt.Errorf("building github client: %w", err)
	}
	return cl, nil
}

// accountKey names an account on the API at base: its host and the first
// 16 hex digits of the SHA-256 of what identifies it (a token, or
// "installation:<id>"), never the token itself.
func accountKey(base *url.URL, id string) string { return platform.AccountKey(base.Host, id) }

// normalizeBaseURL parses raw ("" is GitHub.com) and ends its path with a
// slash; a GitHub Enterprise host without a path gets "/api/v3/".
func normalizeBaseURL(raw string) (*url.URL, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		raw = DefaultBaseURL
	}
	u, err := platform.ParseBaseURL(raw)
	if err != nil {
		return nil, err
	}
	p := strings.TrimRight(u.Path, "/")
	if p == "" && u.Host != "api.github.com" && !strings.HasPrefix(u.Host, "127.0.0.1") && !strings.HasPrefix(u.Host, "localhost") {
		p = "/api/v3"
	}
	u.Path = p + "/"
	u.RawPath = ""
	return u, nil
}

// secretsNow are the configured tokens and the App's current installation
// token: what must never show in an error or a log.
func (c *Client) secretsNow() []string {
	secrets := c.secrets
	if c.app != nil {
		secrets = append(secrets[:len(secrets):len(secrets)], c.app.current()...)
	}
	return secrets
}

// redactString replaces every secret (secretsNow) in s with "[REDACTED]".
func (c *Client) redactString(s string) string { return platform.Redact(s, c.secretsNow()) }

// redact returns err unchanged unless its text contains a secret
// (platform.RedactError).
func (c *Client) redact(err error) error { return platform.RedactError(err, c.secretsNow()) }

// CurrentUser returns the robot account, read once and cached: GET /user
// for a token; for an App its bot user "<slug>[bot]" (GET /app with the
// App's JWT, then GET /users/<slug>[bot]), since an installation token
// cannot read /user.
func (c *Client) CurrentUser(ctx context.Context) (platform.User, error) {
	return c.accounts.Robot(ctx, func(ctx context.Context) (platform.User, error) {
		if c.app != nil {
			return c.app.botUser(ctx)
		}
		return c.readUser(ctx, c.robot)
	})
}

// ReviewerCount returns len(Config.ReviewerTokens).
func (c *Client) ReviewerCount() int { return len(c.reviewers) }

// Reviewer returns reviewer i (0-based, in Config.ReviewerTokens order) as
// GET /user answers with its token, cached after the first success.
func (c *Client) Reviewer(ctx context.Context, i int) (platform.User, error) {
	return c.accounts.Reviewer(ctx, i, func(ctx context.Context, i int) (platform.User, error) { return c.readUser(ctx, c.reviewers[i]) })
}

func (c *Client) readUser(ctx context.Context, api *gh.Client) (platform.User, error) {
	u, err := call(ctx, c, epUserGet, func(ctx context.Context) (*gh.User, *gh.Response, error) {
		return api.Users.Get(ctx, "")
	})
	if err != nil {
		return platform.User{}, err
	}
	return toUser(u), nil
}

// repo returns the owner and name of repository id, from the cache or GET
// /repositories/{id} (cached after the first success). A missing
// repository matches platform.ErrNotFound.
func (c *Client) repo(ctx context.Context, id int64) (repoRef, error) {
	c.mu.Lock()
	r, ok := c.repos[id]
	c.mu.Unlock()
	if ok {
		return r, nil
	}
	rp, err := call(ctx, c, epRepoGetByID, func(ctx context.Context) (*gh.Repository, *gh.Response, error) {
		return c.robot.Repositories.GetByID(ctx, id)
	})
	if err != nil {
		return repoRef{}, fmt.Errorf("reading repository %d: %w", id, err)
	}
	return c.remember(rp), nil
}

// remember caches a repository's owner and name by id.
func (c *Client) remember(rp *gh.Repository) repoRef {
	r := repoRef{owner: rp.GetOwner().GetLogin(), name: rp.GetName()}
	if r.owner == "" || r.name == "" {
		if o, n, ok := strings.Cut(rp.GetFullName(), "/"); ok {
			r = repoRef{owner: o, name: n}
		}
	}
	c.mu.Lock()
	c.repos[rp.GetID()] = r
	c.mu.Unlock()
	return r
}

// loginOf is user id's login (GET /user/{id}), cached: permission and
// membership endpoints take logins, the flows and commands ids. A login
// can change on GitHub; the cache lives as long as the client.
func (c *Client) loginOf(ctx context.Context, id int64) (string, error) {
	c.mu.Lock()
	login, ok := c.logins[id]
	c.mu.Unlock()
	if ok {
		return login, nil
	}
	u, err := call(ctx, c, epUserGetByID, func(ctx context.Context) (*gh.User, *gh.Response, error) {
		return c.robot.Users.GetByID(ctx, id)
	})
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	c.logins[id] = u.GetLogin()
	c.mu.Unlock()
	return u.GetLogin(), nil
}

// Merge methods of PUT .../pulls/{n}/merge.
const (
	MethodMerge  = "merge"
	MethodSquash = "squash"
	MethodRebase = "rebase"
)

// Project reads a repository (GET /repos/{owner}/{repo}, or GET
// /repositories/{id} when project is a numeric id). ID is the repository
// id, PathWithNamespace its full_name, DefaultBranch default_branch, WebURL
// html_url. MergeMethod is the method Merge uses, from the repository's
// allowed methods: merge when allow_merge_commit, else squash when
// allow_squash_merge, else rebase; SquashOption is "always" when squash is
// the only allowed method, "default_off" when squash is allowed beside
// another, else "never" (GitLab's squash_option words). A missing
// repository matches platform.ErrNotFound.
func (c *Client) Project(ctx context.Context, project string) (platform.Project, error) {
	if project == "" {
		return platform.Project{}, errors.New("reading project: project is empty")
	}
	rp, err := call(ctx, c, epRepoGet, func(ctx context.Context) (*gh.Repository, *gh.Response, error) {
		if owner, name, ok := strings.Cut(project, "/"); ok {
			return c.robot.Repositories.Get(ctx, owner, name)
		}
		var id int64
		if _, err := fmt.Sscan(project, &id); err != nil {
			return nil, nil, fmt.Errorf("%q is neither owner/name nor a numeric id", project)
		}
		return c.robot.Repositories.GetByID(ctx, id)
	})
	if err != nil {
		return platform.Project{}, fmt.Errorf("reading repository %s: %w", project, err)
	}
	c.remember(rp)
	return toProject(rp), nil
}

func toProject(rp *gh.Repository) platform.Project {
	p := platform.Project{
		ID:                rp.GetID(),
		PathWithNamespace: rp.GetFullName(),
		DefaultBranch:     rp.GetDefaultBranch(),
		WebURL:            rp.GetHTMLURL(),
	}
	mergeOK, squashOK, rebaseOK := rp.GetAllowMergeCommit(), rp.GetAllowSquashMerge(), rp.GetAllowRebaseMerge()
	if !mergeOK && !squashOK && !rebaseOK {
		// A token without admin rights may see none of the flags: GitHub's
		// default is merge commits.
		mergeOK = true
	}
	switch {
	case mergeOK:
		p.MergeMethod = MethodMerge
	case squashOK:
		p.MergeMethod = MethodSquash
	default:
		p.MergeMethod = MethodRebase
	}
	switch {
	case squashOK && !mergeOK && !rebaseOK:
		p.SquashOption = "always"
	case squashOK:
		p.SquashOption = "default_off"
	default:
		p.SquashOption = "never"
	}
	return p
}

// Access levels GitHub permissions map onto (GitLab's scale, which the
// command rules are written in; platform.Access*).
var permissionLevels = map[string]int{
	"read":     platform.AccessReporter,
	"triage":   platform.AccessReporter,
	"write":    platform.AccessDeveloper,
	"maintain": platform.AccessMaintainer,
	"admin":    platform.AccessOwner,
}

// AccessLevelOf maps a repository permission (GET
// .../collaborators/{username}/permission, role_name when present, else
// permission) onto GitLab's access levels: read and triage 20
// (Reporter), write 30 (Developer), maintain 40 (Maintainer), admin 50
// (Owner); none and unknown values 0.
func AccessLevelOf(permission string) int { return permissionLevels[permission] }

// MemberAccess returns userID's permission on repository projectID mapped
// by AccessLevelOf (GET /user/{id} for the login, once per user, then GET
// /repos/{o}/{r}/collaborators/{login}/permission; fixture
// api-repos-collaborator-permission.json). Organization members and team
// grants count, as GitHub computes them. A user GitHub does not know, or
// who has no access (404 or "none"), yields 0 and a nil error.
func (c *Client) MemberAccess(ctx context.Context, projectID, userID int64) (int, error) {
	r, err := c.repo(ctx, projectID)
	if err != nil {
		return 0, fmt.Errorf("reading access of user %d: %w", userID, err)
	}
	login, err := c.loginOf(ctx, userID)
	if errors.Is(err, platform.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading access of user %d on %s: %w", userID, r, err)
	}
	perm, err := call(ctx, c, epPermissionGet, func(ctx context.Context) (*gh.RepositoryPermissionLevel, *gh.Response, error) {
		return c.robot.Repositories.GetPermissionLevel(ctx, r.owner, r.name, login)
	})
	if errors.Is(err, platform.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading access of %s on %s: %w", login, r, err)
	}
	if role := perm.GetRoleName(); AccessLevelOf(role) > 0 {
		return AccessLevelOf(role), nil
	}
	return AccessLevelOf(perm.GetPermission()), nil
}

// GroupMemberAccess returns userID's access in organization group (its
// login): 50 (Owner) for an active admin membership, 30 (Developer) for an
// active member, 0 and a nil error when the user is not a member, the
// membership is pending, or GitHub hides it (404: the robot cannot see the
// organization's members). GET /orgs/{org}/memberships/{username}.
func (c *Client) GroupMemberAccess(ctx context.Context, group string, userID int64) (int, error) {
	login, err := c.loginOf(ctx, userID)
	if errors.Is(err, platform.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading access of user %d in organization %s: %w", userID, group, err)
	}
	m, err := call(ctx, c, epOrgMembershipGet, func(ctx context.Context) (*gh.Membership, *gh.Response, error) {
		return c.robot.Organizations.GetOrgMembership(ctx, login, group)
	})
	if errors.Is(err, platform.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading access of %s in organization %s: %w", login, group, err)
	}
	if m.GetState() != "active" {
		return 0, nil
	}
	if m.GetRole() == "admin" {
		return platform.AccessOwner, nil
	}
	return platform.AccessDeveloper, nil
}

// MergeAccessLevel answers the commands' question "which access level may
// merge into branch" in GitHub's terms: merging a pull request needs write
// permission on the repository (AccessLevelOf("write"), 30) whether or not
// the branch is protected; a protection's push restrictions name people,
// teams and apps, not levels (docs.github.com "About protected branches",
// "Restrict who can push to matching branches"). It makes no call;
// protected is reported true so callers apply the level.
func (c *Client) MergeAccessLevel(_ context.Context, _ int64, _ string) (level int, protected bool, err error) {
	return platform.AccessDeveloper, true, nil
}
